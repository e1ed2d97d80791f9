"""A linear layer's rows in a blocked layout: ``CN{c}c`` stores
feature blocks outermost; dense kernels read and write it, the graph carries the rows between two linear layers as a
layout edge, export converts where a fixed op reads them, and the solver blocks them where it pays."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from cost_models.cache import CostRecord
from cost_models.features import feature_row
from cost_models.pricing import build_problem
from cost_models.tasks import KernelTask, TransformTask
from search.bf16_bits import from_bf16_bits, to_bf16_bits
from search.candidates import Candidate
from search.emit import emit_module
from search.errors import SearchError
from search.export import export
from search.graph import extract_graph
from search.host import make_target
from search.kinds import kernel_kind
from search.kinds.checks import check_kernel, kernel_error
from search.layouts import Layout, LayoutError, activation_layout, activation_shape
from search.plan import Plan, baseline_plan, plan_from_assignment, validate
from search.precision import TOLERANCE, bf16_settings, precision_of
from search.space import parse_layouts, tuning_space
from search.templates import dense
from search.templates.workloads import DenseWorkload, Epilogue, KernelSpec
from search.zoo import load_model
from solvers import solve
from tests.search.test_bf16_storage import _run

TARGET = make_target(1)
FULL = Epilogue(True, True, "gelu")


def test_a_row_layout_stores_feature_blocks_outermost():
    rows = np.arange(3 * 8).reshape(3, 8)
    blocked = Layout.parse("CN4c")
    assert blocked.logical == "NC" and blocked.physical_shape((3, 8)) == (2, 3, 4)
    stored = blocked.from_logical(rows)
    assert stored[1, 2].tolist() == [20, 21, 22, 23]  # row 2, features 4..7: contiguous
    assert np.array_equal(blocked.to_logical(stored), rows)
    assert activation_shape((2, 5, 8)) == (10, 8) and activation_shape((2, 3)) == (2, 3)
    assert activation_shape((1, 2, 3, 4, 5)) is None
    assert activation_layout("CN8c", (2, 5, 16)).block() == 8
    with pytest.raises(LayoutError, match="divisible by 32"):
        activation_layout("CN32c", (4, 16))
    assert parse_layouts("NCHW16c,CN16c") == ("NCHW16c", "CN16c")


def test_dense_runs_every_pair_of_nc_and_the_blocks_dividing_its_features():
    pairs = [pair for pair in dense.supported_layouts(DenseWorkload(6, 32, 24)) if ".bf16" not in "".join(pair)]
    assert pairs[0] == ("NC", "NC") and len(pairs) == len(set(pairs))
    assert {i for i, _ in pairs} == {"NC", "CN4c", "CN8c", "CN16c", "CN32c"}
    assert {o for _, o in pairs} == {"NC", "CN4c", "CN8c"}  # 24 features: no 16 or 32 block
    assert dense.supported_layouts(DenseWorkload(1, 32, 32)) == [("NC", "NC")]  # one row: one memory order
    space = dense.knob_space(KernelSpec(DenseWorkload(6, 32, 24), "NC", "CN8c"))
    fp32 = [knobs for knobs in space if precision_of(knobs) == "fp32"]
    assert {dict(knobs)["oc_bn"] for knobs in fp32} == {8}  # a blocked output's block is the kernel's
    with pytest.raises(SearchError, match="no dense kernel for layouts NC -> CN16c"):
        kernel_kind("dense").check_spec(KernelSpec(DenseWorkload(6, 32, 24), "NC", "CN16c"))


@pytest.mark.parametrize(
    ("wl", "in_layout", "out_layout", "knobs"),
    [
        (DenseWorkload(6, 32, 48), "NC", "CN16c", ()),
        (DenseWorkload(6, 32, 48), "CN8c", "NC", (("oc_bn", 16), ("reg_b", 2))),
        (DenseWorkload(6, 32, 48), "CN16c", "CN16c", (("k_unroll", 8),)),
        (DenseWorkload(6, 32, 48), "CN32c", "CN8c", (("reg_b", 3),)),
        (DenseWorkload(7, 16, 32), "CN16c", "CN32c", (("reg_b", 4),)),  # 7 rows: padded register tiles
    ],
)
def test_a_dense_kernel_in_row_layouts_matches_numpy(wl, in_layout, out_layout, knobs):
    check_kernel(KernelSpec(wl, in_layout, out_layout, knobs, FULL), target=TARGET)


def test_a_row_transform_is_a_task_with_features():
    task = TransformTask((6, 32), "NC", "CN16c")
    assert task.shape == (6, 32) and not task.free
    assert np.isfinite(feature_row(task.key)).all()
    with pytest.raises(SearchError, match="NCHW or NC shape"):
        TransformTask((2, 6, 32), "NC", "CN16c")


@pytest.fixture(scope="module")
def bert():
    return extract_graph(load_model("bert_small"))


def _ffn_edges(graph) -> list:
    """The edges between two dense nodes: each layer's feed-forward pair."""
    return [e for e in graph.edges if graph.op(e.src).kind == graph.op(e.dst).kind == "dense"]


