"""Dominated-candidate pruning: the optimum survives, every node keeps a candidate, and what it must remove goes."""

from __future__ import annotations

import math

import numpy as np

from solvers import Problem, solve
from solvers.dominance import prune_dominated
from solvers.testing import brute_force, random_problem


def test_the_optimum_survives_and_every_node_keeps_a_candidate():
    pruned_any = 0
    for seed in range(300):
        problem = random_problem(seed, nodes=2 + seed % 6, density=0.3 + 0.1 * (seed % 7), max_candidates=4)
        optimum, _ = brute_force(problem)
        pruned, removed = prune_dominated(problem)
        assert [n.candidates for n in pruned.nodes] == [n.candidates for n in problem.nodes]
        assert removed == sum(int(np.isfinite(a.costs).sum() - np.isfinite(b.costs).sum())
                              for a, b in zip(problem.nodes, pruned.nodes))
        assert brute_force(pruned)[0] == optimum, seed  # integer costs: the sums are exact
        if math.isfinite(optimum):
            assert all(np.isfinite(n.costs).any() for n in pruned.nodes), seed
        pruned_any += removed > 0
    assert pruned_any > 100  # the sample exercises the pruning


def test_a_schedule_sharing_its_layouts_with_a_cheaper_one_goes():
    # b's candidates 0 and 2 have the same edge rows (same layouts, different schedules); 2 is cheaper.
    problem = Problem.build(
        [("a", ["x", "y"], [1, 2]), ("b", ["x:s0", "y", "x:s1"], [5, 1, 4]), ("c", ["x", "y"], [0, 0])],
        [("a", "b", [[0, 3, 0], [3, 0, 3]]), ("b", "c", [[0, 3], [3, 0], [0, 3]])],
    )
    pruned, removed = prune_dominated(problem)
    assert removed == 1
    assert math.isinf(pruned.nodes[1].costs[0]) and np.isfinite(pruned.nodes[1].costs[1:]).all()


def test_equal_twins_keep_the_first():
    problem = Problem.build([("a", ["p", "q"], [2, 2]), ("b", ["x", "y"], [0, 1])], [("a", "b", [[1, 4], [1, 4]])])
    pruned, removed = prune_dominated(problem)
    assert removed == 2  # a's twin q, then b's y (worse by 3 whatever a takes)
    assert pruned.nodes[0].costs.tolist() == [2, math.inf] and pruned.nodes[1].costs.tolist() == [0, math.inf]


def test_a_candidate_that_another_forbids_with_stays():
    # b=y costs 100 more than b=x, but a=x forbids b=x: b=y stays, and so does everything else.
    problem = Problem.build(
        [("a", ["x", "y"], [0, 5]), ("b", ["x", "y"], [0, 100])], [("a", "b", [[math.inf, 0], [0, 0]])]
    )
    assert prune_dominated(problem) == (problem, 0)


def test_a_candidate_allowing_nothing_on_an_edge_goes():
    # a=y allows no candidate of c, so it goes, although only it allows b=x (inf - inf on the way: no warning).
    problem = Problem.build(
        [("a", ["x", "y"], [1, 0]), ("b", ["x", "y"], [0, 0]), ("c", ["x"], [0])],
        [("a", "b", [[math.inf, 5], [0, 0]]), ("a", "c", [[0], [math.inf]])],
    )
    pruned, removed = prune_dominated(problem)
    assert math.isinf(pruned.nodes[0].costs[1]) and removed >= 1


def test_ilp_with_and_without_dominance_agree_with_brute_force():
    for seed in range(60):
        problem = random_problem(seed, nodes=4 + seed % 4, density=0.7, max_candidates=4, forbid=0.05)
        optimum, _ = brute_force(problem)
        for dominance in (True, False):
            sol = solve(problem, "ilp", dominance=dominance, time_limit=20.0)
            if math.isinf(optimum):
                assert sol.status == "infeasible", seed
            else:
                assert sol.status == "optimal" and sol.cost == optimum, (seed, dominance)
