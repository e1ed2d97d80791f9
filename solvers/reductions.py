"""Exact reductions of the node/edge cost problem: fold away every node with at most one allowed candidate or at
most two neighbours, keeping the optimum.

- single candidate (RF): a node with at most one finite candidate takes it; its edge rows go into the neighbours'
  cost vectors (with none finite every assignment is forbidden).
- degree 0 (R0): a node without neighbours takes its cheapest candidate; the cost goes into a constant offset.
- degree 1 (RI): a node with one neighbour ``j`` is folded into ``j``'s cost vector,
  ``c_j[b] += min_a (c_i[a] + M_ij[a, b])``.
- degree 2 (RII): a node with neighbours ``j``, ``k`` is folded into the edge between them (created if missing),
  ``M_jk[b, c] += min_a (c_i[a] + M_ij[a, b] + M_ik[a, c])``.

Each fold is one numpy minimisation over the folded node's candidates and records its argmin table, so any
assignment of the nodes that survive (the core) extends to a full assignment costing exactly the core's cost plus
the offset: ``optimum = core optimum + offset``. Degrees never grow, so chains, trees and series-parallel graphs
vanish entirely and what is left is the irreducible core (every node with three or more neighbours).

``Reducer`` is the working state (shared by ``dp``, which eliminates what remains, and ``pbqp``, which interleaves
its heuristic RN step); ``reduce_problem`` runs it to the end and packages the core as a ``Problem``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from solvers.problem import Edge, Node, Problem, ProblemError

DENSE_ENTRIES = 1 << 21
"""Above this many entries (node candidates x table), ``min_out`` loops over the minimised node's candidates."""

KINDS = ("fixed", "degree-0", "degree-1", "degree-2")
"""The reductions, as counted in ``Reducer.removed``: single (finite) candidate, then degree 0, 1 and 2."""

Step = tuple[int, tuple[int, ...], np.ndarray]
"""Back-substitution record: node, the nodes its choice depends on, and its best candidate per their choices."""


def min_out(
    parts: Sequence[np.ndarray], shape: tuple[int, ...], dense_entries: int = DENSE_ENTRIES
) -> tuple[np.ndarray, np.ndarray]:
    """Minimum and argmin over axis 0 of the broadcast sum of ``parts`` (each ``(k, ...)``), without ever holding
    the full ``(k, *shape)`` sum when it has more than ``dense_entries`` entries: then the sum is built one candidate
    of axis 0 at a time."""
    k = parts[0].shape[0]
    index_type = np.uint8 if k <= 256 else np.uint16 if k <= 65536 else np.intp
    if k * math.prod(shape) <= dense_entries:
        total = parts[0]
        for part in parts[1:]:
            total = total + part
        if total.ndim <= len(shape) or total.shape[1:] != shape:
            total = np.broadcast_to(total, (k, *shape))
        return np.minimum.reduce(total, axis=0), total.argmin(axis=0).astype(index_type)
    best = np.full(shape, math.inf)
    arg = np.zeros(shape, dtype=index_type)
    total = np.empty(shape)
    for a in range(k):
        total.fill(0.0)
        for part in parts:
            total += part[a]
        better = total < best
        np.copyto(best, total, where=better)
        arg[better] = a
    return best, arg


def back_substitute(steps: Sequence[Step], x: list[int]) -> list[int]:
    """Fill ``x`` (candidate index per node, -1 where undecided) by reading ``steps`` in reverse order."""
    for v, scope, arg in reversed(steps):
        x[v] = int(arg[tuple([x[u] for u in scope])])
    return x


def summarize(removed: Mapping[str, int], left: int) -> str:
    """One log line: how many nodes each reduction removed and how many are left."""
    return (
        f"reductions: {removed['fixed']} single-candidate, {removed['degree-0']} degree-0, "
        f"{removed['degree-1']} degree-1, {removed['degree-2']} degree-2 nodes removed; {left} left"
    )


