"""Exact solver: degree-0/1/2 reductions, then variable (bucket) elimination along a greedy min-fill order.

The reductions remove every node that has at most two neighbours (and every node with a single candidate) by
folding its cost into its neighbours, which is exact and keeps tables pairwise; chains, trees and series-parallel
graphs (ResNet-style residual blocks, SSD heads) vanish entirely. What remains is eliminated node by node: each
elimination minimises over one node and leaves a table over its remaining neighbours. Table sizes grow
exponentially with the induced width of the order, so the whole order is simulated before any table is built, and a
table larger than ``max_table_entries`` stops the solve with a ``SolverError`` instead of exhausting memory (this is
what happens on DenseNet-like graphs, where every layer of a block touches every earlier one).

The elimination order is computed here with a greedy min-fill heuristic on plain adjacency sets (fewest fill-in
edges first, then the smallest table, then the lowest node index), the same rule as networkx's
``treewidth_min_fill_in``, which returns a tree decomposition rather than the order itself.
"""

from __future__ import annotations

import heapq
import math
import numbers
from collections import deque
from collections.abc import Callable, Sequence

import numpy as np

from solvers.base import Solution, Solver, SolverError, register
from solvers.problem import Problem

_DENSE_ENTRIES = 1 << 21
"""Above this many entries (node candidates x table), a minimisation loops over the eliminated node's candidates."""

Step = tuple[int, tuple[int, ...], np.ndarray]
"""Back-substitution record: node, the nodes its choice depends on, and its best candidate per their choices."""


@register
class DPSolver(Solver):
    """Exact dynamic programming: graph reductions, then bucket elimination with a cap on table size.

    Parameters
    ----------
    time_limit
        Seconds before giving up with ``SolverError`` (None = unlimited).
    max_table_entries
        Largest table (product of the domain sizes of an eliminated node's remaining neighbours) the solver may
        build; a wider problem raises ``SolverError`` naming the induced width.

    Examples
    --------
    >>> from solvers.problem import Problem
    >>> p = Problem.build([("a", ["x", "y"], [1, 2]), ("b", ["x", "y"], [2, 1])], [("a", "b", [[0, 5], [5, 0]])])
    >>> sol = DPSolver().solve(p)
    >>> sol.cost, sol.status, dict(sol.assignment)
    (3.0, 'optimal', {'a': 'x', 'b': 'x'})
    """

    name = "dp"

    def __init__(self, *, time_limit: float | None = None, max_table_entries: float = 1e7) -> None:
        super().__init__(time_limit=time_limit)
        self.max_table_entries = max_table_entries

    def _check_params(self) -> None:
        super()._check_params()
        cap = self.max_table_entries
        if not (isinstance(cap, numbers.Real) and not isinstance(cap, bool) and math.isfinite(cap) and cap >= 1):
            raise SolverError(f"{self.name}: max_table_entries must be a finite number >= 1, got {cap!r}")

    def _solve(self, problem: Problem, start: float) -> Solution:
        def check_time() -> None:
            self._check_time(start)

        state = _Reduced(problem)
        removed = state.reduce(check_time)
        core = sorted(state.alive)
        summary = (
            f"reductions: {removed['fixed']} single-candidate, {removed['degree-0']} degree-0, "
            f"{removed['degree-1']} degree-1, {removed['degree-2']} degree-2 nodes removed; {len(core)} left"
        )
        if math.isinf(state.constant):
            log = (summary, "elimination: skipped, the reductions proved every assignment forbidden")
        elif not core:
            log = (summary, "elimination: nothing left after the reductions")
        else:
            order, width, largest = _min_fill_order(
                {v: state.adj[v] for v in core}, problem, self.max_table_entries, check_time
            )
            state.eliminate(order, check_time)
            log = (
                summary,
                f"elimination: {len(core)} nodes along a greedy min-fill order, induced width {width}, "
                f"largest table {largest:,} entries",
            )
        if math.isinf(state.constant):
            return Solution(self.name, {}, math.inf, "infeasible", lower_bound=math.inf, log=log)
        x = _back_substitute(state.steps, problem.num_nodes)
        cost = problem.evaluate(x)
        return Solution(self.name, problem.to_names(x), cost, "optimal", lower_bound=cost, log=log)


