"""A concat in place: its producers' kernels write their slices of its output, so the concat copies nothing. Which
concats may, export in every layout with its numerical check, the plan's validation, pricing and the solver's
choice."""

from __future__ import annotations

import numpy as np
import pytest
from tvm import relax

from cost_models.cache import CostRecord
from cost_models.pricing import build_problem, chain_task
from cost_models.tasks import ChainTask
from search.artifact import load_artifact
from search.candidates import Candidate
from search.errors import SearchError
from search.export import export
from search.graph import extract_graph
from search.host import make_target
from search.in_place import write_into
from search.plan import Plan, baseline_plan, plan_from_assignment, validate
from search.space import tuning_space
from solvers import solve
from tests.search.tiny_nets import build, residual_concat_net

TARGET = make_target(1)
LAYOUTS = ("NCHW", "NHWC", "NCHW8c", "NCHW16c")


def _branches_net(followers: bool = False, shared: bool = False, blocks: int = 1, batch: int = 2):
    """Inception's pattern, ``blocks`` times: three convolutions of one input concatenated (48 channels), then a 1x1
    convolution; with ``followers`` a BatchNorm and ReLU6 after the concat (which then run on their own: no
    convolution reads through a ReLU6 prologue), with
    ``shared`` the first branch also feeds the 1x1 convolution's residual."""

    def body(net, x):
        for _ in range(blocks):
            branches = [net.conv(x, 16, k=1), net.conv(x, 16), net.conv(net.conv(x, 8, k=1), 16, act=None)]
            cat = net.bb.emit(relax.op.concat(branches, axis=1))
            if followers:
                cat = net.bb.emit(relax.op.multiply(cat, net.const((1, 48, 1, 1))))
                cat = net.bb.emit(relax.op.add(cat, net.const((1, 48, 1, 1))))
                cat = net.bb.emit(relax.op.clip(cat, 0, 6))
            x = net.conv(cat, 16, k=1, residual=branches[0] if shared else None)
        return x

    return build((batch, 16, 6, 6), body)  # batch 2: strided slices in every layout; 1: contiguous but in NHWC


def _in_place(candidate_name: str) -> bool:
    return Candidate.parse(candidate_name).in_place


def test_kernels_read_by_the_concat_alone_write_it_and_other_inputs_are_copied_in():
    graph = extract_graph(_branches_net())
    assert graph.op("concat_0").attrs == {"in_place": True}
    names = [c.name for c in tuning_space(graph, layouts=LAYOUTS)["concat_0"]]
    assert [n for n in names if _in_place(n)] == [f"{name}>{name}:in_place=1" for name in LAYOUTS]
    short = tuning_space(graph, layouts=LAYOUTS, space_size=2)  # a layout kind keeps every layout and variant
    assert [c.name for c in short["concat_0"]] == names and len(short["conv2d_0"]) < len(names)
    shared = extract_graph(_branches_net(shared=True))  # the first branch feeds a residual too: copied
    assert shared.op("concat_0").attrs == {"in_place": True, "copied": ("conv2d_0",)}
    no_kernel = extract_graph(build((1, 8, 4, 4), lambda net, x: net.conv(
        net.bb.emit(relax.op.concat([x, net.bb.emit(relax.op.nn.relu(x))], axis=1)), 8, k=1)))
    assert "in_place" not in no_kernel.op("concat_0").attrs  # nothing to write: no in-place setting
    assert not any(map(_in_place, (c.name for c in tuning_space(no_kernel)["concat_0"])))
    with pytest.raises(SearchError, match="allowed: none$"):
        validate(Plan({**baseline_plan(no_kernel, "nchw").choices, "concat_0": "NCHW>NCHW:in_place=1"}), no_kernel)


@pytest.mark.parametrize("name", LAYOUTS)
def test_in_place_exports_in_every_layout_passes_the_check_and_runs_no_concat(name, tmp_path):
    graph = extract_graph(_branches_net(followers=name == "NCHW8c"))
    baseline = baseline_plan(graph, name.lower())
    plan = Plan({**baseline.choices, "concat_0": f"{name}>{name}:in_place=1"}, model="tiny")
    compiled = export(graph, plan, target=TARGET, threads=1, seed=3)
    assert compiled.manifest["numerical_check"]["passed"]
    symbols = [call["symbol"] for call in compiled.manifest["calls"]]
    copied = [call["symbol"] for call in export(graph, baseline, target=TARGET, threads=1, seed=3).manifest["calls"]]
    assert not any("concat" in s and "into" not in s for s in symbols)  # the copy is gone ...
    assert any(s.startswith("fused_concatenate") or s == "concatenate" for s in copied)  # ... which the baseline runs
    assert sum(s.endswith("_into_concat_0") for s in symbols) == 3
    compiled.save(tmp_path / "art")
    assert load_artifact(tmp_path / "art").plan.choices["concat_0"] == f"{name}>{name}:in_place=1"


