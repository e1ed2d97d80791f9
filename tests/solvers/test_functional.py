"""Elimination of functionally determined nodes: exact against brute force, identity when nothing is determined,
infeasibility detected, expansion consistent with the core's costs."""

from __future__ import annotations

import doctest
import itertools
import math

import numpy as np
import pytest

from solvers import Problem, functional
from solvers.functional import eliminate_functional
from solvers.generators import generate
from solvers.testing import brute_force, frustrated_grid, random_problem


def planted_problem(seed: int, nodes: int = 6, candidates: int = 4, interference: float = 0.5) -> Problem:
    """A CELAR-like problem small enough for brute force: links paired by hard constraints that make one a function
    of the other, plus soft interference between links on close frequencies and random own costs.

    Each node is a link with 2 to ``candidates`` frequencies out of 0..11. The nodes are paired at random, and each
    pair gets one hard constraint (every other pair of candidates forbidden): the frequencies at a fixed distance
    ``|f_u - f_v| = d`` (as a duplex pair of radio links; ``d`` taken from one allowed pair), the candidate indices
    at a fixed offset, or a random one-to-one matching of the candidates. Allowed pairs cost 0-2. Every other pair of
    links interferes with probability ``interference``, costing a random weight per unit of frequency closer than 3.
    A few own costs are forbidden, never all of a node's.
    """
    rng = np.random.default_rng(seed)
    k = [int(rng.integers(2, candidates + 1)) for _ in range(nodes)]
    freq = [np.sort(rng.choice(12, size=size, replace=False)) for size in k]
    specs = []
    for i in range(nodes):
        costs = rng.integers(0, 10, k[i]).astype(float)
        mask = rng.random(k[i]) < 0.1
        mask[rng.integers(k[i])] = False
        costs[mask] = math.inf
        specs.append((f"link{i}", [f"f{f}" for f in freq[i]], costs))
    edges = []
    order = rng.permutation(nodes).tolist()
    duplex = list(zip(order[::2], order[1::2]))
    for u, v in duplex:
        m = np.full((k[u], k[v]), math.inf)
        kind = int(rng.integers(3))
        if kind == 0:  # frequencies at a fixed distance
            d = abs(int(freq[u][rng.integers(k[u])]) - int(freq[v][rng.integers(k[v])]))
            allowed = np.abs(freq[u][:, None] - freq[v][None, :]) == d
        elif kind == 1:  # candidate indices at a fixed offset
            shift = int(rng.integers(-1, 2))
            allowed = np.arange(k[u])[:, None] + shift == np.arange(k[v])[None, :]
        else:  # a one-to-one matching
            allowed = np.zeros((k[u], k[v]), dtype=bool)
            size = min(k[u], k[v])
            allowed[rng.permutation(k[u])[:size], rng.permutation(k[v])[:size]] = True
        m[allowed] = rng.integers(0, 3, int(allowed.sum()))
        edges.append((f"link{u}", f"link{v}", m))
    paired = set(duplex)
    for u, v in itertools.combinations(range(nodes), 2):
        if (u, v) not in paired and (v, u) not in paired and rng.random() < interference:
            closeness = np.maximum(0, 3 - np.abs(freq[u][:, None] - freq[v][None, :]))
            edges.append((f"link{u}", f"link{v}", closeness * float(rng.integers(1, 6))))
    return Problem.build(specs, edges, {"generator": "planted", "seed": seed})


def instances(count: int):
    """Planted problems, and random problems whose forbidden entries sometimes determine a node."""
    for seed in range(count):
        yield planted_problem(seed, nodes=5 + seed % 3, candidates=3 + seed % 2)
        yield random_problem(seed, nodes=6, max_candidates=4, density=0.6, forbid=0.2)


def _same(a: float, b: float) -> bool:
    return a == b if math.isinf(a) or math.isinf(b) else a == pytest.approx(b)


