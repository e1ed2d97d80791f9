"""Exact elimination of functionally determined nodes: where an edge's hard constraints leave, for every allowed
candidate of one end, at most one allowed candidate of the other, the other end is a function of the first.

A hard equality-like constraint (two radio links of a duplex pair at a fixed frequency distance, say) ties two nodes
so that neither can move alone: every finite assignment gives ``v`` the candidate ``f(a)`` its neighbour ``u``'s
candidate ``a`` allows. Then ``v`` can be removed exactly, as toulbar2's preprocessing does: ``u``'s cost of ``a``
gains ``v``'s cost of ``f(a)`` and the edge's entry ``(a, f(a))`` (a candidate ``a`` that allows none is forbidden),
and each other edge ``(v, w)`` becomes an edge ``(u, w)`` with rows ``M_vw[f(a), :]``, added to one already there.
The two nodes then move as one, which is the move a local search needs on such problems.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from solvers.problem import Edge, Node, Problem
from solvers.reductions import KINDS, Reduction, Step


def eliminate_functional(problem: Problem, check_time: Callable[[], None] | None = None) -> Reduction:
    """Remove every node that an edge makes a function of its other end, until none is left.

    Returns a ``Reduction`` whose ``expand`` gives the eliminated nodes the candidates their determining neighbours
    allow (``offset`` 0, the eliminations counted as ``removed["functional"]``; ``core`` None and ``offset`` inf when
    every assignment proves forbidden), or ``Reduction.identity(problem)`` (with ``removed["functional"]`` 0) when
    no node is determined by another.
    ``check_time`` is called before each elimination (it raises to abort).

    Examples
    --------
    ``b`` must take the candidate after ``a``'s, so it goes, and ``a`` pays ``b``'s cost with it:

    >>> p = Problem.build([("a", ["x", "y"], [0, 0]), ("b", ["x", "y"], [1, 0])],
    ...                   [("a", "b", [[None, 0], [None, None]])])
    >>> r = eliminate_functional(p)
    >>> [n.name for n in r.core.nodes], r.core.nodes[0].costs.tolist(), r.expand([0])
    (['a'], [0.0, inf], (0, 1))
    """
    costs = [node.costs.copy() for node in problem.nodes]
    adj: list[dict[int, np.ndarray]] = [{} for _ in problem.nodes]  # adj[u][v]: rows index u
    for (u, v), m in problem.pairs.items():
        adj[u][v], adj[v][u] = m, m.T
    alive = set(range(problem.num_nodes))
    steps: list[Step] = []
    pending = list(problem.pairs)
    while pending:
        u, v = pending.pop()
        if u not in alive or v not in alive or v not in adj[u]:
            continue
        for keep, gone in ((u, v), (v, u)):
            image = _function(costs[keep], adj[keep][gone], costs[gone])
            if image is None:
                continue
            if check_time is not None:
                check_time()
            _merge(keep, gone, image, costs, adj)
            alive.discard(gone)
            steps.append((gone, (keep,), image.astype(np.min_scalar_type(max(len(costs[gone]) - 1, 0)))))
            pending.extend((keep, w) for w in adj[keep])
            break
    return _reduction(problem, costs, adj, alive, steps)


def _function(own: np.ndarray, matrix: np.ndarray, other: np.ndarray) -> np.ndarray | None:
    """The other end's candidate for each of this end's candidates, if each allowed one allows at most one (the rows
    of forbidden candidates, and of candidates that allow none, map to 0); None otherwise."""
    allowed = np.isfinite(matrix) & np.isfinite(other)[None, :]
    rows = np.isfinite(own)
    if (allowed[rows].sum(axis=1) > 1).any():
        return None
    return allowed.argmax(axis=1)


def _merge(keep: int, gone: int, image: np.ndarray, costs: list[np.ndarray], adj: list[dict[int, np.ndarray]]) -> None:
    """Fold ``gone`` into ``keep`` given ``gone = image[keep's candidate]``."""
    rows = np.arange(len(image))
    joint = adj[keep][gone][rows, image] + costs[gone][image]  # inf where the candidate allows none
    costs[keep] = costs[keep] + joint
    for w, m in adj[gone].items():
        del adj[w][gone]
        if w == keep:
            continue
        moved = m[image, :]  # rows index keep
        merged = adj[keep][w] + moved if w in adj[keep] else moved
        adj[keep][w], adj[w][keep] = merged, merged.T
    adj[gone].clear()


def _reduction(
    problem: Problem, costs: list[np.ndarray], adj: list[dict[int, np.ndarray]], alive: set[int], steps: list[Step]
) -> Reduction:
    removed = {**dict.fromkeys(KINDS, 0), "functional": len(steps)}
    if not steps:
        return replace(Reduction.identity(problem), removed=removed)
    n = problem.num_nodes
    core_nodes = tuple(sorted(alive))
    if any(not np.isfinite(costs[v]).any() for v in core_nodes):
        return Reduction(None, (), math.inf, tuple(steps), removed, n)
    nodes = tuple(Node(problem.nodes[v].name, problem.nodes[v].candidates, costs[v]) for v in core_nodes)
    edges = tuple(
        Edge(problem.nodes[u].name, problem.nodes[v].name, np.ascontiguousarray(m))
        for u in core_nodes
        for v, m in sorted(adj[u].items())
        if u < v
    )
    return Reduction(Problem(nodes, edges, problem.meta), core_nodes, 0.0, tuple(steps), removed, n)
