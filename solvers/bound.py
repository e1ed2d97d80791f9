"""A valid lower bound on the optimum: the LP relaxation of the local polytope, solved with GLOP (or PDLP).

The local polytope has one variable ``x[u, i]`` in [0, 1] per allowed candidate ``i`` of node ``u`` and one ``y[e, i,
j]`` in [0, 1] per allowed pair of edge ``e = (u, v)``, with

- ``sum_i x[u, i] = 1`` for every node,
- ``sum_j y[e, i, j] = x[u, i]`` and ``sum_i y[e, i, j] = x[v, j]`` for every edge (the marginal constraints),

and minimises ``sum c_u[i] x[u, i] + sum c_e[i, j] y[e, i, j]``. Forbidden candidates and pairs get no variable. With
binary ``x`` it is exactly the problem (``solvers/ilp.py``); relaxed, its optimum is a lower bound, and it is tight when
the graph is a forest. The model built here merges, edge by edge, the candidates the edge cannot tell apart
(``solvers/classes.py``): one ``y[e, a, b]`` per pair of classes ``a`` of ``u`` and ``b`` of ``v`` whose marginals are
the sums of their classes' ``x``. Its optimum is the same and, on layout problems, it is several times smaller.

Validity despite LP tolerances: the bound is not the LP's objective value but the Lagrangian (dual) bound computed
here from the LP's dual values ``lambda``: ``L(lambda) = sum_u alpha_u + sum over variables of min(0, reduced cost)``
is a lower bound for *any* ``lambda`` because every variable lies in [0, 1]. So an inexact dual only makes the bound
weaker, never invalid. What remains is floating-point rounding, bounded by standard error analysis and subtracted:
a reduced cost computed with ``k`` additions is off by at most ``2 k u S`` (``u = 2**-53``, ``S`` the sum of the
magnitudes of its operands), so a term ``min(0, r)`` whose computed ``r`` is at least that far above 0 is exactly 0,
and any other term is off by at most that much; ``math.fsum`` rounds the sum once (at most ``u |sum|``, doubled here).
Keeping the margin this tight lets an LP bound prove an integer optimum (``solvers/ilp.py``'s LP-first step).

Presolve (the default): the LP is solved on the core left by the exact reductions of ``solvers/reductions.py`` and
their offset is added. That is valid (the core's optimum plus the offset is the optimum), faster (chains and trees
vanish, series-parallel parts shrink) and at least as tight as the plain LP: every LP solution of the core extends,
through the argmin tables of the folds, to an LP solution of the whole problem with the same cost plus the offset,
and the edges the degree-2 folds add only constrain the core further. The offset is a sum of problem costs, whose
rounding (relative 1e-16 per fold) the margin ``SAFETY * (1 + |offset|)`` (``SAFETY = 1e-9``) covers.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from solvers.classes import EdgePairs, class_pairs, live_candidates
from solvers.errors import SolverError
from solvers.problem import Problem
from solvers.reductions import Reduction, reduce_problem

SAFETY = 1e-9
"""Relative safety margin for the presolve offset (times ``1 + |offset|``), whose folds are not tracked one by one."""
UNIT_ROUNDOFF = 2.0**-53

LP_SOLVERS = ("GLOP", "PDLP")


@dataclass
class LocalPolytope:
    """A pywraplp model of the local polytope: variables and constraints keyed by tuples.

    ``x[u, i]``; ``y[(u, v), a, b]`` per pair of classes (``edges[(u, v)]``, ``solvers/classes.py``); ``one_hot[u]``;
    ``rows[(u, v), a]`` (``sum_b y = sum of x[u, i] over i in class a``) and ``cols[(u, v), b]`` (likewise for ``v``),
    stored as ``sum y - sum x == 0``.
    """

    solver: Any
    x: dict[tuple[int, int], Any] = field(default_factory=dict)
    y: dict[tuple[tuple[int, int], int, int], Any] = field(default_factory=dict)
    one_hot: dict[int, Any] = field(default_factory=dict)
    rows: dict[tuple[tuple[int, int], int], Any] = field(default_factory=dict)
    cols: dict[tuple[tuple[int, int], int], Any] = field(default_factory=dict)
    edges: dict[tuple[int, int], EdgePairs] = field(default_factory=dict)


def local_polytope(
    solver: Any, problem: Problem, *, binary_x: bool = False, check_time: Callable[[], None] | None = None
) -> LocalPolytope:
    """Add the local-polytope model of ``problem`` to a pywraplp ``solver`` (``x`` binary if ``binary_x``);
    ``check_time`` is called before each edge's variables are added (it raises to abort).

    ``y`` stays continuous even then: with ``x`` integral each edge has exactly one row class and one column class
    summing to 1, and the marginal constraints leave exactly one feasible ``y``, 1 on that pair and 0 elsewhere.
    """
    lp = LocalPolytope(solver, edges=class_pairs(problem))
    objective = solver.Objective()
    for u, candidates in enumerate(live_candidates(problem)):
        for i in candidates:
            var = solver.IntVar(0, 1, f"x[{u},{i}]") if binary_x else solver.NumVar(0, 1, f"x[{u},{i}]")
            lp.x[u, i] = var
            objective.SetCoefficient(var, float(problem.nodes[u].costs[i]))
        lp.one_hot[u] = _linear_eq(solver, [lp.x[u, i] for i in candidates], [], 1.0)
    for (u, v), edge in lp.edges.items():
        if check_time is not None:
            check_time()
        row_terms: dict[int, list[Any]] = defaultdict(list)
        col_terms: dict[int, list[Any]] = defaultdict(list)
        for a, b, cost in edge.pairs:
            var = solver.NumVar(0, 1, f"y[{u},{v},{a},{b}]")
            lp.y[(u, v), a, b] = var
            objective.SetCoefficient(var, cost)
            row_terms[a].append(var)
            col_terms[b].append(var)
        for a, row in enumerate(edge.rows):
            lp.rows[(u, v), a] = _linear_eq(solver, row_terms[a], [lp.x[u, i] for i in row], 0.0)
        for b, col in enumerate(edge.cols):
            lp.cols[(u, v), b] = _linear_eq(solver, col_terms[b], [lp.x[v, j] for j in col], 0.0)
    objective.SetMinimization()
    return lp


def _linear_eq(solver: Any, terms: list[Any], minus: list[Any], rhs: float) -> Any:
    """``sum(terms) - sum(minus) == rhs`` as a pywraplp row (built coefficient by coefficient: fast, and fine when
    empty)."""
    row = solver.Constraint(rhs, rhs)
    for var in terms:
        row.SetCoefficient(var, 1.0)
    for var in minus:
        row.SetCoefficient(var, -1.0)
    return row


def lp_lower_bound(problem: Problem, *, solver: str = "GLOP", presolve: bool = True) -> float:
    """A valid lower bound on the optimum of ``problem`` from the local-polytope LP relaxation.

    Parameters
    ----------
    problem
        The problem.
    solver
        ``"GLOP"`` (simplex, the default) or ``"PDLP"`` (first-order; looser but valid, see the module docstring).
    presolve
        Bound the core left by the exact reductions and add their offset (at least as tight and faster, see the
        module docstring); False bounds the plain LP of the whole problem.

    Returns
    -------
    float
        The Lagrangian bound at the LP's duals minus the safety margin (never above the LP optimum, exact on forests
        up to that margin), or ``math.inf`` if the LP is infeasible (then so is the problem).

    Examples
    --------
    >>> p = Problem.build([("a", ["x", "y"], [1, 2]), ("b", ["x", "y"], [2, 1])], [("a", "b", [[0, 5], [5, 0]])])
    >>> round(lp_lower_bound(p), 6)
    3.0
    """
    from ortools.linear_solver import pywraplp

    if solver not in LP_SOLVERS:
        raise SolverError(f"lp_lower_bound: solver must be one of {', '.join(LP_SOLVERS)}, got {solver!r}")
    if not isinstance(presolve, bool):
        raise SolverError(f"lp_lower_bound: presolve must be True or False, got {presolve!r}")
    reduction = reduce_problem(problem) if presolve else Reduction.identity(problem)
    if reduction.infeasible:
        return math.inf
    if reduction.core is None:
        return _offset_bound(reduction.offset)
    lp_solver = pywraplp.Solver.CreateSolver(solver)
    if lp_solver is None:
        raise SolverError(f"lp_lower_bound: OR-Tools has no {solver} solver")
    model = local_polytope(lp_solver, reduction.core)
    params = pywraplp.MPSolverParameters()
    if solver == "GLOP":  # dual simplex: 3 s instead of 16 s (primal) on a 300-node DenseNet-shaped problem
        params.SetIntegerParam(params.LP_ALGORITHM, params.DUAL)
    status = lp_solver.Solve(params)
    if status == pywraplp.Solver.INFEASIBLE:
        return math.inf
    if status not in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
        raise SolverError(f"lp_lower_bound: {solver} ended with status {status} (neither optimal nor infeasible)")
    return lagrangian_bound(reduction.core, model, offset=reduction.offset)


def lagrangian_bound(problem: Problem, model: LocalPolytope, *, offset: float = 0.0) -> float:
    """``offset + sum_u alpha_u + sum_vars min(0, reduced cost)`` at the model's current dual values, minus the margin.

    Reduced costs are recomputed here from the problem's costs and the duals (not taken from the LP solver), so the
    result is a valid bound whatever the duals are.
    """
    alpha = {u: _dual(row) for u, row in model.one_hot.items()}
    beta = {key: _dual(row) for key, row in model.rows.items()}  # row (e, i): sum_j y - x[u, i] = 0
    gamma = {key: _dual(row) for key, row in model.cols.items()}  # col (e, j): sum_i y - x[v, j] = 0
    terms = list(alpha.values())
    errors: list[float] = []

    def add(reduced: float, magnitude: float, operations: int) -> None:
        error = 2.0 * operations * UNIT_ROUNDOFF * magnitude
        if reduced < error:  # possibly negative: the term counts, with its rounding error
            terms.append(min(0.0, reduced))
            errors.append(error)

    reduced_x = {(u, i): [float(problem.nodes[u].costs[i]) - alpha[u]] for (u, i) in model.x}
    magnitude_x = {(u, i): abs(float(problem.nodes[u].costs[i])) + abs(alpha[u]) for (u, i) in model.x}
    for (e, a), b in beta.items():  # every x of row class a appears in the row with coefficient -1
        for i in model.edges[e].rows[a]:
            reduced_x[e[0], i].append(b)
            magnitude_x[e[0], i] += abs(b)
    for (e, b), g in gamma.items():
        for j in model.edges[e].cols[b]:
            reduced_x[e[1], j].append(g)
            magnitude_x[e[1], j] += abs(g)
    for key, parts in reduced_x.items():
        value = 0.0
        for part in parts:
            value += part
        add(value, magnitude_x[key], len(parts))
    for e, a, b in model.y:
        edge = model.edges[e]
        c, r, g = float(problem.pairs[e][edge.rows[a][0], edge.cols[b][0]]), beta[e, a], gamma[e, b]
        add(c - r - g, abs(c) + abs(r) + abs(g), 2)
    total = math.fsum(terms)
    margin = math.fsum(errors) + 4.0 * UNIT_ROUNDOFF * (abs(total) + abs(offset))  # fsum and the final additions
    return math.fsum([_offset_bound(offset), total, -margin])


def _offset_bound(offset: float) -> float:
    """The presolve offset less its margin ``SAFETY * (1 + |offset|)``."""
    return offset - SAFETY * (1.0 + abs(offset))


def _dual(row: Any) -> float:
    """A row's dual value, 0 if the solver gave none that is finite (any value keeps the bound valid)."""
    value = row.dual_value()
    return value if math.isfinite(value) else 0.0
