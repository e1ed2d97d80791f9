"""The ILP solver against brute force, its cost scaling, its backends and its parameters."""

from __future__ import annotations

import math

import numpy as np
import pytest

from solvers import Problem, SolverError, solve
from solvers.generators import generate, random_graph
from solvers.ilp import ILPSolver
from solvers.scaling import AUTO_MAX_COST, scale_costs
from solvers.testing import brute_force, random_problem


def _float_problem(seed: int, decimals: int | None = None) -> Problem:
    """A random problem with real-valued costs (rounded to ``decimals`` places if given)."""
    rng = np.random.default_rng(seed)
    base = random_problem(seed, nodes=int(rng.integers(2, 7)))

    def noisy(costs: np.ndarray) -> np.ndarray:
        out = costs + rng.random(costs.shape) * 10
        return out if decimals is None else np.round(out, decimals)

    nodes = [(n.name, n.candidates, noisy(n.costs)) for n in base.nodes]
    edges = [(e.src, e.dst, noisy(e.costs)) for e in base.edges]
    return Problem.build(nodes, edges)


def test_matches_brute_force_exactly_on_integer_costs():
    for seed in range(300):
        problem = random_problem(seed)
        optimum, _ = brute_force(problem)
        sol = solve(problem, "ilp")
        if math.isinf(optimum):
            assert sol.status == "infeasible" and not sol.assignment and sol.lower_bound == math.inf, seed
        else:
            assert sol.status == "optimal", (seed, sol.log)
            assert sol.cost == optimum and sol.lower_bound == optimum, (seed, sol.log)


def test_matches_brute_force_on_denser_instances_without_hint():
    for seed in range(60):
        problem = random_problem(1000 + seed, nodes=6, density=0.8)
        optimum, _ = brute_force(problem)
        sol = solve(problem, "ilp", hint=False)
        assert sol.status == ("infeasible" if math.isinf(optimum) else "optimal")
        assert sol.cost == optimum
        assert not any(line.startswith("hint") for line in sol.log)


def test_real_valued_costs_are_optimal_within_the_rounding_bound():
    for seed in range(60):
        problem = _float_problem(seed)
        optimum, _ = brute_force(problem)
        costs = scale_costs(problem)
        terms = problem.num_nodes + len(problem.pairs)
        assert 0 < costs.error <= terms * 0.5 / costs.scale
        sol = solve(problem, "ilp")
        assert any(f"rounding error bound {costs.error:g}" in line for line in sol.log)
        if math.isinf(optimum):
            assert sol.status == "infeasible"
            continue
        assert sol.status == "optimal"
        assert optimum <= sol.cost <= optimum + 2 * costs.error
        assert sol.lower_bound <= optimum


def test_few_decimal_costs_are_scaled_by_a_power_of_ten_and_stay_exact():
    for seed in range(40):
        problem = _float_problem(seed, decimals=3)
        optimum, _ = brute_force(problem)
        costs = scale_costs(problem)
        assert costs.scale in (1.0, 10.0, 100.0, 1000.0) and costs.error < 1e-9
        sol = solve(problem, "ilp")
        assert sol.cost == pytest.approx(optimum, abs=1e-9)
        assert sol.lower_bound <= optimum


def test_coarse_explicit_scale_keeps_the_bound_valid():
    for seed in range(40):
        problem = random_problem(seed, nodes=5)
        optimum, _ = brute_force(problem)
        if math.isinf(optimum):
            continue
        costs = scale_costs(problem, 0.25)
        sol = solve(problem, "ilp", scale=0.25)
        assert sol.lower_bound <= optimum <= sol.cost <= optimum + 2 * costs.error


def test_scale_costs():
    integral = random_problem(3, nodes=5)
    costs = scale_costs(integral)
    assert costs.scale == 1.0 and costs.error == 0.0
    for node, scaled in zip(integral.nodes, costs.nodes):
        np.testing.assert_array_equal(node.costs, scaled)
    real = _float_problem(3)
    costs = scale_costs(real)
    assert math.frexp(costs.scale)[0] == 0.5  # a power of two
    largest = max(float(np.max(a[np.isfinite(a)])) for a in [*costs.nodes, *costs.pairs.values()])
    assert AUTO_MAX_COST / 2 <= largest < AUTO_MAX_COST
    with pytest.raises(SolverError, match="scale"):
        scale_costs(integral, 1e300)


def test_scip_backend_matches_brute_force():
    for seed in range(40):
        problem = random_problem(seed)
        optimum, _ = brute_force(problem)
        sol = solve(problem, "ilp", backend="scip")
        assert sol.status == ("infeasible" if math.isinf(optimum) else "optimal")
        assert sol.cost == optimum
        assert sol.lower_bound <= optimum
    real = _float_problem(5)
    assert solve(real, "ilp", backend="scip").cost == pytest.approx(brute_force(real)[0])


