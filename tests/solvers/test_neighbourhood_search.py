"""Neighbourhood search: never increases the cost, seeded, runs the rounds asked for and stops at the deadline, and
finds optima the local search misses; pbqp with it on by default: never below brute force, never worse than with it
off, within its time limit."""

from __future__ import annotations

import doctest
import math
import time

import numpy as np
import pytest

from solvers import Problem, neighbourhood_search, solve
from solvers.base import TimeUp
from solvers.functional import eliminate_functional
from solvers.generators import generate
from solvers.live_assignment import LiveAssignment
from solvers.local_search import star_pair_moves
from solvers.neighbourhood_search import neighbourhood_search as search
from solvers.pbqp import MAX_ROUNDS, PBQPSolver, default_rounds, reduce_and_solve
from solvers.reductions import reduce_problem
from solvers.testing import brute_force, frustrated_grid, random_problem
from tests.solvers.test_functional import planted_problem


def repair(neighbourhood: Problem) -> tuple[int, ...]:
    return reduce_and_solve(neighbourhood)[0]


def local_optimum(problem: Problem) -> tuple[int, ...]:
    """Where pbqp's heuristic stands before its neighbourhood search: the reductions with RN, then local search."""
    return star_pair_moves(problem, reduce_and_solve(problem)[0]).assignment


def penalised(problem: Problem, x) -> float:
    return LiveAssignment(problem, x).cost


GENERATED = {
    "densenet": lambda: generate("densenet", seed=0, candidates=4),
    "blocks": lambda: generate("blocks", seed=1, candidates=5),
    "random": lambda: generate("random", seed=2, nodes=80, candidates=6),
    "grid": lambda: frustrated_grid(8, 4, seed=3),
    "planted": lambda: planted_problem(4, nodes=12, candidates=5),
}


@pytest.mark.parametrize("kind", list(GENERATED))
def test_never_increases_the_cost_is_seeded_and_runs_every_round(kind):
    problem = GENERATED[kind]()
    start = local_optimum(problem)
    runs = {seed: search(problem, start, rounds=30, hubs=2, seed=seed, repair=repair) for seed in (0, 1)}
    for seed, result in runs.items():
        assert result == search(problem, start, rounds=30, hubs=2, seed=seed, repair=repair)
        assert result.rounds == 30 and 0 <= result.improved <= result.rounds
        assert penalised(problem, result.assignment) <= penalised(problem, start) + 1e-9
        assert problem.evaluate(result.assignment) <= problem.evaluate(start) + 1e-9 * abs(problem.evaluate(start))
        if result.improved:
            assert penalised(problem, result.assignment) < penalised(problem, start)


def test_never_increases_the_cost_from_random_starts_on_small_problems():
    rng = np.random.default_rng(0)
    for seed in range(40):
        problem = random_problem(seed, nodes=7, density=0.8, max_candidates=4, forbid=0.1) if seed % 2 else \
            planted_problem(seed, nodes=7)
        start = tuple(int(rng.integers(k)) for k in problem.domain_sizes)
        result = search(problem, start, rounds=10, hubs=1, seed=seed, repair=repair)
        assert penalised(problem, result.assignment) <= penalised(problem, start) + 1e-9, seed
        assert problem.evaluate(result.assignment) >= brute_force(problem)[0], seed


def test_no_rounds_and_a_past_deadline_leave_the_start():
    problem = frustrated_grid(6, 4, seed=1)
    start = local_optimum(problem)
    for result in (search(problem, start, rounds=0, hubs=4, repair=repair),
                   search(problem, start, rounds=50, hubs=4, repair=repair, deadline=time.perf_counter() - 1)):
        assert result.rounds == 0 and result.improved == 0 and result.assignment == start


def test_a_deadline_cuts_the_rounds_short():
    problem = frustrated_grid(12, 5, seed=2)
    start = local_optimum(problem)
    began = time.perf_counter()
    result = search(problem, start, rounds=10**6, hubs=4, repair=repair, deadline=began + 0.3)
    assert 0 < result.rounds < 10**6 and time.perf_counter() - began < 0.3 + 0.5


def test_a_repair_out_of_time_undoes_its_round_and_ends_the_search():
    problem = frustrated_grid(6, 4, seed=1)
    start = local_optimum(problem)
    calls = []

    def timed_repair(neighbourhood: Problem) -> tuple[int, ...]:
        calls.append(1)
        if len(calls) == 3:
            raise TimeUp("out of time")
        return repair(neighbourhood)

    result = search(problem, start, rounds=50, hubs=0, repair=timed_repair)
    full = search(problem, start, rounds=2, hubs=0, repair=repair)
    assert result.rounds == 2 and len(calls) == 3 and result.assignment == full.assignment
    assert problem.evaluate(result.assignment) <= problem.evaluate(start)


