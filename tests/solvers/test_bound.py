"""The LP lower bound: never above the optimum, exact on trees, inf when infeasible."""

from __future__ import annotations

import math

import numpy as np
import pytest

from solvers import Problem, SolverError, solve
from solvers.bound import lp_lower_bound
from solvers.testing import brute_force, random_problem


def random_tree(seed: int, nodes: int = 7) -> Problem:
    """A random tree (edges in random directions) with forbidden candidates and pairs."""
    rng = np.random.default_rng(seed)
    k = [int(rng.integers(1, 4)) for _ in range(nodes)]
    specs = []
    for u in range(nodes):
        costs = rng.integers(0, 20, size=k[u]).astype(float)
        mask = rng.random(k[u]) < 0.15
        mask[rng.integers(k[u])] = False
        costs[mask] = math.inf
        specs.append((f"n{u}", [f"c{i}" for i in range(k[u])], costs))
    edges = []
    for v in range(1, nodes):
        u = int(rng.integers(0, v))
        src, dst = (u, v) if rng.random() < 0.5 else (v, u)
        matrix = rng.integers(0, 15, size=(k[src], k[dst])).astype(float)
        matrix[rng.random(matrix.shape) < 0.1] = math.inf
        edges.append((f"n{src}", f"n{dst}", matrix))
    return Problem.build(specs, edges)


def test_bound_never_exceeds_the_optimum():
    for seed in range(300):
        problem = random_problem(seed)
        optimum, _ = brute_force(problem)
        assert lp_lower_bound(problem) <= optimum, seed


def test_bound_is_exact_on_trees():
    exact = 0
    for seed in range(150):
        problem = random_tree(seed)
        optimum, _ = brute_force(problem)
        bound = lp_lower_bound(problem)
        if math.isinf(optimum):
            assert bound == math.inf, seed  # the local polytope is tight on trees: empty too
        else:
            assert bound <= optimum and bound == pytest.approx(optimum, abs=1e-6), seed
            exact += 1
    assert exact > 100


def test_bound_is_inf_on_an_infeasible_problem():
    problem = Problem.build(
        [("a", ["x", "y"], [0, 1]), ("b", ["x", "y"], [1, 0]), ("c", ["x"], [0])],
        [("a", "b", [[0, None], [None, 0]]), ("b", "c", [[None], [0]]), ("a", "c", [[0], [None]])],
    )
    assert brute_force(problem)[0] == math.inf
    assert lp_lower_bound(problem) == math.inf


def test_pdlp_bound_is_valid():
    for seed in range(20):
        problem = random_problem(seed, nodes=5)
        optimum, _ = brute_force(problem)
        assert lp_lower_bound(problem, solver="PDLP") <= optimum
    tree = random_tree(1)
    assert lp_lower_bound(tree, solver="PDLP") == pytest.approx(brute_force(tree)[0], rel=1e-4)


def test_unknown_lp_solver_rejected():
    with pytest.raises(SolverError, match="solver"):
        lp_lower_bound(random_problem(0), solver="SIMPLEX")


def test_solve_with_bound_adds_it():
    problem = random_problem(7, nodes=7, max_candidates=4, density=0.7)
    sol = solve(problem, "ilp", hint=False, bound=True)
    assert sol.lower_bound == sol.cost


def test_presolve_bound_is_valid_and_at_least_the_plain_lp():
    for seed in range(150):
        problem = random_problem(seed, density=0.3 + 0.1 * (seed % 6))
        optimum, _ = brute_force(problem)
        reduced, plain = lp_lower_bound(problem), lp_lower_bound(problem, presolve=False)
        assert reduced <= optimum, seed
        assert reduced >= plain - 1e-6, seed


def test_presolve_closes_the_gap_on_an_odd_cycle():
    # two colours on a triangle, equal colours cost 1: the plain LP takes every colour by half and bounds 0
    edges = [(u, v, [[1, 0], [0, 1]]) for u, v in (("a", "b"), ("b", "c"), ("c", "a"))]
    problem = Problem.build([(n, ["r", "g"], [0, 0]) for n in "abc"], edges)
    assert lp_lower_bound(problem, presolve=False) == pytest.approx(0.0, abs=1e-6)
    assert lp_lower_bound(problem) == pytest.approx(1.0, abs=1e-6) and lp_lower_bound(problem) <= 1.0


def test_bad_presolve_rejected():
    with pytest.raises(SolverError, match="presolve"):
        lp_lower_bound(random_problem(0), presolve="yes")
