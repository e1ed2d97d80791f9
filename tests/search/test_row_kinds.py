"""The softmax and layer norm kinds: what they match in a transformer, both schedules, their place in the cost problem,
and export of a plan that runs them (also behind a convolution in a blocked layout)."""

from __future__ import annotations

import numpy as np
import pytest
from tvm import relax

from cost_models.cache import CostCache
from cost_models.measure import MeasuredCosts
from cost_models.pricing import build_problem
from search.export import export
from search.graph import extract_graph
from search.host import make_target
from search.kinds import KINDS, check_kind
from search.plan import baseline_plan
from search.space import tuning_space
from search.templates.workloads import KernelSpec, LayerNormWorkload, SoftmaxWorkload
from search.zoo import load_model
from tests.search.tiny_nets import build

TARGET = make_target(1)


@pytest.fixture(scope="module")
def bert():
    return extract_graph(load_model("bert_small"))


def test_bert_runs_its_softmaxes_and_layer_norms_as_kernels(bert):
    softmax = [op for op in bert.tunable if op.kind == "softmax"]
    norms = [op for op in bert.tunable if op.kind == "layer_norm"]
    assert len(softmax) == 2 and len(norms) == 5  # one per layer; after the embeddings and twice per layer
    assert all(op.layout_free for op in softmax + norms)
    fixed = {op.kind for op in bert.ops if op.role == "fixed"}
    assert not fixed & {"nn.softmax", "nn.layer_norm", "multiply"}  # the scores' scale is the softmax's
    assert softmax[0].attrs["scale"] == pytest.approx(1 / np.sqrt(16))  # head size 16
    workload = KINDS["softmax"].workload(softmax[0])
    assert workload == SoftmaxWorkload(1 * 4 * 16, 16, softmax[0].attrs["scale"])
    assert KINDS["layer_norm"].workload(norms[0]) == LayerNormWorkload(16, 64, norms[0].attrs["epsilon"])
    assert norms[0].params["gamma"].shape == norms[0].params["beta"].shape == (64,)


@pytest.mark.parametrize("workload", [SoftmaxWorkload(4, 64, 0.25), LayerNormWorkload(4, 64)])
def test_both_schedules_compute_the_reference(workload):
    kind = KINDS[workload.kind]
    spec = KernelSpec(workload, "NC", "NC", (), kind.epilogues[0])
    assert kind.knob_space(spec) == [(("partial", 1),), (("partial", 0),)]
    check_kind(kind, [workload], target=TARGET)  # every knob setting against numpy
    partial, per_row = (kind.build(KernelSpec(workload, "NC", "NC", knobs), TARGET).script()
                        for knobs in kind.knob_space(spec))
    assert "rf" in partial and "rf" not in per_row  # the per-lane partial sums are an rfactor block


def test_rows_that_are_no_whole_number_of_vectors_have_one_schedule():
    spec = KernelSpec(SoftmaxWorkload(3, 20), "NC", "NC")
    assert KINDS["softmax"].knob_space(spec) == [(("partial", 0),)]


def test_they_are_priced_nodes_of_the_cost_problem(bert, tmp_path):
    space = tuning_space(bert, space_size=2)
    progress = []
    for _ in range(2):
        with MeasuredCosts(CostCache(tmp_path / "costs.sqlite"), target=TARGET, threads=1, repeat=2,
                           min_repeat_ms=5, progress=progress.append) as provider:
            problem = build_problem(bert, space, provider.measure)
    rows = [op.name for op in bert.tunable if op.kind in ("softmax", "layer_norm")]
    assert all(entry["kernel_ms"] > 0 for name in rows for entry in problem.meta["candidates"][name].values())
    assert progress[-1].total == 0  # the second run found every task cached, these kinds' too


def test_a_softmax_behind_a_blocked_convolution_reads_it_converted():
    def body(net, x):
        y = net.conv(x, 16)
        z = net.bb.emit(relax.op.nn.softmax(y, axis=-1))
        return net.conv(z, 8, k=1)

    graph = extract_graph(build((1, 4, 6, 16), body))
    assert [op.kind for op in graph.tunable] == ["conv2d", "softmax", "conv2d"]
    manifest = export(graph, baseline_plan(graph, "nchw16c"), target=TARGET, threads=1).manifest
    assert manifest["numerical_check"]["passed"]
