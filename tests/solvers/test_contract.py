"""Contract every registered solver must meet, whatever its algorithm."""

from __future__ import annotations

import math

import pytest

from solvers import SOLVERS, Problem, SolverError, make_solver, solve
from solvers.base import _load_builtin_solvers
from tests.solvers.instances import brute_force, random_problem

_load_builtin_solvers()
ALL = sorted(SOLVERS)


@pytest.mark.parametrize("name", ALL)
def test_reported_cost_matches_evaluation_and_bound_is_valid(name):
    for seed in range(40):
        problem = random_problem(seed)
        optimum, _ = brute_force(problem)
        sol = solve(problem, name)
        assert sol.solver == name
        if sol.assignment:
            assert sol.cost == pytest.approx(problem.evaluate(sol.assignment))
            assert sol.cost >= optimum - 1e-9
        if sol.optimal:
            assert sol.cost == pytest.approx(optimum)
        if sol.lower_bound is not None:
            assert sol.lower_bound <= optimum + 1e-6
        if sol.status == "infeasible":
            assert math.isinf(optimum)


@pytest.mark.parametrize("name", ALL)
def test_one_node_and_edge_free_problems(name):
    one = Problem.build([("only", ["a", "b", "c"], [3.0, 1.0, 2.0])])
    sol = solve(one, name)
    assert dict(sol.assignment) == {"only": "b"} and sol.cost == 1.0
    free = Problem.build([(f"n{i}", ["a", "b"], [i % 2, 1 - i % 2]) for i in range(6)])
    assert solve(free, name).cost == 0.0


@pytest.mark.parametrize("name", ALL)
def test_deterministic(name):
    problem = random_problem(7, nodes=7, max_candidates=4, density=0.7)
    first, second = solve(problem, name), solve(problem, name)
    assert dict(first.assignment) == dict(second.assignment)
    assert first.cost == second.cost


@pytest.mark.parametrize("name", ALL)
def test_bad_parameters_rejected(name):
    with pytest.raises(SolverError, match="unknown parameter"):
        make_solver(name, no_such_knob=1)
    with pytest.raises(SolverError, match="time_limit"):
        make_solver(name, time_limit=-1).solve(random_problem(0, nodes=2))


@pytest.mark.parametrize("name", ALL)
def test_solution_serialises(name):
    sol = solve(random_problem(3, nodes=4), name)
    data = sol.to_dict()
    assert set(data) >= {"solver", "cost", "optimal", "lower_bound", "gap", "seconds", "assignment"}
