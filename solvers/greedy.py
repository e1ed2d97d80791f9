"""Greedy solver: visit nodes in topological order, each taking its best candidate given the nodes already decided."""

from __future__ import annotations

import math

import numpy as np

from solvers.base import Solution, Solver, register
from solvers.local_search import oriented_adjacency
from solvers.problem import Problem


def visit_order(problem: Problem) -> tuple[list[int], bool]:
    """Node positions in a topological order of the directed edges, ties broken by node position.

    Returns ``(order, acyclic)``; when the edges contain a directed cycle there is no topological order and the
    node order is returned with ``acyclic=False``.

    Examples
    --------
    >>> p = Problem.build([("b", ["x"], [0]), ("a", ["x"], [0])], [("a", "b", [[0]])])
    >>> visit_order(p)
    ([1, 0], True)
    """
    import networkx as nx  # here, not at the top: ``import solvers`` need not pay its 0.1 s

    graph = nx.DiGraph()
    graph.add_nodes_from(range(problem.num_nodes))
    graph.add_edges_from((problem.index(e.src), problem.index(e.dst)) for e in problem.edges)
    try:
        return list(nx.lexicographical_topological_sort(graph, key=int)), True
    except nx.NetworkXUnfeasible:
        return list(range(problem.num_nodes)), False


@register
class GreedySolver(Solver):
    """One pass in topological order; each node minimises its own cost plus edges to already-decided neighbours.

    Fast and never proven optimal, except on edge-free problems where the greedy choice is exact.

    Parameters
    ----------
    time_limit
        Seconds the solve may take (None = unlimited); running out before every node is decided raises
        ``SolverError``.

    Examples
    --------
    >>> p = Problem.build([("a", ["x", "y"], [1, 2]), ("b", ["x", "y"], [2, 1])], [("a", "b", [[0, 5], [5, 0]])])
    >>> s = GreedySolver().solve(p)
    >>> s.cost, s.status
    (3.0, 'feasible')
    """

    name = "greedy"

    def __init__(self, *, time_limit: float | None = None) -> None:
        super().__init__(time_limit=time_limit)

    def _solve(self, problem: Problem, start: float) -> Solution:
        order, acyclic = visit_order(problem)
        log = [
            "visit order: topological (ties by node order)"
            if acyclic
            else "edges contain a directed cycle: no topological order, visiting nodes in node order"
        ]
        adj = oriented_adjacency(problem)
        choice = [-1] * problem.num_nodes
        for u in order:
            self._check_time(start)
            local = problem.nodes[u].costs.copy()
            for v, m in adj[u].items():
                if choice[v] >= 0:
                    local += m[:, choice[v]]
            choice[u] = int(np.argmin(local))
        cost = problem.evaluate(choice)
        if math.isinf(cost):
            return Solution(self.name, {}, math.inf, "not_found", log=tuple(log))
        if not problem.edges:
            log.append("no edges: each node's cheapest candidate is optimal")
            return Solution(self.name, problem.to_names(choice), cost, "optimal", lower_bound=cost, log=tuple(log))
        return Solution(self.name, problem.to_names(choice), cost, "feasible", log=tuple(log))
