"""PBQP solver: Scholz-Eckstein graph reductions, a highest-degree RN heuristic, then optional ICM.

The exact reductions remove a node while keeping the optimum: R0 (no neighbours: take its cheapest candidate), RI
(one neighbour: fold the node into the neighbour's cost vector), RII (two neighbours: fold it into an edge between
them) and RF (at most one finite candidate left: fix it, since every finite assignment must use it). When none
applies, RN fixes the node of highest degree to its locally best candidate, which may lose optimality. Solving the
last remaining node and back-propagating in reverse reduction order gives the assignment. Graphs of treewidth at most
2 (trees, series-parallel graphs) never need RN and are solved exactly.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from solvers.base import Solution, Solver, SolverError, register
from solvers.local_search import iterated_conditional_modes, oriented_adjacency
from solvers.problem import Problem

# Back-propagation records, in reduction order.
#   ("fix", x, choice)            R0, RF, RN: x's candidate was decided when it was removed
#   ("RI", x, y, table)           x takes table[choice of y]
#   ("RII", x, y, z, table)       x takes table[choice of y, choice of z]


@dataclass
class ReductionStats:
    """How many times each reduction fired."""

    r0: int = 0
    ri: int = 0
    rii: int = 0
    rf: int = 0
    rn: int = 0
    records: list[tuple] = field(default_factory=list)


def reduce_and_solve(
    problem: Problem, check_time: Callable[[], None] | None = None
) -> tuple[tuple[int, ...], ReductionStats]:
    """Run the PBQP reductions on ``problem`` and back-propagate; returns candidate indices and statistics.

    ``check_time`` is called before each reduction (it raises to abort). The result is optimal when ``stats.rn == 0``.

    Examples
    --------
    >>> p = Problem.build([("a", ["x", "y"], [1, 2]), ("b", ["x", "y"], [2, 1])], [("a", "b", [[0, 5], [5, 0]])])
    >>> choice, stats = reduce_and_solve(p)
    >>> choice, (stats.r0, stats.ri, stats.rn)
    ((0, 0), (1, 1, 0))
    """
    n = problem.num_nodes
    costs = [node.costs.copy() for node in problem.nodes]
    adj = oriented_adjacency(problem)  # adj[u][v]: rows index u; adj[v][u] is its transpose view
    alive = [True] * n
    stats = ReductionStats()
    records = stats.records

    queue: deque[int] = deque(range(n))  # nodes that may have become exactly reducible
    queued = [True] * n
    heap = [(-len(adj[u]), u) for u in range(n)]  # degrees never increase, so stale entries are skipped on pop
    heapq.heapify(heap)

    def touch(u: int) -> None:
        if alive[u] and not queued[u] and (len(adj[u]) <= 2 or _finite_count(costs[u]) <= 1):
            queue.append(u)
            queued[u] = True
        heapq.heappush(heap, (-len(adj[u]), u))

    def remove(x: int) -> list[int]:
        alive[x] = False
        nbrs = list(adj[x])
        for y in nbrs:
            del adj[y][x]
        adj[x] = {}
        return nbrs

    def fix(x: int, choice: int) -> None:
        """Fix x to ``choice``: its edge rows go into the neighbours' cost vectors."""
        records.append(("fix", x, choice))
        for y, m in adj[x].items():
            costs[y] += m[choice]
        for y in remove(x):
            touch(y)

    remaining = n
    while remaining:
        if check_time is not None:
            check_time()
        x = -1
        while queue:
            u = queue.popleft()
            queued[u] = False
            if alive[u] and (len(adj[u]) <= 2 or _finite_count(costs[u]) <= 1):
                x = u
                break
        if x >= 0:
            degree = len(adj[x])
            if degree == 0:
                stats.r0 += 1
                records.append(("fix", x, int(np.argmin(costs[x]))))
                remove(x)
            elif degree == 1:
                stats.ri += 1
                ((y, m),) = adj[x].items()
                folded = costs[x][:, None] + m  # (k_x, k_y)
                table = np.argmin(folded, axis=0)
                costs[y] += folded[table, np.arange(folded.shape[1])]
                records.append(("RI", x, y, table))
                remove(x)
                touch(y)
            elif degree == 2:
                stats.rii += 1
                (y, my), (z, mz) = adj[x].items()
                folded = costs[x][:, None, None] + my[:, :, None] + mz[:, None, :]  # (k_x, k_y, k_z)
                table = np.argmin(folded, axis=0)
                delta = np.take_along_axis(folded, table[None], axis=0)[0]
                records.append(("RII", x, y, z, table))
                remove(x)
                if z in adj[y]:
                    delta = adj[y][z] + delta
                adj[y][z] = delta
                adj[z][y] = delta.T
                touch(y)
                touch(z)
            else:  # RF: at most one finite candidate, so fixing it is exact
                stats.rf += 1
                fix(x, int(np.argmin(costs[x])))
        else:
            stats.rn += 1
            while True:
                negdeg, x = heapq.heappop(heap)
                if alive[x] and -negdeg == len(adj[x]):
                    break
            fix(x, _local_choice(x, costs, adj))
        remaining -= 1

    choice = [0] * n
    for record in reversed(records):
        if record[0] == "fix":
            choice[record[1]] = record[2]
        elif record[0] == "RI":
            _, x, y, table = record
            choice[x] = int(table[choice[y]])
        else:
            _, x, y, z, table = record
            choice[x] = int(table[choice[y], choice[z]])
    return tuple(choice), stats