def test_infeasible_problem():
    problem = Problem.build(
        [("a", ["x", "y"], [0, 1]), ("b", ["x", "y"], [1, 0])], [("a", "b", [[None, None], [None, None]])]
    )
    for backend in ("cpsat", "scip"):
        sol = solve(problem, "ilp", backend=backend)
        assert sol.status == "infeasible" and dict(sol.assignment) == {} and sol.cost == math.inf
        assert sol.lower_bound == math.inf


def test_deterministic_with_several_workers_and_with_scip():
    for seed in range(20):
        problem = random_problem(seed, nodes=6, max_candidates=4, density=0.7)
        for params in ({"workers": 3}, {"workers": 1}, {"backend": "scip"}):
            first, second = solve(problem, "ilp", **params), solve(problem, "ilp", **params)
            assert dict(first.assignment) == dict(second.assignment), (seed, params)


def test_ssd_shaped_graph_is_proven_optimal():
    # A ResNet-50 + SSD heads shaped problem: with default CP-SAT parameters (LP without the marginals) this is not
    # proven in a minute; with linearization level 2 and the max_lp worker it takes about a second.
    problem = generate("ssd", seed=0, candidates=8)
    sol = solve(problem, "ilp")
    assert sol.status == "optimal", sol.log
    assert sol.cost == solve(problem, "dp").cost


@pytest.mark.parametrize("backend", ["cpsat", "scip"])
def test_presolve_on_and_off_agree(backend):
    for seed in range(30):
        problem = random_problem(2000 + seed, nodes=6, density=0.3 + 0.1 * (seed % 6))
        optimum, _ = brute_force(problem)
        on, off = (solve(problem, "ilp", backend=backend, presolve=p) for p in (True, False))
        assert on.status == off.status and on.cost == off.cost == optimum, (seed, on.log, off.log)
        assert on.lower_bound <= optimum and off.lower_bound <= optimum
        assert any(line.startswith("presolve reductions:") for line in on.log)
        assert not any(line.startswith("presolve") for line in off.log)


@pytest.mark.parametrize("backend", ["cpsat", "scip"])
def test_lp_first_proves_tight_instances_and_hands_the_rest_to_the_backend(backend):
    by_lp = by_backend = 0
    for seed in range(40):
        problem = random_problem(3000 + seed, nodes=7, density=0.9, forbid=0.0)
        optimum, _ = brute_force(problem)
        sol = solve(problem, "ilp", backend=backend, hint=False)
        assert sol.status == "optimal" and sol.cost == pytest.approx(optimum, abs=1e-9), (seed, sol.log)
        assert sol.lower_bound <= optimum + 1e-9
        lp = [line for line in sol.log if line.startswith("lp:")]
        ran_backend = any(line.startswith(("cp-sat", "scip")) for line in sol.log)
        if lp and "(proven optimal" in lp[0]:
            by_lp += 1
            assert not ran_backend, sol.log
        elif lp:
            by_backend += 1
            assert ran_backend, sol.log
    assert by_lp > 0 and by_backend > 0, (by_lp, by_backend)


def test_lp_first_can_be_turned_off():
    problem = random_problem(3001, nodes=7, density=0.9, forbid=0.0)
    sol = solve(problem, "ilp", lp_first=False)
    assert sol.cost == brute_force(problem)[0]
    assert not any(line.startswith("lp:") for line in sol.log)


def test_chain_is_solved_by_the_presolve_alone():
    problem = generate("chain", seed=0, candidates=8, nodes=300)
    sol = solve(problem, "ilp")
    assert sol.status == "optimal" and sol.cost == solve(problem, "dp").cost, sol.log
    assert any(line.startswith("presolve") and "0 left" in line for line in sol.log)
    assert not any(line.startswith(("cp-sat", "hint")) for line in sol.log)
    assert 0 <= sol.cost - sol.lower_bound <= 2 * scale_costs(problem).error


def test_time_limited_run_reports_a_bound_and_a_gap():
    problem = random_graph(30, 16, 0, degree=10)  # about 18 s to prove here
    sol = solve(problem, "ilp", time_limit=3.0)
    assert sol.status in ("feasible", "optimal"), sol.log
    assert sol.lower_bound is not None and 0 <= sol.lower_bound <= sol.cost
    assert sol.gap is not None and 0 <= sol.gap < 1


@pytest.mark.parametrize(
    ("param", "value"),
    [
        ("workers", 0),
        ("workers", 1.5),
        ("workers", True),
        ("backend", "cplex"),
        ("hint", "yes"),
        ("presolve", 1),
        ("lp_first", "no"),
        ("seed", -1),
        ("seed", 2**31),
        ("scale", 0),
        ("scale", math.inf),
        ("scale", "auto"),
    ],
)
def test_bad_parameters_name_the_parameter(param, value):
    with pytest.raises(SolverError, match=param):
        ILPSolver(**{param: value}).solve(random_problem(0, nodes=2))
