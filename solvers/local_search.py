"""Helpers shared by the heuristic solvers: oriented adjacency and local searches (ICM, star moves)."""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Mapping, Sequence
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
class LocalSearchResult:
    """Outcome of a local search: the improved assignment, sweeps made, moves taken, whether it converged."""

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
) -> LocalSearchResult:
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
    LocalSearchResult(assignment=(1, 1), rounds=2, moves=1, converged=True)
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
    return LocalSearchResult(tuple(int(i) for i in x), rounds, moves, converged)


def star_moves(
    problem: Problem,
    assignment: Sequence[int],
    *,
    max_rounds: int = 100,
    deadline: float = math.inf,
) -> LocalSearchResult:
    """Improve an assignment by re-optimising each node jointly with its neighbours until no such move helps.

    A move centred on ``u`` takes as leaves the neighbours of ``u`` not adjacent to an earlier leaf (in index order),
    so ``u`` and its leaves form a star; with every other node held fixed the star is solved exactly: each candidate
    ``a`` of ``u`` costs its own conditional cost plus, per leaf, the leaf's best response to ``a``. The move is taken
    only when strictly better than the current choices, so the cost never increases. From a finite-cost assignment a
    star move is never worse than the single-node ICM move at its centre (nor than a joint move of the centre and any
    one leaf), so a finite star optimum is also an ICM optimum. Each round centres one move on every node in order;
    the cost of each candidate of a node given its neighbours is kept up to date as nodes move.

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
    >>> p = Problem.build(
    ...     [("a", ["x", "y"], [0, 1]), ("b", ["x", "y"], [0, 1]), ("c", ["x", "y"], [3, 0])],
    ...     [("a", "c", [[0, 9], [9, 0]]), ("b", "c", [[0, 9], [9, 0]])],
    ... )
    >>> iterated_conditional_modes(p, (0, 0, 0)).assignment, star_moves(p, (0, 0, 0)).assignment
    ((0, 0, 0), (1, 1, 1))
    """
    x = np.array(problem.to_indices(assignment), dtype=np.intp)
    costs = [node.costs for node in problem.nodes]
    adj = oriented_adjacency(problem)
    stars = [_star(u, adj) for u in range(problem.num_nodes)]
    rounds = moves = 0
    converged = False
    while rounds < max_rounds and time.perf_counter() < deadline:
        rounds += 1
        changed = 0
        # field[v][b]: cost of v taking b given every neighbour's choice (rebuilt each round: rounding cannot drift)
        field = [_field(v, costs, adj, x) for v in range(len(adj))]
        for u, groups in enumerate(stars):
            if all(finite for _, _, finite in groups):  # take the star's own edges out of u's field
                total = field[u] - sum((m[np.arange(len(v)), :, x[v]].sum(axis=0) for v, m, _ in groups), 0.0)
            else:  # inf - inf is undefined: sum afresh
                total = _field(u, costs, adj, x, without={int(v) for leaves, _, _ in groups for v in leaves})
            current = total[x[u]]
            responses = []
            for leaves, stacked, finite in groups:  # stacked[i] = adj[u][leaves[i]]
                if finite:
                    leaf = np.stack([field[v] for v in leaves]) - stacked[:, x[u], :]
                else:
                    leaf = np.stack([_field(v, costs, adj, x, without=(u,)) for v in leaves])
                table = stacked + leaf[:, None, :]  # (leaf, candidate of u, candidate of leaf): the leaf's cost
                current += table[np.arange(len(leaves)), x[u], x[leaves]].sum()
                total += table.min(axis=2).sum(axis=0)
                responses.append((leaves, table.argmin(axis=2)))
            a = int(np.argmin(total))
            if not (total[a] < current and not _same(total[a], current)):
                continue
            changed += 1
            targets = [(u, a)] + [(int(v), int(c)) for leaves, best in responses for v, c in zip(leaves, best[:, a])]
            for v, choice in targets:
                if choice != x[v]:
                    old, x[v] = x[v], choice
                    for w, m in adj[v].items():  # column x[v] of adj[w][v] is row x[v] of adj[v][w]
                        finite = np.isfinite(m[old]).all()
                        field[w] = field[w] + (m[choice] - m[old]) if finite else _field(w, costs, adj, x)
        moves += changed
        if not changed:
            converged = True
            break
    return LocalSearchResult(tuple(int(i) for i in x), rounds, moves, converged)


def _field(
    v: int, costs: list[np.ndarray], adj: list[dict[int, np.ndarray]], x: np.ndarray, without: Collection[int] = ()
) -> np.ndarray:
    """Cost of each candidate of ``v`` given the choices in ``x`` of its neighbours not in ``without``."""
    return costs[v] + sum((m[:, x[w]] for w, m in adj[v].items() if w not in without), np.zeros(len(costs[v])))


def _star(u: int, adj: list[dict[int, np.ndarray]]) -> list[tuple[np.ndarray, np.ndarray, bool]]:
    """The leaves of the star centred on ``u``, grouped by candidate count: indices, stacked matrices from ``u``
    (rows index ``u``) and whether they are all finite."""
    groups: dict[int, list[int]] = {}
    for v in independent_neighbours(u, adj):
        groups.setdefault(adj[u][v].shape[1], []).append(v)
    stars = []
    for leaves in groups.values():
        stacked = np.stack([adj[u][v] for v in leaves])
        stars.append((np.array(leaves, dtype=np.intp), stacked, bool(np.isfinite(stacked).all())))
    return stars


