"""Building the cost problem from real measurements of a tiny network: structure, prices, forbidden candidates, meta."""

from __future__ import annotations

import math
import random

import pytest
from tvm import relax

from cost_models.cache import CostCache, CostRecord
from cost_models.measure import MeasuredCosts
from cost_models.pricing import build_problem, measurement_tasks, plan_cost
from cost_models.tasks import ChainTask, KernelTask, TransformTask
from search.candidates import Candidate, kernel_spec, node_candidates
from search.emit import emit_module
from search.errors import SearchError
from search.graph import extract_graph
from search.host import make_target
from search.isa import HOST
from search.kinds import LayoutKind, get_kind
from search.layouts import fixed_layout
from search.plan import BASELINES, Plan, baseline_plan, plan_from_assignment, validate
from search.space import parse_layouts, tuning_space
from solvers import solve
from tests.search.tiny_nets import build, residual_concat_net

THREADS = 1
LAYOUTS = ("NCHW", "NCHW8c")


@pytest.fixture(scope="module")
def graph():
    return extract_graph(residual_concat_net())


@pytest.fixture(scope="module")
def space(graph):
    return tuning_space(graph, layouts=LAYOUTS, space_size=1)


@pytest.fixture(scope="module")
def measured(graph, space, tmp_path_factory):
    """(problem, cache, provider) with conv2d_2's first candidate recorded as a failed build before measuring."""
    cache = CostCache(tmp_path_factory.mktemp("costs") / "costs.sqlite")
    provider = MeasuredCosts(cache, target=make_target(THREADS), threads=THREADS)
    failed = KernelTask(kernel_spec(graph.op("conv2d_2"), space["conv2d_2"][0]))
    cache.put(provider.context, failed.key, CostRecord.failed("build timed out"))
    return build_problem(graph, space, provider.measure, meta={"model": "tiny"}), cache, provider


def _record(cache, provider, task) -> CostRecord:
    return cache.get(provider.context, task.key)


def test_space_keeps_the_layouts_asked_for_plus_the_baselines(graph, space):
    baselines = [baseline_plan(graph, name) for name in BASELINES]
    for op in graph.tunable:
        added = [plan.candidate(op.name) for plan in baselines]
        searched = [c for c in space[op.name] if c not in added]
        assert all(c in space[op.name] for c in added)
        if isinstance(get_kind(op.kind), LayoutKind):  # every layout and variant of a layout kind, the space size aside
            assert searched == [c for c in node_candidates(op) if c not in added
                                and {c.in_layout, c.out_layout} <= set(LAYOUTS)] and len(searched) > 1
        else:
            assert len(searched) <= 1
        assert all({c.in_layout, c.out_layout} <= {*LAYOUTS, "NC"} for c in searched)
    with pytest.raises(SearchError, match="positive integer"):
        tuning_space(graph, space_size=0)
    with pytest.raises(SearchError, match="unknown layout"):
        parse_layouts("NCHW,NCWH")


def test_one_node_per_tunable_op_and_auxiliary_nodes_for_values_read_twice(graph, space, measured):
    problem, _, _ = measured
    tunable = [op.name for op in graph.tunable]
    assert [node.name for node in problem.nodes] == tunable + problem.meta["auxiliary"]
    # conv2d_0 is conv2d_1's data and residual; max_pool2d_0 feeds conv2d_2 and conv2d_3
    assert {name.split("@")[0] for name in problem.meta["auxiliary"]} == {"conv2d_0", "max_pool2d_0"}
    assert {(e.src, e.dst) for e in problem.edges if e.dst in tunable} == {(e.src, e.dst) for e in graph.edges}
    assert all(e.dst in problem.meta["auxiliary"] and e.src in tunable for e in problem.edges if e.dst not in tunable)
    for name in tunable:
        assert list(problem.nodes[problem.index(name)].candidates) == [c.name for c in space[name]]
    tasks = measurement_tasks(graph, space)
    assert len(tasks) == len(set(tasks)) and any(isinstance(t, TransformTask) for t in tasks)


def test_node_costs_are_kernel_and_chain_times_plus_boundary_transforms(graph, space, measured):
    problem, cache, provider = measured
    reads = {read.node: read for read in graph.boundary_reads}
    writes = {write.node: write for write in graph.boundary_writes}
    assert set(reads) == {"conv2d_0", "dense_0"} and set(writes) == {"conv2d_5", "dense_0"}  # the classifier: NC
    # conv2d_1's max pool and conv2d_5's global pool follow them; the concat runs its own op
    assert [f.kind for f in graph.followers_of("conv2d_1")] == ["max_pool2d"] and not graph.followers_of("concat_0")
    for node in problem.nodes[: len(graph.tunable)]:
        op = graph.op(node.name)
        followers = tuple((f.kind, tuple(sorted(f.attrs.items()))) for f in graph.followers_of(node.name))
        for candidate, cost in zip(space[node.name], node.costs):
            if op.kind in ("concat", "add"):
                chain = ChainTask(op.kind, op.input_shapes, followers, candidate.out_layout)
                copying = _record(cache, provider, chain).median_ms
                if candidate.in_place:  # its producers write into it: no copy to pay
                    assert 0 <= cost < copying
                else:
                    assert cost == pytest.approx(copying) and cost > 0
                continue
            record = _record(cache, provider, KernelTask(kernel_spec(op, candidate)))
            expected = record.median_ms if record.ok else math.inf
            if followers:
                chain = ChainTask("output", (op.shape,), followers, candidate.out_layout)
                expected += _record(cache, provider, chain).median_ms
            if node.name in reads and candidate.in_layout != fixed_layout(reads[node.name].shape):
                transform = TransformTask(tuple(reads[node.name].shape), "NCHW", candidate.in_layout)
                expected += _record(cache, provider, transform).median_ms
            if node.name in writes and candidate.out_layout != fixed_layout(writes[node.name].shape):
                transform = TransformTask(tuple(writes[node.name].shape), candidate.out_layout, "NCHW")
                expected += _record(cache, provider, transform).median_ms
            assert cost == pytest.approx(expected)