def _ffn(graph) -> tuple[str, str]:
    edge = _ffn_edges(graph)[0]
    return edge.src, edge.dst


def test_the_rows_between_two_linear_layers_are_a_layout_edge(bert):
    dense_edges = _ffn_edges(bert)
    assert len(dense_edges) == 2 and all(e.shape == (16, 128) for e in dense_edges)  # one per layer: 16 tokens
    assert all(bert.op(e.src).attrs["activation"] == "gelu" for e in dense_edges)
    reads = [r for r in bert.boundary_reads if bert.op(r.node).kind == "dense"]
    assert reads and all(r.shape == (16, 64) for r in reads)  # from the layer norms (fixed NC)


def test_a_plan_with_blocked_rows_exports_and_checks(bert, tmp_path):
    ffn_in, ffn_out = _ffn(bert)
    query = next(op.name for op in bert.tunable if op.kind == "dense")
    choices = {**baseline_plan(bert, "nchw").choices, ffn_in: "NC>CN16c", ffn_out: "CN16c>CN16c", query: "CN8c>CN16c"}
    emitted = emit_module(bert, validate(Plan(choices, "bert_small", {}), bert), TARGET)
    names = {b.var.name for block in emitted.module["main"].body.blocks for b in block.bindings}
    assert f"{ffn_out}_to_NC" in names and f"{query}_to_NC" in names  # read by a fixed op: back to NC
    assert not any(name.startswith(f"{ffn_in}_to") for name in names)  # its consumer reads the block as it is
    assert sum(name.endswith("_to_CN8c") for name in names) == 1  # the query's input, from a layer norm
    compiled = export(bert, Plan(choices, "bert_small", {}), target=TARGET, threads=1, seed=2)
    assert compiled.manifest["numerical_check"]["passed"]
    compiled.save(tmp_path / "art")
    assert '"NC>CN16c' in (tmp_path / "art" / "plan.json").read_text()


@pytest.mark.parametrize(("transform_ms", "blocked"), [(5.0, "ffn"), (0.01, "all")])
def test_the_solver_blocks_the_rows_where_it_pays(bert, transform_ms, blocked):
    """Dense kernels reading blocked rows cost 0.5 ms, the others 1 ms; every transform ``transform_ms``."""

    def costs(tasks):
        return [CostRecord(_cost(task), 0.0, 3) for task in tasks]

    def _cost(task) -> float:
        if isinstance(task, KernelTask):
            spec = task.spec
            return 0.5 if spec.workload.kind == "dense" and spec.in_layout != "NC" else 1.0
        return transform_ms

    problem = build_problem(bert, tuning_space(bert, layouts=("NCHW", "CN16c"), space_size=8), costs)
    solution = solve(problem)
    plan = plan_from_assignment(solution.assignment, "bert_small", {}, auxiliary=problem.meta.get("auxiliary", ()))
    reads = {node: Candidate.parse(choice).in_layout for node, choice in plan.choices.items()
             if bert.op(node).kind == "dense"}
    if blocked == "ffn":  # only where no transform is needed: each feed-forward pair
        edges = _ffn_edges(bert)
        assert all(Candidate.parse(plan.choices[e.src]).out_layout == "CN16c" for e in edges)
        assert {node for node, read in reads.items() if read != "NC"} == {e.dst for e in edges}
    else:
        assert set(reads.values()) == {"CN16c"}
    assert np.isfinite(solution.cost)