def test_producers_in_other_layouts_or_winograd_write_the_concats_and_equal_blocks_share_kernels():
    graph = extract_graph(_branches_net(blocks=2, batch=1))  # equal blocks: equal in-place kernels, one function each
    choices = {**baseline_plan(graph, "nchw8c").choices, "concat_0": "NCHW8c>NCHW8c:in_place=1",
               "concat_1": "NCHW8c>NCHW8c:in_place=1",
               "conv2d_0": "NHWC>NCHW8c", "conv2d_1": "NCHW8c>NCHW8c:reg_n=8,winograd=2", "conv2d_3": "NCHW>NCHW8c"}
    compiled = export(graph, Plan(choices, model="tiny"), target=TARGET, threads=1, seed=4)
    assert compiled.manifest["numerical_check"]["passed"]
    symbols = [call["symbol"] for call in compiled.manifest["calls"]]
    assert sum("_into_concat_" in s for s in symbols) == 6 and not any(s.startswith("fused_concat") for s in symbols)
    assert "conv2d_0_NHWC_NCHW8c_into_concat_0" in symbols  # the data arrives in NHWC: one transform, read in NHWC


def test_a_plan_whose_producers_store_another_layout_is_rejected():
    graph = extract_graph(_branches_net())
    choices = {**baseline_plan(graph, "nchw16c").choices, "concat_0": "NHWC>NHWC:in_place=1"}
    with pytest.raises(SearchError, match="concat_0 runs in place in NHWC.*conv2d_0 \\(NCHW16c\\)"):
        validate(Plan(choices), graph)


@pytest.mark.parametrize("followers", [False, True])
def test_pricing_charges_only_the_followers_and_forbids_other_producer_layouts(followers):
    graph = extract_graph(_branches_net(followers=followers))
    in_place = Candidate("NCHW8c", "NCHW8c", (("in_place", 1),))
    task = chain_task(graph, "concat_0", in_place)
    assert (task is None) is not followers
    if followers:  # the BatchNorm and ReLU as a pass of their own over the concatenated output
        assert task.head == "output" and task.inputs == ((2, 48, 6, 6),) and len(task.followers) == 3
    assert isinstance(chain_task(graph, "concat_0", Candidate("NCHW8c", "NCHW8c")), ChainTask)

    space = tuning_space(graph, layouts=LAYOUTS)
    problem = build_problem(graph, space, lambda tasks: [CostRecord(1.0, 0.0, 3) for _ in tasks])
    src, dst = problem.index("conv2d_1"), problem.index("concat_0")
    matrix = problem.pairs[(src, dst)]
    for i, producer in enumerate(space["conv2d_1"]):
        for j, consumer in enumerate(space["concat_0"]):
            forbidden = consumer.in_place and producer.out_layout != consumer.in_layout
            assert np.isinf(matrix[i, j]) == forbidden


def test_the_solver_takes_in_place_where_the_copy_costs_and_the_plan_exports():
    graph = extract_graph(residual_concat_net())  # a concat of two convolutions among every other kind of node

    def costs(tasks):  # kernels 1 ms, the concat's copy 0.5 ms, transforms 0.3 ms
        return [CostRecord(0.5 if isinstance(t, ChainTask) and t.head == "concat" else
                           0.3 if type(t).__name__ == "TransformTask" else 1.0, 0.0, 3) for t in tasks]

    problem = build_problem(graph, tuning_space(graph, layouts=LAYOUTS), costs)
    solution = solve(problem)
    plan = plan_from_assignment(solution.assignment, "tiny", {}, auxiliary=problem.meta.get("auxiliary", ()))
    assert _in_place(plan.choices["concat_0"])
    assert export(graph, plan, target=TARGET, threads=1, seed=2).manifest["numerical_check"]["passed"]


@pytest.mark.parametrize("batch", [1, 2])  # a contiguous slice and a strided one
def test_write_into_writes_the_slice_and_leaves_the_rest(batch):
    import tvm
    from tvm import te

    x = te.placeholder((batch, 4, 3, 2), name="x")
    func = te.create_prim_func([x, te.compute(x.shape, lambda *i: x[i] * 2.0, name="y")])
    into = write_into(func, (batch, 10, 3, 2), 1, 5)
    lib = tvm.compile(tvm.IRModule({"main": into.with_attr("global_symbol", "main")}), target="llvm")
    data = np.random.default_rng(0).uniform(size=(batch, 4, 3, 2)).astype("float32")
    full = tvm.runtime.tensor(np.full((batch, 10, 3, 2), -1.0, "float32"))
    lib["main"](tvm.runtime.tensor(data), full)
    expected = np.full((batch, 10, 3, 2), -1.0, "float32")
    expected[:, 5:9] = data * 2.0
    np.testing.assert_array_equal(full.numpy(), expected)


def test_write_into_refuses_an_output_that_is_no_slice():
    from tvm import te

    x = te.placeholder((1, 4, 2, 2), name="x")
    func = te.create_prim_func([x, te.compute((1, 4, 2, 2), lambda *i: x[i] * 2.0, name="y")])
    with pytest.raises(RuntimeError, match="no slice"):
        write_into(func, (1, 6, 3, 2), 1, 0)  # heights differ
    with pytest.raises(RuntimeError, match="no slice"):
        write_into(func, (1, 6, 2, 2), 1, 4)  # channels 4..8 of 6
