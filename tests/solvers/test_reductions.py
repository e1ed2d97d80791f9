"""The exact reductions alone: core optimum + offset is the optimum, back-substitution, what each rule removes."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from solvers.problem import Problem, ProblemError
from solvers.reductions import Reduction, min_out, reduce_problem
from solvers.testing import brute_force, random_problem


def every_assignment(problem: Problem):
    return itertools.product(*(range(k) for k in problem.domain_sizes))


def test_core_optimum_plus_offset_is_the_optimum():
    kinds = set()
    for seed in range(400):
        problem = random_problem(seed, nodes=2 + seed % 6, density=0.3 + 0.1 * (seed % 7), max_candidates=3)
        optimum, _ = brute_force(problem)
        reduction = reduce_problem(problem)
        if reduction.infeasible:
            kinds.add("infeasible")
            assert math.isinf(optimum) and reduction.core is None, seed
            continue
        core_optimum, core_x = (0.0, ()) if reduction.core is None else brute_force(reduction.core)
        kinds.add("empty core" if reduction.core is None else "core")
        assert core_optimum + reduction.offset == optimum, seed  # integer costs: every sum is exact
        if math.isfinite(optimum):
            x = reduction.expand(core_x)
            assert problem.evaluate(x) == optimum, seed
            assert not problem.violations(x)
    assert kinds == {"infeasible", "empty core", "core"}  # the sample exercises every outcome


def test_every_core_assignment_extends_at_its_cost_plus_the_offset():
    checked = 0
    for seed in range(200):
        problem = random_problem(seed, nodes=6, density=0.8, max_candidates=3, forbid=0.15)
        reduction = reduce_problem(problem)
        if reduction.core is None:
            continue
        checked += 1
        core = reduction.core
        assert [n.name for n in core.nodes] == [problem.nodes[v].name for v in reduction.core_nodes]
        for n, v in zip(core.nodes, reduction.core_nodes):
            assert n.candidates == problem.nodes[v].candidates
            assert len(core.neighbors()[core.index(n.name)]) >= 3  # only irreducible nodes survive
        for y in every_assignment(core):
            x = reduction.expand(y)
            assert [x[v] for v in reduction.core_nodes] == list(y)
            full, folded = problem.evaluate(x), core.evaluate(y) + reduction.offset
            assert full == folded or (math.isinf(full) and math.isinf(folded)), seed
    assert checked > 20


def names(n: int) -> list[str]:
    return [f"n{i}" for i in range(n)]


def problem_on(edges: list[tuple[int, int]], n: int, k: int = 3, seed: int = 0) -> Problem:
    rng = np.random.default_rng(seed)
    nodes = [(name, [f"c{j}" for j in range(k)], rng.integers(0, 20, k).astype(float)) for name in names(n)]
    return Problem.build(nodes, [(f"n{u}", f"n{v}", rng.integers(0, 15, (k, k)).astype(float)) for u, v in edges])


def test_chains_trees_and_cycles_vanish_cliques_stay():
    chain = reduce_problem(problem_on([(i, i + 1) for i in range(49)], 50))
    assert chain.core is None and chain.removed["degree-1"] == 49 and chain.removed["degree-0"] == 1
    cycle = reduce_problem(problem_on([(i, (i + 1) % 8) for i in range(8)], 8))
    assert cycle.core is None and cycle.removed["degree-2"] == 6
    k4 = problem_on(list(itertools.combinations(range(4), 2)), 4)
    kept = reduce_problem(k4)
    assert kept.core_nodes == (0, 1, 2, 3) and kept.offset == 0.0 and not kept.steps
    assert kept.summary.endswith("0 degree-2 nodes removed; 4 left")
    for a, b in zip(kept.core.nodes, k4.nodes):
        np.testing.assert_array_equal(a.costs, b.costs)
    # a pendant chain on the clique folds into it and leaves the clique as the core
    with_tail = problem_on([*itertools.combinations(range(4), 2), (3, 4), (4, 5)], 6)
    tail = reduce_problem(with_tail)
    assert tail.core_nodes == (0, 1, 2, 3) and sum(tail.removed.values()) == 2
    assert brute_force(tail.core)[0] + tail.offset == brute_force(with_tail)[0]


def test_a_single_allowed_candidate_is_fixed_and_unlocks_the_rest():
    problem = problem_on(list(itertools.combinations(range(4), 2)), 4, seed=3)
    nodes = [(n.name, n.candidates, n.costs) for n in problem.nodes]
    nodes[2] = ("n2", nodes[2][1], [math.inf, 4.0, math.inf])
    fixed = Problem.build(nodes, [(e.src, e.dst, e.costs) for e in problem.edges])
    reduction = reduce_problem(fixed)
    assert reduction.removed["fixed"] == 1 and reduction.core is None
    assert reduction.expand()[2] == 1
    assert fixed.evaluate(reduction.expand()) == reduction.offset == brute_force(fixed)[0]


def test_infeasibility_found_by_the_folds():
    # two colours on a triangle with equal colours forbidden
    edges = [(u, v, [[None, 1], [1, None]]) for u, v in itertools.combinations(names(3), 2)]
    reduction = reduce_problem(Problem.build([(n, ["r", "g"], [0, 0]) for n in names(3)], edges))
    assert reduction.infeasible and reduction.core is None and reduction.core_nodes == ()


def test_identity_keeps_the_problem():
    problem = random_problem(5, nodes=5)
    same = Reduction.identity(problem)
    assert same.core is problem and same.offset == 0.0
    x = tuple(k - 1 for k in problem.domain_sizes)
    assert same.expand(x) == x
    with pytest.raises(ProblemError, match="core choices"):
        same.expand(())


def test_check_time_can_abort():
    def stop() -> None:
        raise TimeoutError("stop")

    with pytest.raises(TimeoutError):
        reduce_problem(problem_on([(0, 1)], 2), stop)


@pytest.mark.parametrize("seed", range(10))
def test_memory_bounded_minimisation_matches_the_dense_one(seed):
    rng = np.random.default_rng(seed)
    k, a, b = (int(v) for v in rng.integers(1, 5, 3))
    parts = [rng.integers(0, 9, (k, 1, 1)).astype(float), rng.integers(0, 9, (k, a, 1)), rng.integers(0, 9, (k, 1, b))]
    parts[1] = np.where(rng.random(parts[1].shape) < 0.2, math.inf, parts[1])
    dense, dense_arg = min_out(parts, (a, b))
    looped, looped_arg = min_out(parts, (a, b), dense_entries=0)
    np.testing.assert_array_equal(dense, looped)
    np.testing.assert_array_equal(dense_arg, looped_arg)
