"""Exact solver: the exact reductions of ``solvers/reductions.py``, then variable (bucket) elimination along a greedy
min-fill order.

The reductions remove every node that has at most two neighbours (and every node with a single allowed candidate) by
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
from collections.abc import Callable, Sequence

import numpy as np

from solvers.base import Solution, Solver, register
from solvers.errors import SolverError
from solvers.problem import Problem
from solvers.reductions import DENSE_ENTRIES, Reducer, back_substitute, min_out, summarize

_DENSE_ENTRIES = DENSE_ENTRIES
"""Above this many entries (node candidates x table), an elimination loops over the eliminated node's candidates."""



def check_table_cap(solver: str, cap: object) -> None:
    """Refuse a ``max_table_entries`` that is not a finite number >= 1 (``SolverError`` naming ``solver``)."""
    if not (isinstance(cap, numbers.Real) and not isinstance(cap, bool) and math.isfinite(cap) and cap >= 1):
        raise SolverError(f"{solver}: max_table_entries must be a finite number >= 1, got {cap!r}")

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
        check_table_cap(self.name, self.max_table_entries)

    def _solve(self, problem: Problem, start: float) -> Solution:
        def check_time() -> None:
            self._check_time(start)

        state = _Reduced(problem)
        removed = state.reduce(check_time)
        core = sorted(state.alive)
        summary = summarize(removed, len(core))
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
        x = back_substitute(state.steps, [-1] * problem.num_nodes)
        cost = problem.evaluate(x)
        return Solution(self.name, problem.to_names(x), cost, "optimal", lower_bound=cost, log=log)


class _Reduced(Reducer):
    """The reductions' working state, extended by bucket elimination of the nodes the reductions leave."""

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
            best, arg = min_out(parts, shape, _DENSE_ENTRIES)
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
        f"greedy min-fill order), above max_table_entries={cap:g}; use --solver auto or --solver pbqp instead"
    )


def _count(n: int) -> str:
    """A possibly astronomically large integer in short scientific notation."""
    if n < 10**15:
        return f"{float(n):.3g}"
    exponent = math.floor(math.log10(n))
    return f"{10 ** (math.log10(n) - exponent):.2f}e+{exponent}"