class _Reduced:
    """Working copy of a problem: node cost vectors, pairwise matrices, adjacency, and what was folded away."""

    def __init__(self, problem: Problem) -> None:
        self.sizes = problem.domain_sizes
        self.costs = [np.array(node.costs, dtype=float) for node in problem.nodes]
        self.edges = {key: np.array(m, dtype=float) for key, m in problem.pairs.items()}
        self.adj = [set(nb) for nb in problem.neighbors()]
        self.alive = set(range(problem.num_nodes))
        self.constant = 0.0
        self.steps: list[Step] = []

    def matrix(self, i: int, j: int) -> np.ndarray:
        """The edge matrix between ``i`` and ``j`` with rows indexing ``i``."""
        return self.edges[(i, j)] if i < j else self.edges[(j, i)].T

    def _drop(self, i: int) -> None:
        for j in self.adj[i]:
            self.adj[j].discard(i)
            del self.edges[(i, j) if i < j else (j, i)]
        self.adj[i].clear()
        self.alive.discard(i)

    def reduce(self, check_time: Callable[[], None]) -> dict[str, int]:
        """Fold away single-candidate nodes, then nodes of degree 0, 1 and 2 until none is left; count each kind."""
        removed = dict.fromkeys(("fixed", "degree-0", "degree-1", "degree-2"), 0)
        for i in range(len(self.sizes)):
            if self.sizes[i] == 1:
                self.constant += float(self.costs[i][0])
                for j in self.adj[i]:
                    self.costs[j] += self.matrix(i, j)[0]
                self._drop(i)
                self.steps.append((i, (), np.zeros((), dtype=np.uint8)))
                removed["fixed"] += 1
        queue = deque(i for i in sorted(self.alive) if len(self.adj[i]) <= 2)
        while queue:  # degrees never grow during these reductions, so a queued node stays reducible
            i = queue.popleft()
            if i not in self.alive:
                continue
            check_time()
            nbrs = tuple(sorted(self.adj[i]))
            cost_i = self.costs[i]
            if not nbrs:
                best, arg = _min_out([cost_i], ())
                self.constant += float(best)
            elif len(nbrs) == 1:
                (j,) = nbrs
                best, arg = _min_out([cost_i[:, None], self.matrix(i, j)], (self.sizes[j],))
                self.costs[j] += best
            else:
                j, k = nbrs
                parts = [cost_i[:, None, None], self.matrix(i, j)[:, :, None], self.matrix(i, k)[:, None, :]]
                best, arg = _min_out(parts, (self.sizes[j], self.sizes[k]))
                if (j, k) in self.edges:
                    self.edges[(j, k)] += best
                else:
                    self.edges[(j, k)] = best
                    self.adj[j].add(k)
                    self.adj[k].add(j)
            self._drop(i)
            self.steps.append((i, nbrs, arg))
            removed[f"degree-{len(nbrs)}"] += 1
            queue.extend(j for j in nbrs if len(self.adj[j]) <= 2)
        return removed

    def eliminate(self, order: Sequence[int], check_time: Callable[[], None]) -> None:
        """Bucket elimination of the remaining nodes in ``order`` (tables over sorted node indices)."""
        factors: dict[int, tuple[tuple[int, ...], np.ndarray]] = {}
        of_node: dict[int, set[int]] = {v: set() for v in order}
        for fid, ((u, v), m) in enumerate(sorted(self.edges.items())):
            factors[fid] = ((u, v), m)
            of_node[u].add(fid)
            of_node[v].add(fid)
        next_id = len(factors)
        for v in order:
            check_time()
            fids = sorted(of_node.pop(v))
            scope = tuple(sorted({u for f in fids for u in factors[f][0]} - {v}))
            shape = tuple(self.sizes[u] for u in scope)
            k = self.sizes[v]
            parts = [self.costs[v].reshape((k,) + (1,) * len(scope))]
            for f in fids:
                fscope, table = factors.pop(f)
                for u in fscope:
                    if u != v:
                        of_node[u].discard(f)
                table = np.moveaxis(table, fscope.index(v), 0)
                parts.append(table.reshape((k,) + tuple(self.sizes[u] if u in fscope else 1 for u in scope)))
            best, arg = _min_out(parts, shape)
            self.steps.append((v, scope, arg))
            if not scope:
                self.constant += float(best)
            elif len(scope) == 1:
                self.costs[scope[0]] = self.costs[scope[0]] + best
            else:
                factors[next_id] = (scope, best)
                for u in scope:
                    of_node[u].add(next_id)
                next_id += 1
        self.alive.clear()