def independent_neighbours(u: int, adj: Sequence[Mapping[int, np.ndarray]]) -> tuple[int, ...]:
    """Neighbours of ``u`` (in index order) that are not adjacent to one taken before: the leaves of its star."""
    taken: list[int] = []
    for v in sorted(adj[u]):
        if not any(w in adj[v] for w in taken):
            taken.append(v)
    return tuple(taken)


def _same(a: float, b: float) -> bool:
    """Equal up to rounding (never true for a finite value against inf)."""
    return math.isfinite(b) and abs(a - b) <= 1e-12 * max(1.0, abs(b))


def pair_moves(
    problem: Problem,
    assignment: Sequence[int],
    *,
    max_rounds: int = 100,
    deadline: float = math.inf,
) -> LocalSearchResult:
    """Improve an assignment by re-optimising the two ends of each edge jointly until no such move helps.

    With every other node held fixed, the best pair for edge ``(u, v)`` is the argmin of ``u``'s conditional costs
    plus ``v``'s plus the edge's matrix. Where a hard constraint ties two nodes (a pair of frequencies at a fixed
    distance, say), neither can move alone nor, if they share neighbours, in one star; here they move together. Each
    round visits every edge in order; a move is taken only when strictly better. Forbidden entries count as a finite
    cost above every finite assignment's total, so an infinite start moves towards fewer violations.

    Examples
    --------
    ``a`` and ``b`` must agree; both would rather take ``y`` for ``d``'s sake. No star holds both (each star around
    one of them takes ``d`` first, to which the other is adjacent):

    >>> p = Problem.build([("d", ["x"], [0]), ("a", ["x", "y"], [0, 1]), ("b", ["x", "y"], [0, 1])],
    ...                   [("d", "a", [[3, 0]]), ("d", "b", [[3, 0]]), ("a", "b", [[0, None], [None, 0]])])
    >>> star_moves(p, (0, 0, 0)).assignment, pair_moves(p, (0, 0, 0)).assignment
    ((0, 0, 0), (0, 1, 1))
    """
    _, costs, adj = penalised(problem)
    x = np.array(problem.to_indices(assignment), dtype=np.intp)
    field = [_field(v, costs, adj, x) for v in range(problem.num_nodes)]
    rounds = moves = 0
    converged = False
    while rounds < max_rounds and time.perf_counter() < deadline:
        rounds += 1
        changed = 0
        for u, v in problem.pairs:
            matrix = adj[u][v]
            table = (field[u] - matrix[:, x[v]])[:, None] + (field[v] - matrix[x[u], :])[None, :] + matrix
            a, b = np.unravel_index(int(np.argmin(table)), table.shape)
            current = table[x[u], x[v]]
            if not (table[a, b] < current and not _same(table[a, b], current)):
                continue
            changed += 1
            for w, choice in ((u, int(a)), (v, int(b))):
                if choice != x[w]:
                    old, x[w] = x[w], choice
                    for z, m in adj[w].items():
                        field[z] = field[z] + (m[choice] - m[old])
            field[u], field[v] = _field(u, costs, adj, x), _field(v, costs, adj, x)  # no drift at the movers
        moves += changed
        if not changed:
            converged = True
            break
    return LocalSearchResult(tuple(int(i) for i in x), rounds, moves, converged)


def star_pair_moves(
    problem: Problem,
    assignment: Sequence[int],
    *,
    max_rounds: int = 100,
    deadline: float = math.inf,
) -> LocalSearchResult:
    """Star moves to convergence, then pair moves, in turn until neither lowers the cost (at most ``max_rounds``
    turns; each search at most ``max_rounds`` sweeps). Pair moves escape what hard constraints lock in a star, as on
    the radio-link frequency assignment instances (docs/solvers.md)."""
    x = tuple(problem.to_indices(assignment))
    cost = problem.evaluate(x)
    rounds = moves = 0
    converged = False
    while rounds < max_rounds and time.perf_counter() < deadline:
        rounds += 1
        star = star_moves(problem, x, max_rounds=max_rounds, deadline=deadline)
        pair = pair_moves(problem, star.assignment, max_rounds=max_rounds, deadline=deadline)
        moves += star.moves + pair.moves
        improved = problem.evaluate(pair.assignment)
        if improved <= cost:
            x = pair.assignment
        if not improved < cost or pair.moves == 0:
            converged = star.converged and pair.converged
            break
        cost = improved
    return LocalSearchResult(x, rounds, moves, converged)


def penalised(problem: Problem) -> tuple[float, list[np.ndarray], list[dict[int, np.ndarray]]]:
    """The problem's tables with every forbidden entry replaced by ``hard``, a finite cost above every finite
    assignment's total: ``hard``, the node cost vectors and the oriented adjacency (``oriented_adjacency``, each
    direction its own C-contiguous array, rows indexing the node)."""
    tables = [node.costs for node in problem.nodes] + list(problem.pairs.values())
    hard = 1.0 + math.fsum(float(a[np.isfinite(a)].max()) for a in tables if np.isfinite(a).any())
    costs = [np.where(np.isfinite(node.costs), node.costs, hard) for node in problem.nodes]
    adj: list[dict[int, np.ndarray]] = [{} for _ in problem.nodes]
    for (u, v), m in problem.pairs.items():
        finite = np.where(np.isfinite(m), m, hard)
        adj[u][v], adj[v][u] = finite, np.ascontiguousarray(finite.T)
    return hard, costs, adj