def test_a_failed_measurement_forbids_the_candidate(space, measured):
    problem, _, _ = measured
    node = problem.nodes[problem.index("conv2d_2")]
    assert math.isinf(node.costs[0]) and all(math.isfinite(c) for c in node.costs[1:])
    entry = problem.meta["candidates"]["conv2d_2"][space["conv2d_2"][0].name]
    assert entry["kernel_ms"] is None and entry["error"] == "build timed out"


def test_edge_costs_are_zero_for_matching_layouts_and_the_transform_otherwise(graph, space, measured):
    problem, cache, provider = measured
    edge = next(e for e in problem.edges if (e.src, e.dst) == ("conv2d_4", "depthwise_conv2d_0"))
    shape = next(tuple(e.shape) for e in graph.edges if (e.src, e.dst) == (edge.src, edge.dst))
    for i, producer in enumerate(space[edge.src]):
        for j, consumer in enumerate(space[edge.dst]):
            if producer.out_layout == consumer.in_layout:
                assert edge.costs[i, j] == 0.0
            else:
                task = TransformTask(shape, producer.out_layout, consumer.in_layout)
                expected = _record(cache, provider, task).median_ms
                assert expected > 0 and edge.costs[i, j] == pytest.approx(expected)


def test_meta_maps_every_candidate_back_and_the_solution_is_a_valid_plan(graph, space, measured):
    problem, _, _ = measured
    assert problem.meta["model"] == "tiny" and problem.meta["unit"] == "ms" and problem.meta["vector_unit"] == HOST.name
    for node in problem.nodes[: len(graph.tunable)]:
        entries = problem.meta["candidates"][node.name]
        assert list(entries) == list(node.candidates)
        for name, entry in entries.items():
            assert Candidate(entry["in_layout"], entry["out_layout"], tuple(sorted(entry["knobs"].items()))) \
                == Candidate.parse(name)
    solution = solve(problem, "dp")
    plan = plan_from_assignment(solution.assignment, "tiny", {"batch": 1}, auxiliary=problem.meta["auxiliary"])
    assert validate(plan, graph) and plan.choices["conv2d_2"] != space["conv2d_2"][0].name
    assert plan.vector_unit == HOST.name  # the knobs were chosen from the host's knob spaces


def fanout_net():
    """A value read by two nodes in the same and in other layouts, by itself twice (data and residual), and by an
    output; a model input read by two nodes."""

    def body(net, x):
        a = net.conv(x, 16)
        b = net.conv(a, 16, residual=a)
        c = net.conv(a, 8, k=1)
        d = net.conv(x, 8, k=1)
        return relax.Tuple([net.bb.emit(relax.op.concat([b, c, d], axis=1)), a])

    return build((1, 8, 6, 6), body)


@pytest.mark.parametrize("net", [fanout_net, residual_concat_net])
def test_each_conversion_is_priced_once_as_the_module_runs_it(net):
    """Transforms priced 1 and kernels 0: a plan's cost is the number of transforms its exported module holds."""
    graph = extract_graph(net())
    space = tuning_space(graph, layouts=("NCHW", "NHWC", "NCHW8c"), space_size=6)
    problem = build_problem(graph, space, lambda tasks: [CostRecord(1.0 if isinstance(t, TransformTask) and
                                                                    not t.free else 0.0, 0.0, 1) for t in tasks])
    rng = random.Random(0)
    plans = [baseline_plan(graph, name).choices for name in BASELINES]
    while len(plans) < len(BASELINES) + 8:  # random plans that export (an in-place concat needs its producers' layout)
        choices = {op.name: rng.choice(space[op.name]).name for op in graph.tunable}
        if math.isfinite(plan_cost(problem, choices)):
            plans.append(choices)
    plans.append(plan_from_assignment(solve(problem, "dp").assignment, auxiliary=problem.meta["auxiliary"]).choices)
    for choices in plans:
        emitted = emit_module(graph, validate(Plan(choices), graph), make_target(1))
        assert plan_cost(problem, choices) == emitted.transforms, choices