def test_pbqp_keeps_its_assignment_where_the_penalised_neighbourhood_would_overflow():
    """Costs near the limit: a neighbourhood priced with its forbidden entries as a finite penalty above every finite
    total is not a valid problem, so the search ends and the assignment found stands."""
    big, names = 9e298, [f"n{i}" for i in range(4)]
    problem = Problem.build([(n, ["a", "b"], [big, big]) for n in names],
                            [(u, v, [[big, None], [big, big]]) for i, u in enumerate(names) for v in names[i + 1:]])
    plain, searched = solve(problem, "pbqp", perturbations=0), solve(problem, "pbqp")
    assert searched.status == "feasible" and searched.cost == plain.cost == problem.evaluate(searched.assignment)


def test_finds_optima_that_the_local_search_misses():
    """Against brute force on small problems, and ``dp`` (exact) on 4 x 4 grids of 4 candidates."""
    reached = dict.fromkeys(("random", "planted", "grid"), 0)
    for seed in range(40):
        for kind, problem in (("random", random_problem(seed, nodes=6, density=1.0, max_candidates=5, forbid=0.0)),
                              ("planted", planted_problem(seed, nodes=7, candidates=4)),
                              ("grid", frustrated_grid(4, 4, seed))):
            optimum = solve(problem, "dp").cost if kind == "grid" else brute_force(problem)[0]
            start = local_optimum(problem)
            if not math.isfinite(optimum) or problem.evaluate(start) <= optimum + 1e-9:
                continue
            result = search(problem, start, rounds=40, hubs=2, seed=seed, repair=repair)
            cost = problem.evaluate(result.assignment)
            assert optimum - 1e-9 <= cost <= problem.evaluate(start), (kind, seed)
            reached[kind] += cost <= optimum + 1e-9
    assert min(reached.values()) >= 2, reached  # measured: 5 of 5 random, 2 of 2 planted, 9 of 12 grids


def test_docstring_examples():
    assert doctest.testmod(neighbourhood_search).failed == 0


# ---------------------------------------------------------------------------------------------------- pbqp
def test_pbqp_default_is_never_below_brute_force_nor_above_the_search_switched_off():
    lowered = 0
    for seed in range(60):
        problem = (random_problem(seed, nodes=7, density=0.9, max_candidates=4, forbid=0.05) if seed % 2
                   else planted_problem(seed, nodes=7, candidates=4))
        optimum, _ = brute_force(problem)
        default, off = PBQPSolver().solve(problem), PBQPSolver(perturbations=0).solve(problem)
        assert default.cost >= optimum or math.isinf(optimum), seed
        assert default.cost <= off.cost, seed
        if default.assignment:
            assert default.cost == pytest.approx(problem.evaluate(default.assignment)), seed
        if default.status == "feasible":  # RN fired: the search ran with the default number of rounds
            line = next(line for line in default.log if line.startswith("neighbourhood search:"))
            assert "not run" in line or " of " in line
        lowered += default.cost < off.cost
    assert lowered > 0


def test_pbqp_default_rounds_and_log():
    """Twice the ways to change one node of the core, at most ``MAX_ROUNDS``: a 5 x 5 grid leaves 21 core nodes
    of 3 candidates (84 rounds), a 6 x 6 grid 32 (100)."""
    for side, rounds in ((5, 84), (6, MAX_ROUNDS)):
        problem = frustrated_grid(side, 3, seed=4)
        core = eliminate_functional(reduce_problem(problem).core).core
        assert default_rounds(core) == min(MAX_ROUNDS, 2 * 2 * core.num_nodes) == rounds
        sol = PBQPSolver().solve(problem)
        assert sol.status == "feasible"
        assert any(line.startswith(f"neighbourhood search: {rounds} of {rounds} round(s) on a core of "
                                   f"{core.num_nodes} nodes") for line in sol.log)
    tiny = Problem.build([(f"n{i}", ["a", "b"], [0, 0]) for i in range(4)],
                         [(f"n{u}", f"n{v}", [[0, 1], [1, 0]]) for u in range(4) for v in range(u + 1, 4)])
    assert default_rounds(tiny) == 2 * 4 < MAX_ROUNDS  # one other candidate per node, twice over


def test_pbqp_time_limit_returns_the_best_so_far_in_time():
    problem = frustrated_grid(20, 6, seed=0)
    limit = 1.0
    sol = PBQPSolver(time_limit=limit, perturbations=10**6).solve(problem)
    assert sol.status == "feasible" and math.isfinite(sol.cost)
    assert sol.cost == pytest.approx(problem.evaluate(sol.assignment))
    assert sol.seconds < limit + 0.5
    line = next(line for line in sol.log if line.startswith("neighbourhood search:"))
    assert f"of {10**6} round(s)" in line and not line.startswith(f"neighbourhood search: {10**6} of")
