"""The auto solver: brute-force optima, the step each shape goes to (said in the log), the shared time limit and the
fallback when toulbar2 finds nothing."""

from __future__ import annotations

import math

import pytest

from solvers import SolverError, solve
from solvers.auto import AutoSolver
from solvers.base import Solution, make_solver
from solvers.generators import densenet, generate
from solvers.testing import brute_force, frustrated_grid, random_problem


def test_matches_brute_force_and_is_the_default():
    for seed in range(150):
        problem = random_problem(seed, nodes=7, density=0.3 + 0.1 * (seed % 6))
        optimum, _ = brute_force(problem)
        sol = solve(problem)
        assert sol.solver == "auto"
        if math.isinf(optimum):
            assert sol.status == "infeasible" and not sol.assignment, seed
        else:
            assert (sol.status, sol.cost, sol.lower_bound) == ("optimal", optimum, optimum), (seed, sol.log)


def test_each_shape_goes_to_its_step():
    chain = solve(generate("chain", seed=0, candidates=5, nodes=200))
    assert chain.optimal and chain.log[-1] == "auto: the reductions solved the problem"
    narrow = solve(frustrated_grid(5, 4))
    assert narrow.optimal and any("narrow" in line and "elimination (dp)" in line for line in narrow.log)
    wide = solve(densenet(4, 0, blocks=(6, 6)))
    assert wide.optimal and any(line.endswith(": toulbar2") for line in wide.log), wide.log
    assert any(line.startswith("  toulbar2: optimal") for line in wide.log)
    forced = solve(frustrated_grid(5, 4), max_table_entries=1)
    assert forced.optimal and forced.cost == narrow.cost and any("toulbar2" in line for line in forced.log)


def test_out_of_time_keeps_the_best_assignment_and_toulbar2s_bound():
    sol = solve(frustrated_grid(), time_limit=1.0)
    assert sol.status == "feasible" and 0 < sol.lower_bound < sol.cost and sol.seconds < 2.0


def test_falls_back_to_pbqp_when_toulbar2_finds_nothing(monkeypatch):
    from solvers import auto

    class FindsNothing(auto.Toulbar2Solver):
        def _solve(self, problem, start):
            return Solution(self.name, {}, math.inf, "not_found", lower_bound=1.0, log=("toulbar2: nothing",))

    monkeypatch.setattr(auto, "Toulbar2Solver", FindsNothing)
    sol = solve(frustrated_grid(8, 4), time_limit=5.0)
    assert sol.status == "feasible" and math.isfinite(sol.cost) and 0 <= sol.lower_bound < sol.cost
    assert "auto: toulbar2 found no assignment in time: pbqp's heuristic" in sol.log


@pytest.mark.parametrize("value", [0, math.inf, "big", True])
def test_bad_max_table_entries(value):
    with pytest.raises(SolverError, match="max_table_entries"):
        AutoSolver(max_table_entries=value).solve(random_problem(0, nodes=2))


def test_params():
    assert make_solver("auto").get_params() == {"time_limit": 60.0, "max_table_entries": 3e4}


def potts_grid(side: int, k: int, seed: int = 0):
    """Random unaries and attractive Potts edges: the LP is nearly tight, toulbar2's own bound weak."""
    import numpy as np

    from solvers import Problem

    rng = np.random.default_rng(seed)
    name = [[f"n{i}_{j}" for j in range(side)] for i in range(side)]
    nodes = [(name[i][j], [f"c{c}" for c in range(k)], np.round(rng.uniform(0, 10, k), 2))
             for i in range(side) for j in range(side)]
    steps = [(i, j, di, dj) for i in range(side) for j in range(side) for di, dj in ((0, 1), (1, 0))]
    edges = [(name[i][j], name[i + di][j + dj], np.round((1 - np.eye(k)) * rng.uniform(1, 5), 2))
             for i, j, di, dj in steps if i + di < side and j + dj < side]
    return Problem.build(nodes, edges)


def test_a_potts_grid_goes_on_to_vac_and_is_proven():
    problem = potts_grid(20, 6)
    sol = solve(problem, time_limit=20.0)
    assert sol.optimal, sol.log
    assert any("toulbar2 without VAC stopped unproven" in line for line in sol.log)
    plain = solve(problem, "toulbar2", max_backtracks=1000)
    assert plain.status == "feasible" and plain.cost >= sol.cost
