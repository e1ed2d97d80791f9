"""Exact pruning of dominated candidates (dead-end elimination, Goldstein's criterion).

Candidate ``i`` of node ``u`` is dominated by its candidate ``j`` when switching from ``i`` to ``j`` can never raise
the cost, whatever the neighbours take:

    c_u[i] - c_u[j] + sum over neighbours v of  min_k (M_uv[i, k] - M_uv[j, k])  >= 0,

with ``k`` over the neighbour's live candidates, and a ``k`` that ``i`` forbids with (``M_uv[i, k]`` infinite)
left out of the minimum (no solution takes it). Any assignment using ``i`` then costs at least as much with ``j``, so
forbidding ``i`` keeps at least one optimum. Candidates are forbidden one at a time, each by a candidate still live,
so every node keeps one; after a node loses candidates its neighbours are examined again, until nothing changes.

On layout problems this removes every schedule that shares its layouts (hence its edge rows) with a cheaper one, and
the layouts whose kernels cost more than any transform could save. The test compares sums of cost differences, so
it is exact on integer costs (sums below 2**53); with floating-point costs a rounding error of the order of the
costs' ulp could drop a candidate that is worse by less than that.

See Goldstein, "Efficient rotamer elimination applied to protein side-chains and related spin glasses" (Biophysical
Journal, 1994), and de Givry et al., "Dead-end elimination for weighted CSP" (CP 2013), on which toulbar2's
preprocessing is based.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from solvers.problem import Node, Problem

DENSE_ENTRIES = 1 << 21
"""Above this many entries (live candidates squared x the neighbour's live candidates), an edge's differences are
built one candidate of the node at a time."""


def prune_dominated(problem: Problem, check_time: Callable[[], None] | None = None) -> tuple[Problem, int]:
    """``problem`` with every dominated candidate forbidden (cost inf), and how many were; positions, names and
    edges are unchanged, so assignments carry over as they are. ``check_time`` is called once per node examined."""
    costs = [node.costs.copy() for node in problem.nodes]
    live = [np.flatnonzero(np.isfinite(c)) for c in costs]
    incident: list[list[tuple[int, np.ndarray]]] = [[] for _ in problem.nodes]
    for (u, v), matrix in problem.pairs.items():
        incident[u].append((v, matrix))
        incident[v].append((u, matrix.T))
    removed, dirty = 0, set(range(problem.num_nodes))
    while dirty:  # rounds: a node is examined again (once) in the round after a neighbour lost candidates
        touched: set[int] = set()
        for u in sorted(dirty):
            if check_time is not None:
                check_time()
            if len(live[u]) < 2:
                continue
            own = costs[u][live[u]]
            margin = own[:, None] - own[None, :]  # margin[i, j] >= 0: j dominates i
            with np.errstate(invalid="ignore"):  # inf + -inf: i allows nothing on one edge, so it can go (nan -> inf)
                for v, matrix in incident[u]:
                    margin += _worst_gains(matrix.take(live[u], axis=0).take(live[v], axis=1))
            drop = _dominated(np.where(np.isnan(margin), math.inf, margin), own)
            if drop.any():
                costs[u][live[u][drop]] = math.inf
                live[u] = live[u][~drop]
                removed += int(drop.sum())
                touched.update(v for v, _ in incident[u])
        dirty = touched
    if not removed:
        return problem, 0
    nodes = tuple(Node(node.name, node.candidates, c) for node, c in zip(problem.nodes, costs))
    return Problem(nodes, problem.edges, problem.meta), removed


def _worst_gains(rows: np.ndarray) -> np.ndarray:
    """``out[i, j] = min_k (rows[i, k] - rows[j, k])`` over the ``k`` that ``rows[i]`` allows (inf if none)."""
    live, width = rows.shape
    if width == 0:
        return np.zeros((live, live))
    forbidden = np.isinf(rows)
    with np.errstate(invalid="ignore"):  # inf - inf where both forbid k: masked just below
        if live * live * width <= DENSE_ENTRIES:
            diff = rows[:, None, :] - rows[None, :, :]
            return np.where(forbidden[:, None, :], math.inf, diff).min(axis=2)
        out = np.empty((live, live))
        for i in range(live):
            out[i] = np.where(forbidden[i], math.inf, rows[i] - rows).min(axis=1)
        return out


def _dominated(margin: np.ndarray, own: np.ndarray) -> np.ndarray:
    """Which live candidates to forbid: the most expensive first, each if a candidate not yet forbidden dominates it."""
    np.fill_diagonal(margin, -math.inf)
    drop = np.zeros(len(own), dtype=bool)
    for i in np.lexsort((-np.arange(len(own)), -own)):  # among equal costs the later candidate goes first
        if np.any((margin[i] >= 0) & ~drop):
            drop[i] = True
    return drop
