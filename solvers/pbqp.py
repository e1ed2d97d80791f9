"""PBQP solver: Scholz-Eckstein graph reductions, a highest-degree RN heuristic, then optional local search.

The exact reductions (``solvers/reductions.py``) remove a node while keeping the optimum: R0 (no neighbours: take its
cheapest candidate), RI (one neighbour: fold the node into the neighbour's cost vector), RII (two neighbours: fold it
into an edge between them) and RF (at most one finite candidate left: fix it, since every finite assignment must use
it). When none applies, RN fixes the node of highest degree to its locally best candidate, which may lose optimality,
and the exact reductions resume. Back-substituting in reverse removal order gives the assignment. Graphs of treewidth
at most 2 (trees, series-parallel graphs) never need RN and are solved exactly.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from solvers.base import Solution, Solver, SolverError, register
from solvers.local_search import iterated_conditional_modes, star_moves, star_pair_moves
from solvers.problem import Node, Problem
from solvers.reductions import Reducer, back_substitute


@dataclass(frozen=True)
class ReductionStats:
    """How many times each reduction fired."""

    r0: int = 0
    ri: int = 0
    rii: int = 0
    rf: int = 0
    rn: int = 0


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
    state = Reducer(problem)
    heap = [(-len(nbrs), u) for u, nbrs in enumerate(state.adj)]  # degrees never increase: stale keys are too high
    heapq.heapify(heap)
    rn = 0
    state.reduce(check_time)
    while state.alive:
        if check_time is not None:
            check_time()
        x = _highest_degree(state, heap)
        state.fix(x, _local_choice(x, state))
        rn += 1
        state.reduce(check_time)
    removed = state.removed
    stats = ReductionStats(removed["degree-0"], removed["degree-1"], removed["degree-2"], removed["fixed"], rn)
    return tuple(back_substitute(state.steps, [-1] * problem.num_nodes)), stats


def _highest_degree(state: Reducer, heap: list[tuple[int, int]]) -> int:
    """The remaining node of highest degree, ties to the lowest index; entries with a stale degree are re-queued."""
    while True:
        negdeg, x = heapq.heappop(heap)
        if x not in state.alive:
            continue
        degree = len(state.adj[x])
        if degree == -negdeg:
            return x
        heapq.heappush(heap, (-degree, x))


def _local_choice(x: int, state: Reducer) -> int:
    """RN choice: own cost plus, per neighbour, the cheapest edge + neighbour cost; ties go to the lowest index."""
    local = state.costs[x].copy()
    for y in sorted(state.adj[x]):
        local += (state.matrix(x, y) + state.costs[y][None, :]).min(axis=1)
    return int(np.argmin(local))


LOCAL_SEARCHES = {
    "star_pair": star_pair_moves,
    "star": star_moves,
    "icm": iterated_conditional_modes,
    "none": None,
}
"""Improvements run after the reductions when RN fired: star moves (a node with its neighbours) alternated with pair
moves (the two ends of an edge), star moves alone, ICM (one node)."""


@register
class PBQPSolver(Solver):
    """Scholz-Eckstein PBQP reductions with a highest-degree RN heuristic and optional local improvement.

    Parameters
    ----------
    time_limit
        Seconds the solve may take (None = unlimited). Running out during the first reductions returns
        ``not_found``; running out later (branching, local improvement, perturbations) the best assignment so far.
    local_search
        After the reductions, when RN fired (otherwise the assignment is already optimal), improve the assignment by
        ``"star_pair"`` moves (default: star moves, each node re-optimised jointly with its neighbours, alternated
        with pair moves, the two ends of an edge, ``local_search.star_pair_moves``), ``"star"`` moves alone,
        ``"icm"`` (one node at a time) or ``"none"``.
    max_local_rounds
        At most this many local-search sweeps over all nodes.
    branch
        When RN fired, run again with each of the ``branch`` highest-degree nodes fixed, one at a time, to each of
        its other live candidates, and keep the cheapest assignment (default 0: one run). RN decides a hub by what
        its neighbours cost locally, so it cannot see a move of a whole densely connected group; fixing the hub
        first lets the reductions follow it. On the core ``ilp`` solves of the DenseNet-201 problem of 2026-11-23
        (196 nodes), ``branch=1`` (22 more runs, 1.7-2.8 s on a loaded machine) finds the optimum, 0.03% below one
        run's cost, by moving a whole dense block to another layout.
    perturbations
        When RN fired, this many times (default 0) reassign a random node and about half its neighbours at random
        from the best assignment so far, run the local search again and keep the result if it is cheaper (iterated
        local search, seeded by ``seed``). It is what brings the radio-link frequency assignment instances, whose hard
        constraints lock single, star and pair moves in, from 17-190% above the optimum to 0-20% with 30
        (docs/measurements.md); each costs a local search over the whole problem.
    seed
        Seed of the perturbations.

    Examples
    --------
    >>> p = Problem.build([("a", ["x", "y"], [1, 2]), ("b", ["x", "y"], [2, 1])], [("a", "b", [[0, 5], [5, 0]])])
    >>> s = PBQPSolver().solve(p)
    >>> s.cost, s.status
    (3.0, 'optimal')
    """

    name = "pbqp"

    def __init__(
        self,
        *,
        time_limit: float | None = None,
        local_search: str = "star_pair",
        max_local_rounds: int = 100,
        branch: int = 0,
        perturbations: int = 0,
        seed: int = 0,
    ) -> None:
        super().__init__(time_limit=time_limit)
        self.local_search = local_search
        self.max_local_rounds = max_local_rounds
        self.branch = branch
        self.perturbations = perturbations
        self.seed = seed

    def _check_params(self) -> None:
        super()._check_params()
        if not isinstance(self.local_search, str) or self.local_search not in LOCAL_SEARCHES:
            choices = ", ".join(map(repr, LOCAL_SEARCHES))
            raise SolverError(f"{self.name}: local_search must be one of {choices}, got {self.local_search!r}")
        for name in ("max_local_rounds", "branch", "perturbations", "seed"):
            value = getattr(self, name)
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 0:
                raise SolverError(f"{self.name}: {name} must be a non-negative integer, got {value!r}")

    def _solve(self, problem: Problem, start: float) -> Solution:
        choice, cost, rn, log = self._heuristic(problem, start)
        if rn == 0:
            if math.isinf(cost):
                log.append("no heuristic step and infinite cost: proven infeasible")
                return Solution(self.name, {}, math.inf, "infeasible", log=tuple(log))
            log.append("no heuristic step: proven optimal")
            return Solution(self.name, problem.to_names(choice), cost, "optimal", lower_bound=cost, log=tuple(log))
        if self.branch:
            choice, cost = self._branch(problem, start, choice, cost, log)
        if self.perturbations:
            choice, cost = self._perturb(problem, start, choice, cost, log)
        if math.isinf(cost):
            return Solution(self.name, {}, math.inf, "not_found", log=tuple(log))
        return Solution(self.name, problem.to_names(choice), cost, "feasible", log=tuple(log))

    def _heuristic(self, problem: Problem, start: float) -> tuple[tuple[int, ...], float, int, list[str]]:
        """Reductions, RN and local search: the assignment, its cost, how many RN steps fired and the log."""
        choice, stats = reduce_and_solve(problem, lambda: self._check_time(start))
        cost = problem.evaluate(choice)
        log = [f"reductions: R0={stats.r0} RI={stats.ri} RII={stats.rii} RF={stats.rf} RN={stats.rn}"]
        search = LOCAL_SEARCHES[self.local_search]
        if stats.rn == 0:
            return tuple(choice), cost, 0, log
        if search is None:
            log.append("local search: none")
            return tuple(choice), cost, stats.rn, log
        deadline = math.inf if self.time_limit is None else start + self.time_limit
        result = search(problem, choice, max_rounds=int(self.max_local_rounds), deadline=deadline)
        improved = problem.evaluate(result.assignment)
        if improved <= cost:
            gain = f"{cost - improved:g}" if math.isfinite(cost) else "inf" if math.isfinite(improved) else "0"
            log.append(
                f"local search ({self.local_search}): {result.rounds} round(s), {result.moves} move(s), "
                f"cost {cost:g} -> {improved:g} "
                f"(improvement {gain}){'' if result.converged else ', stopped before convergence'}"
            )
            return tuple(result.assignment), improved, stats.rn, log
        log.append(  # only rounding could do this; keep the reduction result
            f"local search ({self.local_search}): {result.rounds} round(s) gave {improved:g} > {cost:g}; "
            "kept the reduction result"
        )
        return tuple(choice), cost, stats.rn, log

    def _branch(
        self, problem: Problem, start: float, choice: tuple[int, ...], cost: float, log: list[str]
    ) -> tuple[tuple[int, ...], float]:
        """The cheapest of ``choice`` and the heuristic's assignments with one of the ``branch`` highest-degree
        nodes fixed to each of its other live candidates in turn; stops early (keeping the best) when time is out."""
        neighbors = problem.neighbors()
        hubs = sorted(range(problem.num_nodes), key=lambda u: (-len(neighbors[u]), u))[: self.branch]
        runs = 0
        for u in hubs:
            node = problem.nodes[u]
            for i in np.flatnonzero(np.isfinite(node.costs)):
                if i == choice[u]:
                    continue
                fixed = np.full(len(node.costs), math.inf)
                fixed[i] = node.costs[i]
                nodes = problem.nodes[:u] + (Node(node.name, node.candidates, fixed),) + problem.nodes[u + 1 :]
                try:
                    other, other_cost, _, _ = self._heuristic(Problem(nodes, problem.edges, problem.meta), start)
                except SolverError:  # out of time in the reductions
                    log.append(f"branch: out of time after {runs} run(s); best cost {cost:g}")
                    return choice, cost
                runs += 1
                if other_cost < cost:
                    choice, cost = other, problem.evaluate(other)
        log.append(f"branch: {runs} run(s) on {len(hubs)} highest-degree node(s); best cost {cost:g}")
        return choice, cost

    def _perturb(
        self, problem: Problem, start: float, choice: tuple[int, ...], cost: float, log: list[str]
    ) -> tuple[tuple[int, ...], float]:
        """Iterated local search from ``choice`` (see ``perturbations``); stops early when time is out."""
        rng = np.random.default_rng(self.seed)
        neighbors = problem.neighbors()
        live = [np.flatnonzero(np.isfinite(node.costs)) for node in problem.nodes]
        search = LOCAL_SEARCHES[self.local_search]
        deadline = math.inf if self.time_limit is None else start + self.time_limit
        done = kept = 0
        while done < self.perturbations and time.perf_counter() < deadline:
            done += 1
            x = list(choice)
            u = int(rng.integers(problem.num_nodes))
            for w in (u, *neighbors[u]):
                if w == u or rng.random() < 0.5:
                    x[w] = int(rng.choice(live[w]))
            if search is not None:
                x = list(search(problem, x, max_rounds=int(self.max_local_rounds), deadline=deadline).assignment)
            other = problem.evaluate(x)
            if other < cost:
                choice, cost, kept = tuple(x), other, kept + 1
        log.append(f"perturbations: {done} of {self.perturbations}, {kept} improved the best; cost {cost:g}")
        return choice, cost