class Reducer:
    """Working copy of a problem: node cost vectors, pairwise matrices, adjacency, and what was folded away.

    ``constant`` collects the cost of the removed nodes (inf once every assignment is proven forbidden) and
    ``steps`` their back-substitution records, in removal order. ``reduce`` applies the exact reductions until none
    is left; ``fix`` removes one node with a given candidate (the reductions' RF, and the heuristic step of callers).
    """

    def __init__(self, problem: Problem) -> None:
        self.sizes = problem.domain_sizes
        self.costs = [node.costs for node in problem.nodes]  # arrays are replaced, never written to
        self.edges = dict(problem.pairs)
        self.adj = [set(nb) for nb in problem.neighbors()]
        self.alive = set(range(problem.num_nodes))
        self.constant = 0.0
        self.steps: list[Step] = []
        self.removed = dict.fromkeys(KINDS, 0)
        self._finite = [np.count_nonzero(np.isfinite(c)) for c in self.costs]
        n = problem.num_nodes
        single = [i for i in range(n) if self._single(i)]
        self._queue = deque(single + [i for i in range(n) if len(self.adj[i]) <= 2 and not self._single(i)])

    def matrix(self, i: int, j: int) -> np.ndarray:
        """The edge matrix between ``i`` and ``j`` with rows indexing ``i``."""
        return self.edges[(i, j)] if i < j else self.edges[(j, i)].T

    def _reducible(self, i: int) -> bool:
        """Whether an exact reduction applies to node ``i``."""
        return len(self.adj[i]) <= 2 or self._single(i)

    def _single(self, i: int) -> bool:
        return self._finite[i] <= 1

    def _add_cost(self, j: int, values: np.ndarray) -> None:
        self.costs[j] = self.costs[j] + values
        self._finite[j] = np.count_nonzero(np.isfinite(self.costs[j]))

    def _drop(self, i: int, scope: tuple[int, ...], arg: np.ndarray) -> None:
        for j in self.adj[i]:
            self.adj[j].discard(i)
            del self.edges[(i, j) if i < j else (j, i)]
        self.adj[i].clear()
        self.alive.discard(i)
        self.steps.append((i, scope, arg))

    def _touch(self, nodes: Sequence[int]) -> None:
        self._queue.extend(j for j in nodes if self._reducible(j))

    def fix(self, i: int, choice: int) -> None:
        """Remove node ``i`` with candidate ``choice``: its cost goes into ``constant``, its edge rows into the
        neighbours' cost vectors."""
        self.constant += float(self.costs[i][choice])
        nbrs = tuple(self.adj[i])
        for j in nbrs:
            self._add_cost(j, self.matrix(i, j)[choice])
        self._drop(i, (), np.array(choice, dtype=np.min_scalar_type(choice)))
        self._touch(nbrs)

    def reduce(self, check_time: Callable[[], None] | None = None) -> dict[str, int]:
        """Apply the exact reductions until none is left (``check_time`` is called before each and may raise);
        returns the number of nodes each has removed so far."""
        while self._queue:  # degrees and finite counts never grow: a queued node stays reducible until removed
            i = self._queue.popleft()
            if i not in self.alive:
                continue
            if check_time is not None:
                check_time()
            nbrs = tuple(sorted(self.adj[i]))
            cost_i = self.costs[i]
            if self._single(i):
                self.fix(i, int(np.argmin(cost_i)))
                self.removed["fixed"] += 1
                continue
            if not nbrs:
                best, arg = min_out([cost_i], ())
                self.constant += float(best)
            elif len(nbrs) == 1:
                (j,) = nbrs
                best, arg = min_out([cost_i[:, None], self.matrix(i, j)], (self.sizes[j],))
                self._add_cost(j, best)
            else:
                j, k = nbrs
                parts = [cost_i[:, None, None], self.matrix(i, j)[:, :, None], self.matrix(i, k)[:, None, :]]
                best, arg = min_out(parts, (self.sizes[j], self.sizes[k]))
                if (j, k) in self.edges:
                    self.edges[(j, k)] = self.edges[(j, k)] + best
                else:
                    self.edges[(j, k)] = best
                    self.adj[j].add(k)
                    self.adj[k].add(j)
            self._drop(i, nbrs, arg)
            self.removed[f"degree-{len(nbrs)}"] += 1
            self._touch(nbrs)
        return self.removed


@dataclass(frozen=True)
class Reduction:
    """The exact reductions of a problem: the core left over, the offset and how to undo them.

    ``core`` is a ``Problem`` over the surviving nodes (same names and candidates, folded costs), None when no node
    survives or when the reductions proved every assignment forbidden (then ``offset`` is inf). ``core_nodes`` are
    the positions of the core's nodes in the original problem. For every core assignment ``y``,
    ``problem.evaluate(expand(y)) == core.evaluate(y) + offset`` (up to rounding), so optima correspond and any
    lower bound on the core plus ``offset`` bounds the original problem.
    """

    core: Problem | None
    core_nodes: tuple[int, ...]
    offset: float
    steps: tuple[Step, ...]
    removed: Mapping[str, int]
    num_nodes: int

    @classmethod
    def identity(cls, problem: Problem) -> Reduction:
        """No reduction at all: the core is ``problem`` itself (to switch the reductions off)."""
        n = problem.num_nodes
        return cls(problem, tuple(range(n)), 0.0, (), dict.fromkeys(KINDS, 0), n)

    @property
    def infeasible(self) -> bool:
        """Whether the reductions proved that every assignment is forbidden."""
        return math.isinf(self.offset)

    @property
    def summary(self) -> str:
        return summarize(self.removed, len(self.core_nodes))

    def expand(self, core_assignment: Sequence[int] = ()) -> tuple[int, ...]:
        """The full assignment (candidate index per original node) extending a core assignment optimally."""
        if len(core_assignment) != len(self.core_nodes):
            raise ProblemError(f"expected {len(self.core_nodes)} core choices, got {len(core_assignment)}")
        x = [-1] * self.num_nodes
        for v, choice in zip(self.core_nodes, core_assignment):
            x[v] = int(choice)
        return tuple(back_substitute(self.steps, x))


def reduce_problem(problem: Problem, check_time: Callable[[], None] | None = None) -> Reduction:
    """Apply the exact reductions to ``problem`` until none is left.

    Examples
    --------
    >>> p = Problem.build([("a", ["x", "y"], [1, 2]), ("b", ["x", "y"], [2, 1])], [("a", "b", [[0, 5], [5, 0]])])
    >>> r = reduce_problem(p)
    >>> r.core, r.offset, r.expand()
    (None, 3.0, (0, 0))
    """
    state = Reducer(problem)
    removed = state.reduce(check_time)
    core_nodes = tuple(sorted(state.alive)) if math.isfinite(state.constant) else ()
    core = None
    if core_nodes:
        position = {v: p for p, v in enumerate(core_nodes)}
        nodes = tuple(Node(problem.nodes[v].name, problem.nodes[v].candidates, state.costs[v]) for v in core_nodes)
        edges = tuple(
            Edge(nodes[position[u]].name, nodes[position[v]].name, m) for (u, v), m in sorted(state.edges.items())
        )
        core = Problem(nodes, edges, problem.meta)
    return Reduction(core, core_nodes, state.constant, tuple(state.steps), dict(removed), problem.num_nodes)
