"""A dense block's concats in place: the block output is one buffer, each layer's 3x3 convolution writes its slice,
the block input is copied in once, and every earlier concat is a view of the buffer's first channels. Which concats
form a family, export and the numerical check, the plan's validation, pricing and the solver's choice."""

from __future__ import annotations

import math

import numpy as np
import pytest
from tvm import relax

from cost_models.cache import CostRecord
from cost_models.pricing import build_problem, chain_task
from cost_models.tasks import ChainTask
from search.candidates import Candidate
from search.errors import SearchError
from search.export import export
from search.graph import extract_graph
from search.host import make_target
from search.plan import Plan, baseline_plan, plan_from_assignment, validate
from search.space import tuning_space
from solvers import solve
from tests.search.tiny_nets import build, dense_block_net

TARGET = make_target(1)
LAYOUTS = ("NCHW", "NHWC", "NCHW8c", "NCHW16c")
IN_PLACE = "{0}>{0}:in_place=1"


def _in_place_layouts(graph, node: str) -> list[str]:
    return [c.out_layout for c in tuning_space(graph, layouts=LAYOUTS)[node] if c.in_place]


def _block_plan(graph, layout: str) -> Plan:
    """The uniform plan in ``layout`` with both concats of the dense block in place."""
    return Plan({**baseline_plan(graph, layout.lower()).choices, "concat_0": IN_PLACE.format(layout),
                 "concat_1": IN_PLACE.format(layout)}, model="tiny")


def test_a_dense_block_is_one_family_its_input_copied_and_views_only_where_a_prefix_is_contiguous():
    graph = extract_graph(dense_block_net())
    assert graph.op("concat_1").attrs == {"in_place": True, "copied": ("conv2d_0",), "views": ("concat_0",)}
    assert graph.op("concat_0").attrs == {"in_place": True, "view_of": "concat_1", "copied": ("conv2d_0",)}
    # the first 24 channels are the start of the memory in NCHW and NCHW8c at batch 1, never in NHWC
    assert _in_place_layouts(graph, "concat_0") == _in_place_layouts(graph, "concat_1") == ["NCHW", "NCHW8c"]
    batch2 = extract_graph(dense_block_net(batch=2))  # the second image's channels come between: no views
    assert _in_place_layouts(batch2, "concat_0") == _in_place_layouts(batch2, "concat_1") == []


def test_a_prefix_of_two_concats_belongs_to_neither():
    def body(net, x):
        a, b, c, d = (net.conv(x, 8) for _ in range(4))
        cats = [net.bb.emit(relax.op.concat(inputs, axis=1)) for inputs in ([a, b], [a, b, c], [a, b, d])]
        return net.bb.emit(relax.op.add(net.bb.emit(relax.op.add(cats[1], cats[2])), net.conv(cats[0], 24, k=1)))

    graph = extract_graph(build((1, 8, 4, 4), body))
    assert "in_place" not in graph.op("concat_0").attrs
    for owner, written in (("concat_1", "conv2d_2"), ("concat_2", "conv2d_3")):  # a and b are read by all three
        assert graph.op(owner).attrs == {"in_place": True, "copied": ("conv2d_0", "conv2d_1")}
        assert [op.inputs[-1] for op in [graph.op(owner)]] == [written]


@pytest.mark.parametrize("layout", ["NCHW", "NCHW8c"])
def test_the_block_exports_with_one_copy_no_concat_and_passes_the_check(layout):
    graph = extract_graph(dense_block_net())
    compiled = export(graph, _block_plan(graph, layout), target=TARGET, threads=1, seed=5)
    assert compiled.manifest["numerical_check"]["passed"]
    symbols = [call["symbol"] for call in compiled.manifest["calls"]]
    assert not any("concat" in s and "_into_" not in s for s in symbols)
    assert [s for s in symbols if s.startswith("copy_")] == ["copy_conv2d_0_into_concat_1"]
    assert sum(s.endswith("_into_concat_1") and not s.startswith("copy_") for s in symbols) == 2  # the 3x3 convs
    assert compiled.plan.choices["concat_0"] == IN_PLACE.format(layout)


