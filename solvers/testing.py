"""Tiny seeded problems and a brute-force reference: what the solver conformance suite (``solvers.checks``) and the
solver tests compare solvers against.

Examples
--------
>>> p = random_problem(3, nodes=4)
>>> optimum, x = brute_force(p)
>>> p.evaluate(x) == optimum
True
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from solvers.problem import Problem


def random_problem(
    seed: int,
    *,
    nodes: int | None = None,
    max_candidates: int = 3,
    density: float = 0.4,
    forbid: float = 0.1,
    multi_edges: bool = True,
) -> Problem:
    """A random problem small enough for brute force: forbidden entries, repeated edges and disconnected parts."""
    rng = np.random.default_rng(seed)
    n = nodes if nodes is not None else int(rng.integers(1, 8))
    k = [int(rng.integers(1, max_candidates + 1)) for _ in range(n)]
    specs = []
    for i in range(n):
        costs = rng.integers(0, 20, size=k[i]).astype(float)
        mask = rng.random(k[i]) < forbid
        mask[rng.integers(k[i])] = False  # never forbid every candidate
        costs[mask] = math.inf
        specs.append((f"n{i}", [f"c{j}" for j in range(k[i])], costs))
    edges = []
    for u, v in itertools.combinations(range(n), 2):
        if rng.random() < density:
            repeats = 2 if multi_edges and rng.random() < 0.2 else 1
            for _ in range(repeats):
                src, dst = (u, v) if rng.random() < 0.5 else (v, u)
                m = rng.integers(0, 15, size=(k[src], k[dst])).astype(float)
                m[rng.random(m.shape) < forbid] = math.inf
                edges.append((f"n{src}", f"n{dst}", m))
    return Problem.build(specs, edges)


def frustrated_grid(side: int = 20, candidates: int = 6, seed: int = 0) -> Problem:
    """A ``side`` x ``side`` grid with uniform random node and edge costs in [0, 1): every assignment is finite, and
    from 20 x 20 with 6 candidates on, no solver here proves the optimum within seconds, which is what the time-limit
    check needs."""
    rng = np.random.default_rng(seed)
    names = [[f"n{i}_{j}" for j in range(side)] for i in range(side)]
    labels = [f"c{c}" for c in range(candidates)]
    nodes = [(names[i][j], labels, rng.uniform(0, 1, candidates)) for i in range(side) for j in range(side)]
    edges = [
        (names[i][j], names[i + di][j + dj], rng.uniform(0, 1, (candidates, candidates)))
        for i in range(side)
        for j in range(side)
        for di, dj in ((0, 1), (1, 0))
        if i + di < side and j + dj < side
    ]
    return Problem.build(nodes, edges, {"generator": "frustrated_grid", "side": side, "seed": seed})


def brute_force(problem: Problem) -> tuple[float, tuple[int, ...]]:
    """The exact optimum and one optimal assignment (candidate indices), by enumerating every assignment.

    The optimum is ``inf`` when every assignment picks a forbidden candidate or pair. The work is the product of the
    domain sizes: keep it to a few thousand assignments.
    """
    best, best_x = math.inf, tuple(0 for _ in problem.nodes)
    for x in itertools.product(*(range(k) for k in problem.domain_sizes)):
        cost = problem.evaluate(x)
        if cost < best:
            best, best_x = cost, x
    return best, best_x
