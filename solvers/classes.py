"""Classes of candidates an edge cannot tell apart, for a smaller exact model.

On an edge ``(u, v)`` with cost matrix ``M``, two candidates of ``u`` whose rows of ``M`` are equal (over ``v``'s live
candidates) cost the same against every choice of ``v``: on layout problems, the schedules of one layout. The local
polytope (``solvers/bound.py``) and the integer program on it (``solvers/ilp.py``) then need one pair variable per class
pair ``(a, b)`` instead of one per candidate pair, with the marginal constraints

    sum_b y[e, a, b] = sum over i in a of x[u, i],    sum_a y[e, a, b] = sum over j in b of x[v, j].

The model stays exact: with ``x`` integral, exactly one row class and one column class sum to 1 and ``y`` is 1 on
their pair. Its LP relaxation has the same optimum as the per-candidate one (from a class solution, ``y[e, i, j] =
y[e, a, b] * x[u, i] / x_a * x[v, j] / x_b`` is a per-candidate one of equal cost, and summing a per-candidate
solution over classes goes the other way). On the core of the DenseNet-201 problem of 2026-11-23 the pair variables drop
from 125966 to 48996, and CP-SAT proves the optimum it could not reach in 60 s before (docs/solvers.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from solvers.problem import Problem


@dataclass(frozen=True)
class EdgePairs:
    """An edge's classes of live candidates (``rows`` of its first node, ``cols`` of its second) and the class pairs
    ``(a, b, cost)`` whose cost is finite, row-major."""

    rows: list[list[int]]
    cols: list[list[int]]
    pairs: list[tuple[int, int, float]]


def live_candidates(problem: Problem) -> list[list[int]]:
    """Each node's candidates of finite cost, in increasing order."""
    return [[int(i) for i in np.flatnonzero(np.isfinite(node.costs))] for node in problem.nodes]


def class_pairs(problem: Problem) -> dict[tuple[int, int], EdgePairs]:
    """``EdgePairs`` of every edge of ``problem`` over its live candidates."""
    live = live_candidates(problem)
    out = {}
    for (u, v), matrix in problem.pairs.items():
        rows, cols = edge_classes(matrix, live[u], live[v])
        pairs = [
            (a, b, float(matrix[row[0], col[0]]))
            for a, row in enumerate(rows)
            for b, col in enumerate(cols)
            if np.isfinite(matrix[row[0], col[0]])
        ]
        out[u, v] = EdgePairs(rows, cols, pairs)
    return out


def edge_classes(
    matrix: np.ndarray, rows: Sequence[int], cols: Sequence[int]
) -> tuple[list[list[int]], list[list[int]]]:
    """The live candidates ``rows`` of ``matrix``'s node and ``cols`` of its other node, grouped by equal rows
    (compared over ``cols``) and equal columns (over ``rows``), each class in increasing order, classes by first member.

    Examples
    --------
    >>> m = np.array([[0.0, 1.0, 1.0], [0.0, 1.0, 1.0], [2.0, np.inf, np.inf]])
    >>> edge_classes(m, [0, 1, 2], [0, 1, 2])
    ([[0, 1], [2]], [[0], [1, 2]])
    >>> edge_classes(m, [0, 2], [1, 2])
    ([[0], [2]], [[1, 2]])
    """
    live = np.asarray(matrix)[np.ix_(np.asarray(rows, dtype=int), np.asarray(cols, dtype=int))]
    return _group(live, rows), _group(live.T, cols)


def _group(block: np.ndarray, labels: Sequence[int]) -> list[list[int]]:
    """``labels`` grouped by equal rows of ``block`` (inf equals inf), in order of first appearance."""
    if len(labels) == 0:
        return []
    _, first, inverse = np.unique(block, axis=0, return_index=True, return_inverse=True)
    groups: list[list[int]] = [[] for _ in first]
    for label, group in zip(labels, inverse.reshape(-1)):
        groups[group].append(int(label))
    return sorted(groups, key=lambda group: group[0])
