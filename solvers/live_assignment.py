"""An assignment that keeps every node's conditional costs up to date, for searches that move a few nodes at a time.

``LiveAssignment`` holds candidate indices and, per node, what each of its candidates would cost given the
neighbours' current choices (the node's own cost plus its edges), so that a move changes only the moved node's
neighbours' rows and its cost change is read off one row. Forbidden entries count as a finite penalty above every
finite assignment's total (``local_search.penalised``), so an assignment that picks them still has a cost that fewer
violations lower. On top of that: the best star move around a node and the best pair move along one of its edges
(the moves of ``local_search``, evaluated for one node at a time), a descent that re-examines only the nodes next to
what moved, a journal to undo moves, and the problem induced on a set of nodes with everything else held fixed.
"""

from __future__ import annotations

import functools
import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from solvers.local_search import independent_neighbours, penalised
from solvers.problem import Edge, Node, Problem

CHECK_EVERY = 64
"""A descent looks at the clock once per this many nodes examined."""


@dataclass(frozen=True)
class _Group:
    """Neighbours of one node with the same number of candidates: their positions and the stacked edge matrices
    (rows index the node), with ``rows = arange(len(nodes))`` for fancy indexing."""

    size: int
    nodes: np.ndarray
    matrices: np.ndarray
    rows: np.ndarray


