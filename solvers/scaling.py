"""Costs scaled to integers, for the exact backends that need them (CP-SAT in ``ilp``, ``toulbar2``), with a bound on
the rounding error so that their proofs carry over to the real-valued costs."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from solvers.errors import SolverError
from solvers.problem import Edge, Node, Problem

AUTO_MAX_COST = 2**30
"""Automatic power-of-two scale: the largest finite cost, scaled, stays below this (about 1.07e9)."""

DECIMALS = 6
"""Automatic scale: costs with at most this many decimal places are scaled by a power of ten and stay exact."""

MAX_TOTAL = 2**53
"""The scaled costs, summed over nodes and edges (largest entry of each), must stay below this: every objective value
is then an exact integer in a double and far from CP-SAT's and toulbar2's int64 limits."""


@dataclass(frozen=True)
class ScaledCosts:
    """Integer costs: ``round(cost * scale)``, inf kept for forbidden entries.

    ``error`` bounds ``|scaled objective / scale - true objective|`` for every assignment: the largest rounding error
    of each node's costs and each edge's matrix, summed (at most ``0.5 / scale`` per node and edge; 0 when exact).
    """

    scale: float
    nodes: tuple[np.ndarray, ...]
    pairs: dict[tuple[int, int], np.ndarray]
    error: float

    def as_problem(self, problem: Problem) -> Problem:
        """``problem`` with these integer costs (sums of them stay exact: they total less than ``MAX_TOTAL``);
        ``problem`` itself when its costs were integers already."""
        if self.scale == 1.0 and self.error == 0.0:
            return problem
        nodes = tuple(Node(n.name, n.candidates, c) for n, c in zip(problem.nodes, self.nodes))
        names = [n.name for n in problem.nodes]
        edges = tuple(Edge(names[u], names[v], m) for (u, v), m in self.pairs.items())
        return Problem(nodes, edges, problem.meta)

    def describe(self) -> str:
        """The log line the solvers using it write."""
        return f"scale {self.scale:g}; rounding error bound {self.error:g} (cost units, whole objective)"

    def lower_bound(self, scaled_bound: float, cost: float) -> float:
        """A proven bound ``scaled_bound`` on the scaled objective as a bound on the real one, clipped to
        ``[0, cost]``: ``scaled_bound / scale - error``."""
        return min(cost, max(0.0, scaled_bound / self.scale - self.error))


def scale_costs(problem: Problem, scale: float | None = None, *, solver: str = "scale_costs") -> ScaledCosts:
    """Scale and round the finite costs of ``problem`` to integers.

    With ``scale=None`` the smallest of 1, 10, ..., ``10**DECIMALS`` that makes every finite cost an integer is used
    (so integer and few-decimal costs stay exact), else the power of two that brings the largest finite cost just
    below ``AUTO_MAX_COST`` (a power of two multiplies floats exactly: the only error is the rounding to integers).
    A scale that makes the costs too large for exact integers raises ``SolverError`` prefixed with ``solver``.

    Examples
    --------
    >>> costs = scale_costs(Problem.build([("a", ["x", "y"], [3, 4])]))
    >>> costs.scale, costs.nodes[0].tolist(), costs.error
    (1.0, [3.0, 4.0], 0.0)
    >>> costs = scale_costs(Problem.build([("a", ["x", "y"], [1.25, 0.001])]))
    >>> costs.scale, costs.nodes[0].tolist(), costs.error < 1e-15
    (1000.0, [1250.0, 1.0], True)
    >>> costs = scale_costs(Problem.build([("a", ["x", "y"], [1 / 3, 1.0])]))
    >>> costs.scale == 2**29, costs.error <= 0.5 / 2**29
    (True, True)
    """
    arrays = [node.costs for node in problem.nodes] + list(problem.pairs.values())
    finite = [a[np.isfinite(a)] for a in arrays]
    peaks = np.array([f.max() for f in finite if f.size])  # the largest entry of each node and edge
    if scale is None:
        scale = _auto_scale(np.concatenate(finite), peaks)
    scaled = [np.where(np.isfinite(a), np.rint(a * scale), math.inf) for a in arrays]
    total = float(np.sum(peaks)) * scale
    if not total < MAX_TOTAL:
        raise SolverError(f"{solver}: scale {scale:g} makes the scaled costs too large for exact integers "
                          f"(sum {total:g})")
    error = sum(float(np.max(np.abs(s[np.isfinite(s)] / scale - f))) for s, f in zip(scaled, finite) if f.size)
    if math.frexp(scale)[0] != 0.5:  # not a power of two: n / scale is itself rounded, by half an ulp at most
        error += float(np.sum(peaks)) * 2.0**-52
    n = problem.num_nodes
    return ScaledCosts(scale, tuple(scaled[:n]), dict(zip(problem.pairs, scaled[n:])), error * (1 + 1e-12))


def _auto_scale(costs: np.ndarray, peaks: np.ndarray) -> float:
    """The automatic scale for finite ``costs`` whose per-node/edge maxima are ``peaks`` (see ``scale_costs``)."""
    total = float(np.sum(peaks))
    for decimals in range(DECIMALS + 1):
        scale = 10.0**decimals
        if not total * scale < MAX_TOTAL:
            break
        if np.array_equal(np.rint(costs * scale) / scale, costs):
            return scale
    largest = float(np.max(peaks, initial=0.0))
    if largest == 0.0:
        return 1.0
    exponent = math.frexp(AUTO_MAX_COST)[1] - math.frexp(largest)[1] - 1  # largest < 2**e: largest * scale < 2**30
    return math.ldexp(1.0, max(-1000, min(1000, exponent)))
