"""Building the cost problem from real measurements of a tiny network: structure, prices, forbidden candidates, meta."""

from __future__ import annotations

import math

import pytest

from cost_models.cache import CostCache, CostRecord
from cost_models.measure import MeasuredCosts
from cost_models.pricing import build_problem, measurement_tasks
from cost_models.tasks import KernelTask, TransformTask
from search.candidates import Candidate, kernel_spec
from search.errors import SearchError
from search.export import make_target
from search.graph import extract_graph
from search.isa import HOST
from search.plan import BASELINES, baseline_plan, plan_from_assignment, validate
from search.space import parse_layouts, tuning_space
from solvers import solve
from tests.search.tiny_nets import residual_concat_net

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
        assert all(c in space[op.name] for c in added) and len(searched) <= 1
        assert all({c.in_layout, c.out_layout} <= {*LAYOUTS, "NC"} for c in searched)
    with pytest.raises(SearchError, match="positive integer"):
        tuning_space(graph, space_size=0)
    with pytest.raises(SearchError, match="unknown layout"):
        parse_layouts("NCHW,NCWH")


def test_one_node_per_tunable_op_and_one_edge_per_connected_pair(graph, space, measured):
    problem, _, _ = measured
    assert [node.name for node in problem.nodes] == [op.name for op in graph.tunable]
    assert {(e.src, e.dst) for e in problem.edges} == {(e.src, e.dst) for e in graph.edges}
    for node in problem.nodes:
        assert list(node.candidates) == [c.name for c in space[node.name]]
    tasks = measurement_tasks(graph, space)
    assert len(tasks) == len(set(tasks)) and any(isinstance(t, TransformTask) for t in tasks)


def test_node_costs_are_the_cached_kernel_times_plus_boundary_transforms(graph, space, measured):
    problem, cache, provider = measured
    reads = {read.node: read for read in graph.boundary_reads}
    writes = {write.node: write for write in graph.boundary_writes}
    assert set(reads) == {"conv2d_0"} and set(writes) == {"conv2d_5"}
    for node in problem.nodes:
        op = graph.op(node.name)
        for candidate, cost in zip(space[node.name], node.costs):
            if op.kind in ("concat", "add"):
                assert cost == 0.0
                continue
            record = _record(cache, provider, KernelTask(kernel_spec(op, candidate)))
            expected = record.median_ms if record.ok else math.inf
            if node.name in reads and candidate.in_layout != "NCHW":
                transform = TransformTask(tuple(reads[node.name].shape), "NCHW", candidate.in_layout)
                expected += _record(cache, provider, transform).median_ms
            if node.name in writes and candidate.out_layout != "NCHW":
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
    for node in problem.nodes:
        entries = problem.meta["candidates"][node.name]
        assert list(entries) == list(node.candidates)
        for name, entry in entries.items():
            assert Candidate(entry["in_layout"], entry["out_layout"], tuple(sorted(entry["knobs"].items()))) \
                == Candidate.parse(name)
    solution = solve(problem, "dp")
    plan = plan_from_assignment(solution.assignment, "tiny", {"batch": 1})
    assert validate(plan, graph) and plan.choices["conv2d_2"] != space["conv2d_2"][0].name
    assert plan.vector_unit == HOST.name  # the knobs were chosen from the host's knob spaces