def _finite_count(vector: np.ndarray) -> int:
    return int(np.isfinite(vector).sum())


def _local_choice(x: int, costs: list[np.ndarray], adj: list[dict[int, np.ndarray]]) -> int:
    """RN choice: own cost plus, per neighbour, the cheapest edge + neighbour cost; ties go to the lowest index."""
    local = costs[x].copy()
    for y, m in adj[x].items():
        local += (m + costs[y][None, :]).min(axis=1)
    return int(np.argmin(local))


@register
class PBQPSolver(Solver):
    """Scholz-Eckstein PBQP reductions with a highest-degree RN heuristic and optional ICM improvement.

    Parameters
    ----------
    time_limit
        Seconds the solve may take (None = unlimited). Running out during the reductions raises ``SolverError``;
        running out during local improvement returns the best assignment so far.
    local_search
        After the reductions, improve the assignment by iterated conditional modes (only when RN fired: otherwise
        the assignment is already optimal).
    max_local_rounds
        At most this many ICM sweeps over all nodes.

    Examples
    --------
    >>> p = Problem.build([("a", ["x", "y"], [1, 2]), ("b", ["x", "y"], [2, 1])], [("a", "b", [[0, 5], [5, 0]])])
    >>> s = PBQPSolver().solve(p)
    >>> s.cost, s.status
    (3.0, 'optimal')
    """

    name = "pbqp"

    def __init__(
        self, *, time_limit: float | None = None, local_search: bool = True, max_local_rounds: int = 100
    ) -> None:
        super().__init__(time_limit=time_limit)
        self.local_search = local_search
        self.max_local_rounds = max_local_rounds

    def _check_params(self) -> None:
        super()._check_params()
        if not isinstance(self.local_search, (bool, np.bool_)):
            raise SolverError(f"{self.name}: local_search must be True or False, got {self.local_search!r}")
        if (
            isinstance(self.max_local_rounds, (bool, np.bool_))
            or not isinstance(self.max_local_rounds, (int, np.integer))
            or self.max_local_rounds < 0
        ):
            raise SolverError(
                f"{self.name}: max_local_rounds must be a non-negative integer, got {self.max_local_rounds!r}"
            )

    def _solve(self, problem: Problem, start: float) -> Solution:
        choice, stats = reduce_and_solve(problem, lambda: self._check_time(start))
        cost = problem.evaluate(choice)
        log = [f"reductions: R0={stats.r0} RI={stats.ri} RII={stats.rii} RF={stats.rf} RN={stats.rn}"]
        if stats.rn == 0:
            if math.isinf(cost):
                log.append("no heuristic step and infinite cost: proven infeasible")
                return Solution(self.name, {}, math.inf, "infeasible", log=tuple(log))
            log.append("no heuristic step: proven optimal")
            return Solution(self.name, problem.to_names(choice), cost, "optimal", lower_bound=cost, log=tuple(log))

        if self.local_search:
            deadline = math.inf if self.time_limit is None else start + self.time_limit
            result = iterated_conditional_modes(
                problem, choice, max_rounds=int(self.max_local_rounds), deadline=deadline
            )
            improved = problem.evaluate(result.assignment)
            if improved <= cost:
                gain = f"{cost - improved:g}" if math.isfinite(cost) else "inf" if math.isfinite(improved) else "0"
                log.append(
                    f"ICM: {result.rounds} round(s), {result.moves} move(s), cost {cost:g} -> {improved:g} "
                    f"(improvement {gain}){'' if result.converged else ', stopped before convergence'}"
                )
                choice, cost = result.assignment, improved
            else:  # only rounding could do this; keep the reduction result
                log.append(f"ICM: {result.rounds} round(s) gave {improved:g} > {cost:g}; kept the reduction result")
        else:
            log.append("ICM: off")

        if math.isinf(cost):
            return Solution(self.name, {}, math.inf, "not_found", log=tuple(log))
        return Solution(self.name, problem.to_names(choice), cost, "feasible", log=tuple(log))
