"""Edge classes: a partition of the live candidates by equal rows / columns, and the exact model built on them."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from solvers import Problem, solve
from solvers.bound import lp_lower_bound
from solvers.classes import edge_classes
from solvers.testing import brute_force


def _layout_matrix(rng: np.random.Generator, rows: int, cols: int, layouts: int) -> np.ndarray:
    """A cost matrix whose entries depend only on a layout per candidate, with forbidden layout pairs."""
    table = rng.integers(0, 15, size=(layouts, layouts)).astype(float)
    table[rng.random(table.shape) < 0.15] = math.inf
    return table[np.ix_(rng.integers(0, layouts, rows), rng.integers(0, layouts, cols))]


def test_classes_partition_the_live_candidates_into_equal_rows_and_columns():
    rng = np.random.default_rng(0)
    for _ in range(200):
        m = _layout_matrix(rng, int(rng.integers(1, 9)), int(rng.integers(1, 9)), int(rng.integers(1, 4)))
        rows = sorted(rng.choice(m.shape[0], size=int(rng.integers(0, m.shape[0] + 1)), replace=False).tolist())
        cols = sorted(rng.choice(m.shape[1], size=int(rng.integers(0, m.shape[1] + 1)), replace=False).tolist())
        row_classes, col_classes = edge_classes(m, rows, cols)
        for classes, live, block in ((row_classes, rows, m[:, cols]), (col_classes, cols, m[rows, :].T)):
            assert sorted(i for c in classes for i in c) == live
            assert all(c == sorted(c) for c in classes)
            assert [c[0] for c in classes] == sorted(c[0] for c in classes)
            for c in classes:  # equal rows within a class (inf equal to inf), different rows across classes
                assert all(np.array_equal(block[i], block[c[0]]) for i in c)
            firsts = [block[c[0]].tobytes() for c in classes]
            assert len(set(firsts)) == len(firsts)


def _layout_problem(seed: int, nodes: int = 6, density: float = 0.8) -> Problem:
    """Candidates as (layout, schedule) pairs: node costs per candidate, edge costs per layout pair."""
    rng = np.random.default_rng(seed)
    k = [int(rng.integers(1, 5)) for _ in range(nodes)]
    costs = [rng.integers(0, 20, size=n).astype(float) for n in k]
    specs = [(f"n{u}", [f"c{i}" for i in range(k[u])], costs[u]) for u in range(nodes)]
    edges = [
        (f"n{u}", f"n{v}", _layout_matrix(rng, k[u], k[v], 2))
        for u in range(nodes)
        for v in range(u + 1, nodes)
        if rng.random() < density
    ]
    return Problem.build(specs, edges)


def test_cpsat_on_edge_classes_matches_brute_force_with_fewer_pair_variables():
    merged = 0
    for seed in range(40):
        problem = _layout_problem(seed)
        optimum, _ = brute_force(problem)
        sol = solve(problem, "ilp", presolve=False, dominance=False, lp_first=False, hint=seed % 2 == 0)
        assert sol.status == ("infeasible" if math.isinf(optimum) else "optimal"), seed
        assert sol.cost == optimum, seed
        line = next(line for line in sol.log if line.startswith("cp-sat"))
        pair_variables = int(re.search(r"(\d+) y", line).group(1))
        finite_pairs = sum(int(np.isfinite(m).sum()) for m in problem.pairs.values())
        assert pair_variables <= finite_pairs, seed
        merged += pair_variables < finite_pairs
    assert merged > 20


def _per_candidate_lp(problem: Problem) -> float:
    """The local polytope's LP optimum with one pair variable per candidate pair (no classes), by GLOP."""
    from ortools.linear_solver import pywraplp

    lp = pywraplp.Solver.CreateSolver("GLOP")
    live = [[int(i) for i in np.flatnonzero(np.isfinite(node.costs))] for node in problem.nodes]
    x = {(u, i): lp.NumVar(0, 1, "") for u in range(problem.num_nodes) for i in live[u]}
    objective = sum(float(problem.nodes[u].costs[i]) * var for (u, i), var in x.items())
    for u in range(problem.num_nodes):
        lp.Add(sum(x[u, i] for i in live[u]) == 1)
    for (u, v), m in problem.pairs.items():
        y = {(i, j): lp.NumVar(0, 1, "") for i in live[u] for j in live[v] if np.isfinite(m[i, j])}
        objective += sum(float(m[i, j]) * var for (i, j), var in y.items())
        for i in live[u]:
            lp.Add(sum(var for (a, _), var in y.items() if a == i) == x[u, i])
        for j in live[v]:
            lp.Add(sum(var for (_, b), var in y.items() if b == j) == x[v, j])
    lp.Minimize(objective)
    assert lp.Solve() == pywraplp.Solver.OPTIMAL
    return lp.Objective().Value()


def test_lp_on_edge_classes_is_as_tight_as_the_per_candidate_lp():
    checked = 0
    for seed in range(25):
        problem = _layout_problem(100 + seed, nodes=5, density=1.0)
        optimum, _ = brute_force(problem)
        if math.isinf(optimum):
            continue
        bound = lp_lower_bound(problem, presolve=False)
        assert bound <= optimum + 1e-9, seed
        assert bound == pytest.approx(_per_candidate_lp(problem), abs=1e-6), seed
        checked += 1
    assert checked >= 15