class LiveAssignment:
    """Candidate index per node with each node's conditional costs (``field``) and the penalised total (``cost``).

    Parameters
    ----------
    problem
        The problem.
    assignment
        Candidate index per node, the starting point.

    Examples
    --------
    >>> p = Problem.build([("a", ["x", "y"], [0, 1]), ("b", ["x", "y"], [1, 0])], [("a", "b", [[0, 9], [9, 0]])])
    >>> live = LiveAssignment(p, (0, 1))
    >>> live.cost, live.descend([0, 1]), live.assignment, live.cost
    (9.0, 1, (0, 0), 1.0)
    """

    def __init__(self, problem: Problem, assignment: Sequence[int]) -> None:
        self.problem = problem
        self.hard, self._costs, self._adj = penalised(problem)
        self.sizes = np.array(problem.domain_sizes, dtype=np.intp)
        self.neighbours = [np.array(sorted(nbrs), dtype=np.intp) for nbrs in self._adj]
        self.x = np.array(problem.to_indices(assignment), dtype=np.intp)
        self.field = np.full((problem.num_nodes, int(self.sizes.max())), math.inf)
        self.journal: list[tuple[int, int]] = []
        self._pairs: list[list[_Group] | None] = [None] * problem.num_nodes
        self._stars: list[list[_Group] | None] = [None] * problem.num_nodes
        self._recompute()

    @property
    def assignment(self) -> tuple[int, ...]:
        return tuple(int(i) for i in self.x)

    def _recompute(self) -> None:
        """The conditional costs and the total from scratch."""
        for u, nbrs in enumerate(self._adj):
            row = self._costs[u].copy()
            for v, m in nbrs.items():
                row += m[:, self.x[v]]
            self.field[u, : self.sizes[u]] = row
        unary = math.fsum(float(c[i]) for c, i in zip(self._costs, self.x))
        self.cost = unary + math.fsum(
            float(m[self.x[u], self.x[v]]) for u, nbrs in enumerate(self._adj) for v, m in nbrs.items() if u < v
        )

    def tolerance(self) -> float:
        """Cost differences below this are rounding, not improvement."""
        return 1e-9 * max(1.0, abs(self.cost))

    # ------------------------------------------------------------------ moves
    def set(self, v: int, choice: int) -> None:
        """Give node ``v`` candidate ``choice`` (journaled)."""
        old = int(self.x[v])
        if choice != old:
            self._move(v, old, choice)
            self.journal.append((v, old))

    def undo(self, mark: int = 0) -> None:
        """Undo the journaled moves after the first ``mark``."""
        while len(self.journal) > mark:
            v, old = self.journal.pop()
            self._move(v, int(self.x[v]), old)

    def _move(self, v: int, old: int, choice: int) -> None:
        self.cost += float(self.field[v, choice] - self.field[v, old])
        self.x[v] = choice
        for g in self._neighbour_groups(v):  # row ``choice`` of adj[v][w] is column ``choice`` of adj[w][v]
            self.field[g.nodes, : g.size] += g.matrices[:, choice, :] - g.matrices[:, old, :]

    def best_pair_move(self, u: int) -> list[int]:
        """Move ``u`` and one neighbour jointly to the best pair for that edge if it lowers the cost; the moved
        nodes (empty when no pair move helps)."""
        xu = self.x[u]
        fu = self.field[u, : self.sizes[u]]
        gain, move = self.tolerance(), None
        for g in self._neighbour_groups(u):
            xv = self.x[g.nodes]
            fv = self.field[g.nodes, : g.size]
            alone_u = fu[None, :] - g.matrices[g.rows, :, xv]  # u's cost without this edge, per neighbour
            alone_v = fv - g.matrices[g.rows, xu, :]
            table = (alone_u[:, :, None] + alone_v[:, None, :] + g.matrices).reshape(len(g.nodes), -1)
            best = table.argmin(axis=1)
            gains = fu[xu] + fv[g.rows, xv] - g.matrices[g.rows, xu, xv] - table[g.rows, best]
            i = int(np.argmax(gains))
            if gains[i] > gain:
                gain = gains[i]
                a, b = divmod(int(best[i]), g.size)
                move = [(u, a), (int(g.nodes[i]), b)]
        if move is None:
            return []
        for v, choice in move:
            self.set(v, choice)
        return [v for v, _ in move]

    def best_star_move(self, u: int) -> list[int]:
        """Move ``u`` and its star's leaves (``local_search.star_moves``) to their best joint choice if it lowers the
        cost; the moved nodes (empty when no star move helps)."""
        xu = self.x[u]
        total = self.field[u, : self.sizes[u]].copy()
        current = total[xu]  # plus, below, each leaf's cost without its edge to u
        responses = []
        for g in self._groups(u, self._stars, lambda: independent_neighbours(u, self._adj)):
            xv = self.x[g.nodes]
            total -= g.matrices[g.rows, :, xv].sum(axis=0)
            rest = self.field[g.nodes, : g.size] - g.matrices[g.rows, xu, :]  # each leaf's cost without the edge
            current += rest[g.rows, xv].sum()
            table = g.matrices + rest[:, None, :]
            total += table.min(axis=2).sum(axis=0)
            responses.append((g.nodes, table.argmin(axis=2)))
        a = int(np.argmin(total))
        if not total[a] < current - self.tolerance():
            return []
        moved = [u]
        self.set(u, a)
        for leaves, best in responses:
            for v, choice in zip(leaves, best[:, a]):
                if choice != self.x[v]:
                    self.set(int(v), int(choice))
                    moved.append(int(v))
        return moved

    def best_single_move(self, u: int) -> list[int]:
        """Move ``u`` alone to its best candidate if that lowers the cost; ``[u]`` if it moved, else empty."""
        row = self.field[u, : self.sizes[u]]
        a = int(np.argmin(row))
        if not row[a] < row[self.x[u]] - self.tolerance():
            return []
        self.set(u, a)
        return [u]

    def descend(self, nodes: Iterable[int], deadline: float = math.inf) -> int:
        """Moves from ``nodes`` until none helps (or ``deadline`` passes); the number of moves taken.

        Each node of ``nodes``, and each node that moves, is examined for a pair move, then a star move; a neighbour
        of a node that moved, for a single-node move only (the moved node's own pair and star moves already cover
        it jointly, and examining every neighbour of a hub in full would cost a round as much as a sweep). Pair moves
        come first because the greedier star move, taken first, ends in worse local optima on the radio-link
        instances (CELAR6-SUB0, optimum 159: 159 with each of 16 seeds pair-first, 165 with 7 of them star-first).
        """
        full = dict.fromkeys((int(u) for u in nodes), True)  # each queued node: whether to examine it in full
        queue = deque(full)
        moves = examined = 0
        while queue:
            examined += 1
            if examined % CHECK_EVERY == 0 and time.perf_counter() > deadline:
                break
            u = queue.popleft()
            moved = (self.best_pair_move(u) or self.best_star_move(u)) if full.pop(u) else self.best_single_move(u)
            moves += bool(moved)
            for v in moved:
                if v not in full:
                    queue.append(v)
                full[v] = True
                for w in self.neighbours[v].tolist():
                    if w not in full:
                        queue.append(w)
                        full[w] = False
        return moves

    # ------------------------------------------------------------------ neighbourhoods
    def induced(self, region: Sequence[int]) -> Problem:
        """The problem on the nodes of ``region`` (in that order) with every other node held at its current choice:
        each node's costs are its conditional costs less its edges inside the region (penalised, never forbidden)."""
        inside = set(region)
        nodes, edges = [], []
        for v in region:
            row = self.field[v, : self.sizes[v]].copy()
            for w, m in self._adj[v].items():
                if w in inside:
                    row -= m[:, self.x[w]]
                    if v < w:
                        edges.append(Edge(str(v), str(w), m))
            nodes.append(Node(str(v), self._labels(len(row)), np.maximum(row, 0.0)))  # rounding can leave -1e-14
        return Problem(tuple(nodes), tuple(edges))

    @staticmethod
    @functools.cache
    def _labels(size: int) -> tuple[str, ...]:
        return tuple(map(str, range(size)))

    def _neighbour_groups(self, u: int) -> list[_Group]:
        return self._groups(u, self._pairs, lambda: self.neighbours[u])

    def _groups(
        self, u: int, cache: list[list[_Group] | None], nodes: Callable[[], Iterable[int]]
    ) -> list[_Group]:
        """``nodes()`` (neighbours of ``u``) grouped by candidate count, built once per node and kind of move."""
        groups = cache[u]
        if groups is None:
            by_size: dict[int, list[int]] = {}
            for v in nodes():
                by_size.setdefault(int(self.sizes[v]), []).append(int(v))
            groups = cache[u] = [
                _Group(size, np.array(vs, dtype=np.intp), np.stack([self._adj[u][v] for v in vs]),
                       np.arange(len(vs)))
                for size, vs in by_size.items()
            ]
        return groups
