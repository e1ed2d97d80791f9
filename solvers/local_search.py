"""Helpers shared by the heuristic solvers: oriented adjacency and iterated conditional modes (ICM)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from solvers.problem import Problem


def oriented_adjacency(problem: Problem) -> list[dict[int, np.ndarray]]:
    """For each node position ``u``, ``{v: matrix}`` over its neighbours, each matrix with rows indexing ``u``.

    The two directions of an edge share memory (one is the transpose view of the other); nothing here is writable.
    """
    adj: list[dict[int, np.ndarray]] = [{} for _ in problem.nodes]
    for (u, v), m in problem.pairs.items():
        adj[u][v] = m
        adj[v][u] = m.T
    return adj


@dataclass(frozen=True)
class ICMResult:
    """Outcome of :func:`iterated_conditional_modes`: the improved assignment and what it took."""

    assignment: tuple[int, ...]
    rounds: int
    moves: int
    converged: bool


def iterated_conditional_modes(
    problem: Problem,
    assignment: Sequence[int],
    *,
    max_rounds: int = 100,
    deadline: float = math.inf,
) -> ICMResult:
    """Improve an assignment one node at a time until no single-node change lowers the cost.

    Each round sweeps the nodes in order; a node moves to the candidate minimising its own cost plus the edges to its
    neighbours' current choices, but only when that is strictly better than what it has (ties keep the current
    choice, then the lowest index), so the total cost never increases and the sweep terminates.

    Parameters
    ----------
    problem
        The problem.
    assignment
        Candidate index per node, the starting point.
    max_rounds
        At most this many sweeps (0 returns the start unchanged).
    deadline
        ``time.perf_counter()`` value after which no new sweep starts.

    Examples
    --------
    >>> p = Problem.build([("a", ["x", "y"], [0, 1]), ("b", ["x", "y"], [1, 0])], [("a", "b", [[0, 9], [9, 0]])])
    >>> iterated_conditional_modes(p, (0, 1))
    ICMResult(assignment=(1, 1), rounds=2, moves=1, converged=True)
    """
    x = np.array(problem.to_indices(assignment), dtype=np.intp)
    costs = [node.costs for node in problem.nodes]
    # Each node's incident matrices side by side, so one fancy index gathers the columns its neighbours chose.
    stacked: list[tuple[np.ndarray, np.ndarray, np.ndarray] | None] = []
    for nbrs in oriented_adjacency(problem):
        if not nbrs:
            stacked.append(None)
            continue
        order = sorted(nbrs)
        widths = np.array([nbrs[v].shape[1] for v in order], dtype=np.intp)
        offsets = np.concatenate(([0], np.cumsum(widths)[:-1])).astype(np.intp)
        wide = np.hstack([nbrs[v] for v in order])
        stacked.append((np.array(order, dtype=np.intp), offsets, wide))
    rounds = moves = 0
    converged = False
    while rounds < max_rounds and time.perf_counter() < deadline:
        rounds += 1
        changed = 0
        for u, entry in enumerate(stacked):
            if entry is None:
                continue  # an isolated node never changes after its first best choice
            nbrs, offsets, wide = entry
            local = costs[u] + wide[:, offsets + x[nbrs]].sum(axis=1)
            best = int(np.argmin(local))
            current = local[x[u]]
            if local[best] < current and not _same(local[best], current):
                x[u] = best
                changed += 1
        if rounds == 1:  # isolated nodes: their best candidate depends on nothing else
            for u, entry in enumerate(stacked):
                if entry is None:
                    best = int(np.argmin(costs[u]))
                    if costs[u][best] < costs[u][x[u]]:
                        x[u] = best
                        changed += 1
        moves += changed
        if not changed:
            converged = True
            break
    return ICMResult(tuple(int(i) for i in x), rounds, moves, converged)


def _same(a: float, b: float) -> bool:
    """Equal up to rounding (never true for a finite value against inf)."""
    return math.isfinite(b) and abs(a - b) <= 1e-12 * max(1.0, abs(b))