def test_elimination_is_exact_and_expands_to_the_cores_cost():
    eliminated = infeasible = 0
    rng = np.random.default_rng(0)
    for n, problem in enumerate(instances(60)):
        optimum, _ = brute_force(problem)
        r = eliminate_functional(problem)
        eliminated += r.removed["functional"]
        if r.core is None:  # proven forbidden: so must brute force find it
            assert r.infeasible and math.isinf(optimum), n
            infeasible += 1
            continue
        assert r.offset == 0 and r.removed["functional"] == problem.num_nodes - r.core.num_nodes, n
        for position, v in enumerate(r.core_nodes):  # the survivors keep their names and candidates
            assert r.core.nodes[position].name == problem.nodes[v].name
            assert r.core.nodes[position].candidates == problem.nodes[v].candidates
        core_optimum, y = brute_force(r.core)
        assert _same(core_optimum + r.offset, optimum), n
        assert _same(problem.evaluate(r.expand(y)), core_optimum), n
        for _ in range(5):  # every core assignment, not just an optimal one, expands to its own cost
            y = tuple(int(rng.integers(size)) for size in r.core.domain_sizes)
            assert _same(problem.evaluate(r.expand(y)), r.core.evaluate(y)), n
    assert eliminated > 100 and infeasible > 0  # the sample exercises elimination and infeasibility


def test_chained_duplex_pairs_leave_one_node():
    """b is a + 1 and c is b + 1: c folds into b, b into a, and a pays for all three."""
    shift = [[None, 0, None], [None, None, 0], [None, None, None]]
    problem = Problem.build(
        [("a", ["0", "1", "2"], [0, 1, 2]), ("b", ["0", "1", "2"], [5, 0, 3]), ("c", ["0", "1", "2"], [0, 0, 7])],
        [("a", "b", shift), ("b", "c", shift), ("a", "c", [[1, 2, 3], [4, 5, 6], [7, 8, 9]])],
    )
    r = eliminate_functional(problem)
    assert r.core.num_nodes == 1 and r.removed["functional"] == 2
    finite = tuple(int(i) for i in np.flatnonzero(np.isfinite(r.core.nodes[0].costs)))
    assert len(finite) == 1 and r.expand(finite) == (0, 1, 2)
    assert r.core.evaluate(finite) == problem.evaluate((0, 1, 2)) == brute_force(problem)[0] == 0 + 0 + 7 + 3


def test_identity_when_no_node_is_determined():
    for problem in (frustrated_grid(4, 3, seed=1), generate("random", seed=0, nodes=30, candidates=4)):
        r = eliminate_functional(problem)  # no forbidden entry, no node with a single candidate
        assert r.core is problem and r.core_nodes == tuple(range(problem.num_nodes)) and r.steps == ()
        assert r.removed["functional"] == 0 and r.offset == 0
        assert r.expand((1,) * problem.num_nodes) == (1,) * problem.num_nodes


def test_contradicting_hard_constraints_are_found_infeasible():
    """b = a, c = b, but c = a + 1: no finite assignment."""
    same, shift = [[0, None], [None, 0]], [[None, 0], [None, None]]
    problem = Problem.build([(name, ["0", "1"], [0, 0]) for name in "abcd"],
                            [("a", "b", same), ("b", "c", same), ("a", "c", shift), ("c", "d", [[0, 1], [1, 0]])])
    assert math.isinf(brute_force(problem)[0])
    r = eliminate_functional(problem)
    assert r.core is None and r.infeasible and r.removed["functional"] >= 1


def test_check_time_is_called_before_each_elimination_and_may_abort():
    problem = planted_problem(3, nodes=8)
    calls = []
    r = eliminate_functional(problem, lambda: calls.append(1))
    assert len(calls) == r.removed["functional"] > 0

    def out_of_time() -> None:
        raise TimeoutError

    with pytest.raises(TimeoutError):
        eliminate_functional(problem, out_of_time)


def test_docstring_examples():
    assert doctest.testmod(functional).failed == 0
