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
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from solvers.base import Solution, Solver, TimeUp, register
from solvers.errors import SolverError
from solvers.functional import eliminate_functional
from solvers.local_search import iterated_conditional_modes, star_moves, star_pair_moves
from solvers.neighbourhood_search import neighbourhood_search
from solvers.problem import Node, Problem
from solvers.reductions import Reducer, Reduction, back_substitute, reduce_problem


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


MAX_ROUNDS = 100
"""Rounds of the neighbourhood search by default, fewer on a tiny core (``default_rounds``)."""

HUBS = 4
"""The neighbourhood search's first rounds try every candidate of this many highest-degree nodes of the core."""

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
    """Scholz-Eckstein PBQP reductions with a highest-degree RN heuristic, local search and a neighbourhood search.

    Parameters
    ----------
    time_limit
        Seconds the solve may take (None = unlimited). Running out during the first reductions returns
        ``not_found``; running out later (local search, branching, neighbourhood search) the best assignment so far.
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
        When RN fired, this many rounds of iterated large-neighbourhood search (``neighbourhood_search``) follow, on
        the core the exact reductions leave less its functionally determined nodes (``functional``): each round
        gives one node another candidate, re-solves its neighbours around it with these reductions and RN, descends
        by pair and star moves and is kept if the cost is no worse. The first rounds try each candidate of the
        ``HUBS`` highest-degree nodes, the rest a random centre, picked in proportion to its degree (seeded by
        ``seed``). Default None: ``MAX_ROUNDS``, fewer on a tiny core (``default_rounds``); 0 turns the search
        off. It makes the moves the local search cannot: a hub with the densely connected group around it (a dense
        block to another layout), nodes that hard constraints tie (radio links at a fixed distance).
    seed
        Seed of the neighbourhood search's random centres and candidates.

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
        perturbations: int | None = None,
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
            if name == "perturbations" and value is None:
                continue
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 0:
                allowed = "None or a non-negative integer" if name == "perturbations" else "a non-negative integer"
                raise SolverError(f"{self.name}: {name} must be {allowed}, got {value!r}")

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
        if self.perturbations != 0:
            choice, cost = self._search(problem, start, choice, cost, log)
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

    def _search(
        self, problem: Problem, start: float, choice: tuple[int, ...], cost: float, log: list[str]
    ) -> tuple[tuple[int, ...], float]:
        """The neighbourhood search (see ``perturbations``) from ``choice`` on the core that the exact reductions and
        the elimination of functionally determined nodes leave; stops early (keeping the best) when time is out."""
        try:
            layers = _core(problem, lambda: self._check_time(start))
        except TimeUp:
            log.append(f"neighbourhood search: out of time before it started; cost {cost:g}")
            return choice, cost
        core = layers[-1].core
        if core is None:  # RN fired, so some node survived the exact reductions: every assignment is forbidden
            log.append("neighbourhood search: not run; eliminating functionally determined nodes proves every "
                       f"assignment forbidden; cost {cost:g}")
            return choice, cost
        position = choice
        for layer in layers:
            position = tuple(position[v] for v in layer.core_nodes)
        rounds = default_rounds(core) if self.perturbations is None else self.perturbations
        deadline = math.inf if self.time_limit is None else start + self.time_limit
        result = neighbourhood_search(
            core, position, rounds=rounds, hubs=HUBS, seed=self.seed, deadline=deadline,
            repair=lambda neighbourhood: reduce_and_solve(neighbourhood, lambda: self._check_time(start))[0],
        )
        found = result.assignment
        for layer in reversed(layers):
            found = layer.expand(found)
        other = problem.evaluate(found)
        eliminated = layers[1].removed.get("functional", 0)
        log.append(
            f"neighbourhood search: {result.rounds} of {rounds} round(s) on a core of {core.num_nodes} nodes "
            f"({eliminated} functionally determined node(s) eliminated), {result.improved} lowered the cost; "
            f"cost {cost:g} -> {min(cost, other):g}"
        )
        return (found, other) if other < cost else (choice, cost)


def _core(problem: Problem, check_time: Callable[[], None]) -> tuple[Reduction, Reduction]:
    """The exact reductions, then the elimination of functionally determined nodes on their core (identity when
    the first leaves no core)."""
    reduction = reduce_problem(problem, check_time)
    if reduction.core is None:
        return reduction, reduction
    return reduction, eliminate_functional(reduction.core, check_time)


def default_rounds(core: Problem) -> int:
    """Rounds of the neighbourhood search by default: ``MAX_ROUNDS``, or twice the number of ways to change one
    node's candidate (allowed candidates less one, summed over the core's nodes) where that is fewer."""
    changes = sum(int(np.isfinite(node.costs).sum()) - 1 for node in core.nodes)
    return min(MAX_ROUNDS, 2 * changes)