def test_a_family_runs_in_place_together_in_one_layout():
    graph = extract_graph(dense_block_net())
    base = baseline_plan(graph, "nchw8c").choices
    with pytest.raises(SearchError, match="concat_1 runs in place in NCHW8c, so the concats sharing its buffer "
                                          "must too.*concat_0 \\(NCHW8c\\) do not"):
        validate(Plan({**base, "concat_1": IN_PLACE.format("NCHW8c")}), graph)
    with pytest.raises(SearchError, match="concat_0 runs in place in NCHW, so the concats sharing"):
        validate(Plan({**base, "concat_0": IN_PLACE.format("NCHW"), "concat_1": IN_PLACE.format("NCHW8c"),
                       "conv2d_2": "NCHW8c>NCHW"}), graph)
    # the copied block input may arrive in another layout (it is converted, then copied); a writer may not
    validate(Plan({**_block_plan(graph, "NCHW8c").choices, "conv2d_0": "NCHW8c>NCHW"}), graph)
    with pytest.raises(SearchError, match="producers must store that layout; conv2d_2 \\(NCHW\\)"):
        validate(Plan({**_block_plan(graph, "NCHW8c").choices, "conv2d_2": "NCHW8c>NCHW"}), graph)


def test_pricing_charges_the_owner_the_copy_and_ties_the_family_together():
    graph = extract_graph(dense_block_net())
    in_place = Candidate("NCHW8c", "NCHW8c", (("in_place", 1),))
    copy = chain_task(graph, "concat_1", in_place)
    assert copy == ChainTask("copy", ((1, 16, 6, 7), (1, 32, 6, 7)), (), "NCHW8c")
    assert chain_task(graph, "concat_0", in_place) is None  # a view runs nothing
    space = tuning_space(graph, layouts=LAYOUTS)
    problem = build_problem(graph, space, lambda tasks: [CostRecord(1.0, 0.0, 3) for _ in tasks])
    family = problem.pairs[(problem.index("concat_0"), problem.index("concat_1"))]
    for i, view in enumerate(space["concat_0"]):
        for j, owner in enumerate(space["concat_1"]):
            together = view.in_place == owner.in_place and (not view.in_place or view.out_layout == owner.out_layout)
            assert math.isinf(family[i, j]) != together
    for producer, writes in (("conv2d_0", False), ("conv2d_2", True)):
        matrix = problem.pairs[(problem.index(producer), problem.index("concat_1"))]
        for i, p in enumerate(space[producer]):
            for j, owner in enumerate(space["concat_1"]):
                assert np.isinf(matrix[i, j]) == (writes and owner.in_place and p.out_layout != owner.out_layout)


@pytest.mark.parametrize("copy_ms, chosen", [(0.05, True), (5.0, False)])
def test_the_solver_takes_the_block_buffer_where_the_copies_cost_more_and_the_plan_exports(copy_ms, chosen):
    graph = extract_graph(dense_block_net())

    def costs(tasks):  # kernels 1 ms, a concat's copy 0.5 ms, the block input's copy copy_ms, transforms 0.3 ms
        return [CostRecord(0.5 if isinstance(t, ChainTask) and t.head == "concat" else
                           copy_ms if isinstance(t, ChainTask) and t.head == "copy" else
                           0.3 if type(t).__name__ == "TransformTask" else 1.0, 0.0, 3) for t in tasks]

    problem = build_problem(graph, tuning_space(graph, layouts=LAYOUTS, space_size=8), costs)
    solution = solve(problem)
    plan = plan_from_assignment(solution.assignment, "tiny", {}, auxiliary=problem.meta.get("auxiliary", ()))
    assert [Candidate.parse(plan.choices[c]).in_place for c in ("concat_0", "concat_1")] == [chosen, chosen]
    if chosen:
        assert export(graph, plan, target=TARGET, threads=1, seed=2).manifest["numerical_check"]["passed"]
