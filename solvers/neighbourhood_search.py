"""Iterated large-neighbourhood search: move one node, re-solve its neighbours around it, descend, keep if no worse.

Each round picks a centre node and one of its other allowed candidates, gives the centre that candidate, re-solves
the centre's neighbours jointly with every other node held fixed (``repair``, PBQP's reductions and RN in ``pbqp``),
then runs pair and star moves (``LiveAssignment.descend``) from whatever changed. The round is kept when the total
is no worse than before it (so the search can drift across equal-cost assignments) and undone otherwise, so the cost
never increases. A local search cannot make such a move: a hub whose neighbours all agree with its current choice
pays on every edge for changing alone, and each neighbour pays for leaving the others.

The first rounds try every allowed candidate of the highest-degree nodes in turn (a hub and the densely connected
group around it move together); the rest take the end of a random edge as the centre, so that a node is picked in
proportion to its degree, with a random candidate. Everything is seeded; only ``deadline`` depends on the clock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from solvers.base import TimeUp
from solvers.live_assignment import LiveAssignment
from solvers.problem import Problem, ProblemError

Repair = Callable[[Problem], Sequence[int]]
"""Solves a neighbourhood given as a problem of its own: a candidate index per node (``TimeUp`` to stop the search)."""


@dataclass(frozen=True)
class NeighbourhoodSearchResult:
    """The assignment at the end (never costlier than the start), rounds run, rounds kept that lowered the cost."""

    assignment: tuple[int, ...]
    rounds: int
    improved: int


def neighbourhood_search(
    problem: Problem,
    start: Sequence[int],
    *,
    rounds: int,
    repair: Repair,
    hubs: int = 0,
    seed: int = 0,
    deadline: float = math.inf,
) -> NeighbourhoodSearchResult:
    """Run ``rounds`` rounds of the search from ``start`` (fewer if ``deadline``, a ``time.perf_counter()`` value,
    passes first); the first try each other allowed candidate of the ``hubs`` highest-degree nodes (at most half of
    the rounds).

    Examples
    --------
    Moving the hub alone pays 4 per leaf, and a leaf alone 4; moving all together saves 5 - 1.5:

    >>> from solvers.pbqp import reduce_and_solve
    >>> nodes = [("hub", ["x", "y"], [5.0, 0.0])] + [(f"leaf{i}", ["x", "y"], [0.0, 0.5]) for i in range(3)]
    >>> p = Problem.build(nodes, [("hub", f"leaf{i}", [[0.0, 4.0], [4.0, 0.0]]) for i in range(3)])
    >>> result = neighbourhood_search(p, (0, 0, 0, 0), rounds=1, hubs=1, repair=lambda q: reduce_and_solve(q)[0])
    >>> result.assignment, p.evaluate(result.assignment)
    ((1, 1, 1, 1), 1.5)
    """
    live = LiveAssignment(problem, start)
    allowed = [np.flatnonzero(np.isfinite(node.costs)) for node in problem.nodes]
    done = improved = 0
    for u, choice in _centres(problem, live, allowed, rounds, hubs, seed):
        if time.perf_counter() > deadline:
            break
        done += 1
        before = live.cost
        live.set(u, choice)
        region = live.neighbours[u].tolist()
        try:
            repaired = repair(live.induced(region)) if region else ()
        except (TimeUp, ProblemError):  # out of time, or costs so large that the penalised neighbourhood overflows
            # (its forbidden entries priced above every finite total): this round is undone, the search ends
            live.undo()
            done -= 1
            break
        for v, c in zip(region, repaired):
            live.set(v, int(c))
        inside = set(region)
        around = {u} | {w for v, _ in live.journal for w in live.neighbours[v].tolist() if w not in inside}
        live.descend(sorted(around), deadline)
        if live.cost <= before + live.tolerance():
            improved += live.cost < before - live.tolerance()
            live.journal.clear()
        else:
            live.undo()
    return NeighbourhoodSearchResult(live.assignment, done, improved)


def _centres(
    problem: Problem, live: LiveAssignment, allowed: list[np.ndarray], rounds: int, hubs: int, seed: int
) -> Iterator[tuple[int, int]]:
    """``rounds`` (centre, candidate) pairs: first each other allowed candidate of the ``hubs`` highest-degree nodes
    (ties to the lowest index; at most half the rounds), then an end of a random edge with a random other allowed
    candidate."""
    movable = [u for u in range(problem.num_nodes) if len(allowed[u]) > 1]
    if not movable:
        return
    order = sorted(movable, key=lambda u: (-len(live.neighbours[u]), u))[:hubs]
    sweep = [(u, int(c)) for u in order for c in allowed[u]][: rounds // 2]
    swept = 0
    for u, choice in sweep:
        if choice != live.x[u]:  # the hub's current candidate is no move: it leaves its round to the random ones
            swept += 1
            yield u, choice
    ends = [end for pair in problem.pairs for end in pair if len(allowed[end]) > 1] or movable
    rng = np.random.default_rng(seed)
    for _ in range(rounds - swept):
        u = ends[int(rng.integers(len(ends)))]
        others = allowed[u][allowed[u] != live.x[u]]
        yield u, int(others[rng.integers(len(others))])