def _min_out(parts: Sequence[np.ndarray], shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Minimum and argmin over axis 0 of the broadcast sum of ``parts`` (each ``(k, ...)``), without ever holding
    the full ``(k, *shape)`` sum when it is large: then the sum is built one candidate of axis 0 at a time."""
    k = parts[0].shape[0]
    index_type = np.min_scalar_type(max(k - 1, 0))
    if k * math.prod(shape) <= _DENSE_ENTRIES:
        total = np.zeros((k, *shape))
        for part in parts:
            total += part
        return total.min(axis=0), total.argmin(axis=0).astype(index_type)
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


def _min_fill_order(
    adj: dict[int, set[int]], problem: Problem, cap: float, check_time: Callable[[], None]
) -> tuple[list[int], int, int]:
    """A greedy min-fill elimination order of ``adj``, its induced width and its largest table (entries).

    Ties go to the smaller table, then the lower index. If the chosen node's table exceeds ``cap``, the node with
    the smallest table is taken instead when that one fits; if none fits, ``SolverError`` is raised before any
    table has been built.
    """
    adj = {v: set(nb) for v, nb in adj.items()}
    sizes = problem.domain_sizes

    def key(v: int) -> tuple[int, int]:
        nb = adj[v]
        fill = (sum(len(nb - adj[a]) for a in nb) - len(nb)) // 2
        return fill, math.prod(sizes[a] for a in nb)

    current = {v: key(v) for v in adj}
    heap = [(*current[v], v) for v in adj]
    heapq.heapify(heap)
    order: list[int] = []
    width = largest = 0
    while heap:
        fill, table, v = heapq.heappop(heap)
        if current.get(v) != (fill, table):
            continue  # stale entry
        check_time()
        if table > cap:
            u = min(current, key=lambda w: (current[w][1], current[w][0], w))
            if current[u][1] > cap:
                raise SolverError(_too_wide(problem, v, len(adj[v]), max(width, len(adj[v])), table, cap))
            heapq.heappush(heap, (fill, table, v))
            v, (fill, table) = u, current[u]
        order.append(v)
        width, largest = max(width, len(adj[v])), max(largest, table)
        nb = adj.pop(v)
        del current[v]
        for a in nb:
            adj[a].discard(v)
            adj[a] |= nb - {a}
        for a in set(nb).union(*(adj[b] for b in nb)):
            current[a] = key(a)
            heapq.heappush(heap, (*current[a], a))
    return order, width, largest


def _too_wide(problem: Problem, v: int, degree: int, width: int, table: int, cap: float) -> str:
    return (
        f"dp: problem too wide for exact elimination: eliminating node {problem.nodes[v].name!r} needs a table over "
        f"its {degree} remaining neighbours with {_count(table)} entries (induced width at least {width} along a "
        f"greedy min-fill order), above max_table_entries={cap:g}; use --solver pbqp or --solver ilp instead"
    )


def _count(n: int) -> str:
    """A possibly astronomically large integer in short scientific notation."""
    if n < 10**15:
        return f"{float(n):.3g}"
    exponent = math.floor(math.log10(n))
    return f"{10 ** (math.log10(n) - exponent):.2f}e+{exponent}"


def _back_substitute(steps: Sequence[Step], num_nodes: int) -> list[int]:
    """Candidate index per node, reading each recorded argmin table in reverse elimination order."""
    x = [-1] * num_nodes
    for v, scope, arg in reversed(steps):
        x[v] = int(arg[tuple(x[u] for u in scope)])
    return x
