"""Operator kinds: the registry, the conformance suite over every registered kind, and a toy kind added by a test
that extracts, measures, solves and exports without any other module knowing it."""

from __future__ import annotations

from itertools import combinations

import pytest
import tvm
from tvm import relax

from cost_models.cache import CostCache
from cost_models.measure import MeasuredCosts
from cost_models.pricing import build_problem
from search.errors import SearchError
from search.export import export
from search.graph import extract_graph
from search.host import make_target
from search.kinds import KINDS, KernelKind, check_kind, get_kind, kernel_kind, kind_checks, register
from search.kinds.checks import pairwise
from search.plan import baseline_plan, plan_from_assignment
from search.space import tuning_space
from search.templates.workloads import KernelSpec
from solvers import solve
from tests.search.tiny_nets import build

TARGET = make_target(1)
CHECKS = [(name, check_name, check) for name, kind in KINDS.items()
          for check_name, check in kind_checks(kind, pairs=3, settings=4, target=TARGET)]


@pytest.mark.parametrize(("kind", "check_name", "check"), CHECKS, ids=[f"{k}-{c}" for k, c, _ in CHECKS])
def test_every_registered_kind_conforms(kind, check_name, check):
    check()


@pytest.mark.parametrize(("name", "pairs"), [("conv2d", 2), ("depthwise_conv2d", 3), ("dense", 2),
                                             ("batch_matmul", None)])
def test_every_pair_of_knob_values_on_one_workload(name, pairs):
    kind = KINDS[name]
    check_kind(kind, kind.examples[:1], epilogues=kind.epilogues[-1:], pairs=pairs, settings="pairwise", target=TARGET)


def test_the_pairwise_settings_hold_every_pair_of_knob_values_of_the_space():
    space = [(("a", a), ("b", b), ("c", c)) for a in range(2) for b in range(2) for c in range(3)] + [(("bf16", 2),)]
    chosen = pairwise(space)
    assert chosen[0] == space[0] and chosen[-1] == (("bf16", 2),) and len(chosen) <= 8 < len(space)
    held = {pair for knobs in chosen for pair in combinations(knobs, 2)}
    assert held == {pair for knobs in space for pair in combinations(knobs, 2)}
    for kind, spec in [("conv2d", KernelSpec(KINDS["conv2d"].examples[1], "NCHW8c", "NHWC")),
                       ("dense", KernelSpec(KINDS["dense"].examples[0], "NC", "NC"))]:
        full = KINDS[kind].knob_space(spec)
        held = {pair for knobs in pairwise(full) for pair in combinations(sorted(knobs), 2)}
        assert held == {pair for knobs in full for pair in combinations(sorted(knobs), 2)}
        assert len(pairwise(full)) < len(full) / 2
    with pytest.raises(SearchError, match="settings must be"):
        check_kind(KINDS["dense"], settings="all")


def test_the_suite_catches_a_wrong_kernel_and_a_wrong_default():
    class Off(type(KINDS["dense"])):  # adds 1 to every output: the numpy reference disagrees
        def reference(self, spec, inputs, params):
            return super().reference(spec, inputs, params) - 1

    with pytest.raises(AssertionError, match="numerics.*relative error"):
        check_kind(Off(), pairs=1, settings=1, target=TARGET)

    class Shuffled(type(KINDS["dense"])):  # lists the default setting last
        def knob_space(self, spec, size=None):
            return super().knob_space(spec)[::-1][:size]

    with pytest.raises(AssertionError, match="first knob setting is not the default"):
        check_kind(Shuffled(), pairs=1, settings=1, target=TARGET)


def test_registry_lookup():
    assert set(KINDS) >= {"conv2d", "depthwise_conv2d", "dense", "batch_matmul", "concat", "add"}
    assert get_kind("conv2d") is KINDS["conv2d"] and isinstance(KINDS["dense"], KernelKind)
    with pytest.raises(SearchError, match="no operator kind 'gemm'.*conv2d"):
        get_kind("gemm")


# ---------------------------------------------------------------------------------------------------- a toy kind
@pytest.fixture
def toy_kind():
    """The sin kind of ``tests.search.toy_kind``, registered for one test."""
    from tests.search.toy_kind import SinKind

    register(SinKind)
    yield KINDS["sin"]
    KINDS.pop("sin")


def sin_net():
    def body(net, x):
        a = net.conv(x, 16)
        t = net.bb.emit(relax.op.sin(a))
        return net.conv(t, 8, k=1)

    return build((1, 4, 8, 8), body)


def test_a_kind_registered_by_a_test_extracts_measures_solves_and_exports(toy_kind, tmp_path):
    check_kind(toy_kind, target=TARGET)
    graph = extract_graph(sin_net())
    assert [(op.kind, op.role) for op in graph.tunable] == [("conv2d", "tunable"), ("sin", "tunable"),
                                                            ("conv2d", "tunable")]
    assert [(e.src, e.dst) for e in graph.edges] == [("conv2d_0", "sin_0"), ("sin_0", "conv2d_1")]
    space = tuning_space(graph, layouts=("NCHW", "NCHW8c", "NCHW16c"), space_size=3)
    assert {c.name for c in space["sin_0"]} >= {"NCHW>NCHW:vector=1", "NCHW8c>NCHW8c:vector=1"}
    with MeasuredCosts(CostCache(tmp_path / "costs.sqlite"), target=TARGET, threads=1, repeat=3,
                       min_repeat_ms=5) as provider:
        problem = build_problem(graph, space, provider.measure)
    measured = problem.meta["candidates"]["sin_0"]
    assert all(entry["kernel_ms"] > 0 for entry in measured.values())  # measured like any kernel, in a worker
    solution = solve(problem, "dp")
    plan = plan_from_assignment(solution.assignment, "sin-net", auxiliary=problem.meta["auxiliary"])
    for candidate in (plan, baseline_plan(graph, "nchw16c")):
        compiled = export(graph, candidate, target=TARGET, threads=1)
        assert compiled.manifest["numerical_check"]["relative_error"] <= 1e-4


def test_without_the_kind_the_same_operator_is_a_fixed_op():
    graph = extract_graph(sin_net())
    assert graph.op("sin_0").role == "fixed"
    assert [(w.node, w.consumer) for w in graph.boundary_writes][0] == ("conv2d_0", "sin_0")


def test_kernel_specs_find_their_kind_through_the_workload(toy_kind):
    from tests.search.toy_kind import SinWorkload

    spec = KernelSpec(SinWorkload((1, 4, 2, 2)), "NCHW4c", "NCHW4c")
    kind = kernel_kind(spec.workload.kind)
    assert kind is toy_kind and isinstance(kind.build(spec, TARGET), tvm.tirx.PrimFunc)
    with pytest.raises(SearchError, match="no operator kind 'sin'"):
        KINDS.pop("sin")
        kernel_kind(spec.workload.kind)
    register(type(toy_kind))
