"""Greedy solver: valid, never below brute force, visits nodes topologically, says so when it cannot."""

from __future__ import annotations

import math

import pytest

from solvers import SOLVERS, Problem, Solution
from solvers.greedy import GreedySolver, visit_order
from solvers.testing import brute_force, random_problem
from tests.solvers.test_pbqp import densenet201_like


def greedy(problem: Problem, **params) -> Solution:
    return GreedySolver(**params).solve(problem)


def test_registered():
    assert SOLVERS["greedy"] is GreedySolver
    assert GreedySolver(time_limit=3).get_params() == {"time_limit": 3}


def test_valid_and_never_below_brute_force():
    statuses = set()
    for seed in range(200):
        problem = random_problem(seed)
        optimum, _ = brute_force(problem)
        sol = greedy(problem)
        statuses.add(sol.status)
        if sol.assignment:
            problem.to_indices(sol.assignment)  # every node, a real candidate
            assert sol.cost == pytest.approx(problem.evaluate(sol.assignment))
            assert sol.cost >= optimum - 1e-9, seed
        else:
            assert sol.status == "not_found" and math.isinf(sol.cost)
        if problem.edges:
            assert sol.status != "optimal" and sol.lower_bound is None
        else:
            assert sol.status == "optimal" and sol.cost == optimum and sol.lower_bound == sol.cost
    assert statuses == {"optimal", "feasible", "not_found"}


def test_topological_order_not_node_order():
    # "b" comes first in node order, but the edge a -> b makes greedy decide "a" first.
    problem = Problem.build(
        [("b", ["x", "y"], [0, 1]), ("a", ["x", "y"], [1, 0])],
        [("a", "b", [[0, 0], [10, 0]])],
    )
    assert visit_order(problem) == ([1, 0], True)
    sol = greedy(problem)
    assert dict(sol.assignment) == {"a": "y", "b": "y"}  # node order would give a=x, b=x
    assert sol.log[0].startswith("visit order: topological")


def test_topological_ties_broken_by_node_order():
    problem = Problem.build(
        [(name, ["x"], [0]) for name in ("c", "b", "a", "d")],
        [("a", "c", [[0]]), ("d", "b", [[0]])],
    )
    # Ready at the start: a (2) and d (3); then c (0) once a is done, then b (1) once d is.
    assert visit_order(problem) == ([2, 0, 3, 1], True)


def test_merged_edges_keep_their_first_direction():
    problem = Problem.build(
        [("p", ["x"], [0]), ("q", ["x"], [0])],
        [("q", "p", [[1]]), ("p", "q", [[1]])],
    )
    assert visit_order(problem) == ([1, 0], True)


def test_directed_cycle_falls_back_to_node_order_and_says_so():
    problem = Problem.build(
        [(name, ["x", "y"], [i, 1]) for i, name in enumerate(("a", "b", "c", "d"))],
        [("a", "b", [[0, 2], [2, 0]]), ("b", "c", [[0, 2], [2, 0]]), ("c", "a", [[0, 2], [2, 0]])],
    )
    assert visit_order(problem) == ([0, 1, 2, 3], False)
    sol = greedy(problem)
    assert any("cycle" in line and "node order" in line for line in sol.log)
    assert sol.status == "feasible" and sol.cost >= brute_force(problem)[0]


def test_early_choice_can_leave_no_finite_option():
    problem = Problem.build(
        [("a", ["x", "y"], [0, 1]), ("b", ["x"], [0])],
        [("a", "b", [[None], [0]])],
    )
    sol = greedy(problem)
    assert sol.status == "not_found" and not sol.assignment and math.isinf(sol.cost)
    assert brute_force(problem)[0] == 1


def test_densenet_like_instance_runs():
    problem = densenet201_like(k=(5, 10), seed=1)
    sol = greedy(problem)
    assert sol.status == "feasible" and len(sol.assignment) == problem.num_nodes
    assert sol.cost == pytest.approx(problem.evaluate(sol.assignment))