SETTINGS = bf16_settings()
needs_bf16 = pytest.mark.skipif(not SETTINGS, reason="this CPU has no bf16 instructions (avx512_bf16, amx_bf16)")


@needs_bf16
@pytest.mark.parametrize("pair", [("NC", "CN32c.bf16"), ("CN32c.bf16", "NC"), ("CN32c.bf16", "CN32c.bf16"),
                                  ("CN16c.bf16", "NC")])
def test_a_bf16_linear_layer_reads_and_writes_bf16_rows(pair):
    kind = kernel_kind("dense")
    workload = DenseWorkload(10, 48 if "CN16c.bf16" in pair else 64, 64)
    spec = KernelSpec(workload, *pair, (), Epilogue(True, False, "gelu"))
    assert pair in kind.supported_layouts(workload) and kind.knob_space(spec) == SETTINGS  # bf16 alone, no int8
    assert 1e-4 < kernel_error(spec, target=TARGET) <= TOLERANCE
    assert ("sblock(\"pack\")" in kind.build(spec, TARGET).script()) == (pair[0] != "CN32c.bf16")  # read as packed
    rng = np.random.default_rng(5)
    data = rng.uniform(-1, 1, (workload.batch, workload.in_features)).astype(np.float32)
    params = kind.random_params(workload, spec.epilogue, rng)
    outs = []
    for out_layout in ("NC", pair[1]):  # writing bf16 values rounds what the kernel writing fp32 computes
        run = replace(spec, out_layout=out_layout, knobs=SETTINGS[0])
        stored_in, stored_out = Layout.parse(run.in_layout), Layout.parse(out_layout)
        outs.append(stored_out.to_logical(_run(kind.build(run, TARGET), stored_in.from_logical(data),
                                               *kind.pack(run, params), out=np.zeros(stored_out.physical_shape(
                                                   (workload.batch, workload.out_features)), stored_out.dtype))))
    rounded = from_bf16_bits(to_bf16_bits(outs[0])) if pair[1].endswith(".bf16") else outs[0]
    assert np.array_equal(outs[1], rounded)


@needs_bf16
def test_a_feed_forward_pair_keeps_its_rows_in_bf16(bert):
    ffn_in, ffn_out = _ffn(bert)
    bf16 = ",".join(f"{k}={v}" for k, v in SETTINGS[0])
    choices = {**baseline_plan(bert, "nchw").choices, ffn_in: f"NC>CN32c.bf16:{bf16}", ffn_out: f"CN32c.bf16>NC:{bf16}"}
    compiled = export(bert, Plan(choices, "bert_small", {}), target=TARGET, threads=1, seed=2)
    uniform = export(bert, baseline_plan(bert, "nchw"), target=TARGET, threads=1, seed=2)
    assert compiled.manifest["layout_transforms"] == uniform.manifest["layout_transforms"]  # no conversion
    check = compiled.manifest["numerical_check"]
    assert check["passed"] and 1e-5 < check["relative_error"] <= TOLERANCE
    assert compiled.manifest["bf16_values"] == [ffn_in] and compiled.manifest["bf16_nodes"] == [ffn_in, ffn_out]
    wanted = Candidate("NC", "CN32c.bf16", SETTINGS[0])  # bf16 rows are searched wherever bf16 is, as NC rows are
    assert wanted in tuning_space(bert, precision="auto")[ffn_in]
    assert wanted in tuning_space(bert, precision="bf16", layouts=("NCHW",))[ffn_in]
    assert not any("CN32c>" in c.name or c.out_layout == "CN32c" for c in tuning_space(bert, precision="auto")[ffn_in])
    assert not any(".bf16" in c.in_layout + c.out_layout for c in tuning_space(bert, layouts=("NCHW", "CN32c"))[ffn_in])
