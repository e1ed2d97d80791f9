"""Attention's head layouts as choices: the batch_matmul kind takes the permutes that split and merge the heads, each
becomes a layout its kernel reads through or export transposes (a priced transform), and plans mixing the two
export and pass the numerical check."""

from __future__ import annotations

import pytest

from cost_models.pricing import measurement_tasks
from cost_models.tasks import TransformTask
from search.candidates import Candidate, candidate_space, default_knobs
from search.errors import SearchError
from search.export import export
from search.graph import extract_graph
from search.host import make_target
from search.kinds import get_kind
from search.plan import Plan, baseline_plan
from search.templates.workloads import BatchMatmulWorkload, KernelSpec
from search.zoo import load_model

KIND = get_kind("batch_matmul")
# bert_small's four attention matmuls (scores, context of layer 0, then of layer 1), each its head layouts
MIXED = {"batch_matmul_0": ("NHCW+NWCH", "BIJ"), "batch_matmul_1": ("NCHW+NHCW", "BIJ"),
         "batch_matmul_2": ("BIJ", "BIJ"), "batch_matmul_3": ("BIJ", "NHCW")}
TRANSFORMS = {"batch_matmul_0": 0, "batch_matmul_1": 1, "batch_matmul_2": 2, "batch_matmul_3": 1}


@pytest.fixture(scope="module")
def graph():
    return extract_graph(load_model("bert_small"))


def _plan(graph, layouts: dict[str, tuple[str, str]]) -> Plan:
    base = baseline_plan(graph, "nchw")
    choices = dict(base.choices)
    for node, (in_layout, out_layout) in layouts.items():
        op = graph.op(node)
        choices[node] = Candidate(in_layout, out_layout, default_knobs(op, in_layout, out_layout)).name
    return Plan(choices, vector_unit=base.vector_unit)


def test_the_permutes_around_attention_matmuls_become_their_stored_layouts(graph):
    scores, context = graph.op("batch_matmul_0"), graph.op("batch_matmul_1")
    assert scores.attrs == {"operands": ("NHCW", "NWCH"), "result": "NCHW"}  # queries and keys token-major
    assert context.attrs == {"operands": ("NCHW", "NHCW"), "result": "NHCW"}  # values in, context out token-major
    assert scores.input_shapes == ((1, 16, 4, 16), (1, 16, 4, 16)) and context.shape == (1, 16, 4, 16)
    assert not any(op.kind == "permute_dims" for op in graph.ops)
    assert KIND.workload(scores) == BatchMatmulWorkload(4, 16, 16, 16, heads=4)
    space = candidate_space(graph, 1)
    assert {c.in_layout + ">" + c.out_layout for c in space["batch_matmul_0"]} == {"BIJ>BIJ", "NHCW+NWCH>BIJ"}
    assert len(space["batch_matmul_1"]) == 4  # {BIJ, NCHW+NHCW} x {BIJ, NHCW}


def test_head_major_reads_are_priced_transforms_and_token_major_reads_are_free(graph):
    scores = graph.op("batch_matmul_0")
    head_major = KIND.conversions(scores, KIND.spec(scores, "BIJ", "BIJ"))
    assert [(c.input, c.src, c.dst, c.shape) for c in head_major] == [
        (0, "NHCW", "NCHW", (1, 4, 16, 16)), (1, "NWCH", "NCHW", (1, 4, 16, 16))]
    assert KIND.conversions(scores, KIND.spec(scores, "NHCW+NWCH", "BIJ")) == []
    space = {node: [c for c in candidate_space(graph, 1)[node]] for node in [op.name for op in graph.tunable]}
    transforms = {t for t in measurement_tasks(graph, space) if isinstance(t, TransformTask)}
    assert {TransformTask((1, 4, 16, 16), "NHCW", "NCHW"), TransformTask((1, 4, 16, 16), "NWCH", "NCHW"),
            TransformTask((1, 4, 16, 16), "NCHW", "NHCW")} <= transforms


def test_a_plan_with_mixed_head_layouts_exports_and_checks(graph):
    compiled = export(graph, _plan(graph, MIXED), target=make_target(1), threads=1)
    assert compiled.manifest["numerical_check"]["passed"]
    assert compiled.manifest["layout_transforms"] == sum(TRANSFORMS.values())


@pytest.mark.parametrize("in_layout, out_layout, message", [
    ("NHCW+NWCH+NCHW", "BIJ", "neither BIJ"), ("NCHW16c+NWCH", "BIJ", "unblocked"), ("NCHW+NCHW", "BIJ", "as BIJ"),
    ("BIJ", "NCHW", "as BIJ"), ("BIJ", "NHWC8", "unknown layout")])
def test_malformed_head_layouts_are_refused_by_name(graph, in_layout, out_layout, message):
    spec = KernelSpec(BatchMatmulWorkload(4, 16, 16, 16, heads=4), in_layout, out_layout)
    with pytest.raises(SearchError, match=message):
        KIND.check_spec(spec)
