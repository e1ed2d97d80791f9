"""Exact solver: the local-polytope integer program, solved by CP-SAT (default) or SCIP.

The model (see ``solvers/bound.py`` for its LP relaxation) has a binary ``x[u, i]`` per allowed candidate ``i`` of node
``u`` and a ``y[e, i, j]`` per allowed pair of edge ``e = (u, v)``; each node takes exactly one candidate and the
marginal constraints ``sum_j y[e, i, j] = x[u, i]``, ``sum_i y[e, i, j] = x[v, j]`` tie each edge's pair to its end
nodes. Forbidden candidates and pairs have no variable, so every solution has finite cost. The model built merges,
edge by edge, the candidates the edge cannot tell apart (``solvers/classes.py``): one ``y`` per pair of classes of
equal rows and columns of the edge's matrix, as tight and on layout problems several times smaller.

Before the model is built, the exact reductions of ``solvers/reductions.py`` (presolve) fold away every node with at
most two neighbours or a single allowed candidate: only the irreducible core goes to the backend, less its dominated
candidates (``solvers/dominance.py``, CP-SAT's integer costs only), and a problem that reduces entirely (a chain, a
tree, a series-parallel graph) is solved by the reductions alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from solvers.base import Solution, Solver, SolverError, Status, register
from solvers.classes import class_pairs, live_candidates
from solvers.dominance import prune_dominated
from solvers.problem import Edge, Node, Problem
from solvers.reductions import Reduction, reduce_problem

AUTO_MAX_COST = 2**30
"""Automatic power-of-two scale: the largest finite cost, scaled, stays below this (about 1.07e9)."""

DECIMALS = 6
"""Automatic scale: costs with at most this many decimal places are scaled by a power of ten and stay exact."""

MAX_TOTAL = 2**53
"""The scaled costs, summed over nodes and edges (largest entry of each), must stay below this: every objective value
is then an exact integer in a double and far from CP-SAT's int64 limits."""

BACKENDS = ("cpsat", "scip")

HINT_BRANCH = 1
"""The hint is PBQP's with ``branch=1`` (every candidate of the core's highest-degree node tried). On the DenseNet-201
problem of 2026-11-23 it finds the optimum, which one PBQP run misses by 0.03%, and with it CP-SAT proved the optimum
for each of the six seeds tried; from one run's hint, for three of six (docs/measurements.md)."""

SCIP_MARGIN = 1e-6
"""SCIP's dual bound is lowered by ``SCIP_MARGIN * (1 + |bound|)`` for its floating-point tolerances."""

PORTFOLIO = ("max_lp", "core", "quick_restart", "reduced_costs", "default_lp", "pseudo_costs", "no_lp")
"""CP-SAT full-problem subsolvers, in the order they are given to workers (at least the first two, one per worker
beyond). ``max_lp`` (linearization level 2: the whole local polytope in the LP) comes first because it is what proves
optimality; ``core`` (core-based lower bounds) found the better solutions on the hard instances measured."""


@dataclass(frozen=True)
class ScaledCosts:
    """Integer costs for CP-SAT: ``round(cost * scale)``, inf kept for forbidden entries.

    ``error`` bounds ``|scaled objective / scale - true objective|`` for every assignment: the largest rounding error
    of each node's costs and each edge's matrix, summed (at most ``0.5 / scale`` per node and edge; 0 when exact).
    """

    scale: float
    nodes: tuple[np.ndarray, ...]
    pairs: dict[tuple[int, int], np.ndarray]
    error: float

    def as_problem(self, problem: Problem) -> Problem:
        """``problem`` with these integer costs (sums of them stay exact: they total less than ``MAX_TOTAL``)."""
        nodes = tuple(Node(n.name, n.candidates, c) for n, c in zip(problem.nodes, self.nodes))
        names = [n.name for n in problem.nodes]
        edges = tuple(Edge(names[u], names[v], m) for (u, v), m in self.pairs.items())
        return Problem(nodes, edges, problem.meta)


def scale_costs(problem: Problem, scale: float | None = None) -> ScaledCosts:
    """Scale and round the finite costs of ``problem`` to integers.

    With ``scale=None`` the smallest of 1, 10, ..., ``10**DECIMALS`` that makes every finite cost an integer is used
    (so integer and few-decimal costs stay exact), else the power of two that brings the largest finite cost just
    below ``AUTO_MAX_COST`` (a power of two multiplies floats exactly: the only error is the rounding to integers).

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
        raise SolverError(f"ilp: scale {scale:g} makes the scaled costs too large for exact integers (sum {total:g})")
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


@dataclass(frozen=True)
class _Outcome:
    """What a backend found on the core: status, candidate index per core node (None without a solution) and its
    proven bound on the core objective, in the core's cost units (None if it has none)."""

    status: Status
    chosen: tuple[int, ...] | None
    bound: float | None


@register
class ILPSolver(Solver):
    """The local-polytope integer program, solved exactly by CP-SAT or SCIP.

    Parameters
    ----------
    time_limit
        Seconds (default 60, including the reductions and the PBQP hint; None = unlimited). CP-SAT needs a limit by
        default: a proof can take exponential time, and without one a hard instance would never return. A limit
        shorter than CP-SAT's own presolve (about 1 s for 200 core nodes x 8 candidates here) ends with ``not_found``;
        one that runs out during the reductions (milliseconds) raises ``SolverError``.
    workers
        CP-SAT worker threads (default 2). One runs the base search with the full LP; more run the first ``workers``
        of ``PORTFOLIO`` (``max_lp``, the worker that proves optimality, first) in CP-SAT's deterministic interleaved
        mode. Ignored by SCIP.
    backend
        ``"cpsat"`` (default) or ``"scip"`` (the same model through ``pywraplp``, with floating-point costs).
    hint
        When the backend runs (the LP did not prove the optimum), solve the core with the PBQP solver first
        (``branch=1``, see ``HINT_BRANCH``) and give its assignment to the backend as a solution hint (if finite).
    seed
        Random seed of the backend.
    scale
        CP-SAT only: costs are multiplied by ``scale`` and rounded to integers. None (default) picks it (see
        ``scale_costs``): 1 for integer costs and a power of ten for costs with at most six decimals, which keep them
        exact, else the power of two that brings the largest cost just below 2**30.
    presolve
        Apply the exact reductions (``solvers/reductions.py``) first and give the backend only the core they leave
        (False: the whole problem, for ablation).
    dominance
        CP-SAT only: forbid the core's dominated candidates (``solvers/dominance.py``; exact on the integer costs). On
        the DenseNet-201 problem of 2026-11-23 it forbids 3681 of the core's 5390 candidates, and GLOP took 3.4 s
        instead of 12.2 s on the per-candidate model of then (docs/measurements.md) (False: keep them, for ablation).
    lp_first
        Solve the LP relaxation of the core (GLOP, dual simplex) before the backend. When the LP optimum, rounded to
        the largest ``x`` of each node, costs no more than the LP's Lagrangian bound allows (see Notes), it is proven
        optimal and the backend is not run; otherwise the rounded assignment becomes the hint if it beats PBQP's.

    Notes
    -----
    Presolve. The reductions are exact: the optimum is the core's optimum plus the offset they collect, and the
    back-substituted assignment costs exactly the core assignment's cost plus the offset. So the reported
    ``lower_bound`` is the backend's bound on the core plus the offset (then treated as below), as valid as without
    presolve. An empty core is solved by the reductions alone (``optimal``); the reductions proving every assignment
    forbidden gives ``infeasible``. For CP-SAT the reductions run on the scaled integer costs, where every sum is exact,
    so they add no rounding error; for SCIP they run on the costs themselves.

    LP first. The local polytope is often tight on real networks (the DenseNet-201 problem measured here), so the LP
    alone proves the optimum. The proof uses the Lagrangian bound of ``solvers/bound.py`` (valid whatever the LP's
    tolerances): with CP-SAT's integer costs, a rounded assignment costing at most ``ceil(bound)`` is optimal, exactly;
    with SCIP's floating-point costs, at most ``bound + SCIP_MARGIN * (1 + |bound|)``, with SCIP's tolerance.

    Status. ``optimal`` means the backend (or the LP) proved its model optimal. For CP-SAT that model has the rounded
    costs: with a rounding error bound ``err`` (logged; 0 for integer costs, ~1e-16 relative for few-decimal costs) the
    assignment is within ``2 * err`` of the true optimum, and ``lower_bound`` is ``(best_bound + offset) / scale - err``
    (clipped to the cost), which is the cost itself when ``err = 0``. ``feasible``: out of time with a solution and the
    proven bound. ``infeasible``: proven that no finite-cost assignment exists (``lower_bound`` inf). ``not_found``: out
    of time without a solution; the empty assignment is returned, never the hint or another solver's answer. SCIP's
    bound (on the core) is its dual bound less ``SCIP_MARGIN * (1 + |bound|)`` for its tolerances, also when optimal.

    Determinism. With several workers CP-SAT runs with ``interleave_search``: batches of tasks synchronised in a fixed
    order, so a solve that ends before the time limit returns the same assignment for the same seed and ``workers``
    (the default portfolio with free threads returned different equal-cost optima). One worker is sequential, SCIP
    single-threaded. A solve cut short by the wall-clock limit is not reproducible.

    Examples
    --------
    >>> p = Problem.build([("a", ["x", "y"], [1, 3]), ("b", ["x", "y"], [2, 1])], [("a", "b", [[0, 5], [5, 0]])])
    >>> sol = ILPSolver(hint=False).solve(p)
    >>> sol.status, sol.cost, dict(sol.assignment)
    ('optimal', 3.0, {'a': 'x', 'b': 'x'})
    """

    name = "ilp"

    def __init__(
        self,
        *,
        time_limit: float | None = 60.0,
        workers: int = 2,
        backend: str = "cpsat",
        hint: bool = True,
        seed: int = 0,
        scale: float | None = None,
        presolve: bool = True,
        dominance: bool = True,
        lp_first: bool = True,
    ) -> None:
        super().__init__(time_limit=time_limit)
        self.workers = workers
        self.backend = backend
        self.hint = hint
        self.seed = seed
        self.scale = scale
        self.presolve = presolve
        self.dominance = dominance
        self.lp_first = lp_first

    def _check_params(self) -> None:
        super()._check_params()
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise SolverError(f"ilp: workers must be a positive integer, got {self.workers!r}")
        if self.backend not in BACKENDS:
            raise SolverError(f"ilp: backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if not isinstance(self.hint, bool):
            raise SolverError(f"ilp: hint must be True or False, got {self.hint!r}")
        for flag in ("presolve", "dominance", "lp_first"):
            if not isinstance(getattr(self, flag), bool):
                raise SolverError(f"ilp: {flag} must be True or False, got {getattr(self, flag)!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**31:
            raise SolverError(f"ilp: seed must be an integer in [0, 2**31), got {self.seed!r}")
        if self.scale is not None and (
            isinstance(self.scale, bool)
            or not isinstance(self.scale, (int, float))
            or not (math.isfinite(self.scale) and self.scale > 0)
        ):
            raise SolverError(f"ilp: scale must be None or a positive finite number, got {self.scale!r}")

    def _solve(self, problem: Problem, start: float) -> Solution:
        log: list[str] = []
        if self.backend == "cpsat":
            costs = scale_costs(problem, self.scale)
            log.append(f"scale {costs.scale:g}; rounding error bound {costs.error:g} (cost units, whole objective)")
            scale, error, working = costs.scale, costs.error, costs.as_problem(problem)
        else:
            scale, error, working = 1.0, 0.0, problem
        if self.presolve:
            reduction = reduce_problem(working, lambda: self._check_time(start))
            log.append(f"presolve {reduction.summary} (offset {reduction.offset / scale:.12g})")
        else:
            reduction = Reduction.identity(working)
        if reduction.infeasible:
            return Solution(self.name, {}, math.inf, "infeasible", lower_bound=math.inf, log=tuple(log))
        core = reduction.core
        if core is not None and self.dominance and self.backend == "cpsat":
            core, forbidden = prune_dominated(core, lambda: self._check_time(start))
            log.append(f"dominance: {forbidden} dominated candidates of the core forbidden")
        if core is None:
            outcome = _Outcome("optimal", (), 0.0)
        else:
            outcome = self._solve_lp(core, start, log) if self.lp_first else None
            if outcome is None or outcome.status != "optimal":
                core_hint = self._hint(core, scale, start, log) if self.hint else None
                if outcome is not None and (
                    core_hint is None or core.evaluate(outcome.chosen) < core.evaluate(core_hint)
                ):
                    core_hint = outcome.chosen
                solve_core = self._solve_scip if self.backend == "scip" else self._solve_cpsat
                outcome = solve_core(core, start, core_hint, log)
        if outcome.status == "infeasible":
            return Solution(self.name, {}, math.inf, "infeasible", lower_bound=math.inf, log=tuple(log))
        bound = outcome.bound
        if bound is not None:
            bound = (bound + reduction.offset) / scale - error if math.isfinite(bound) else None
        if outcome.chosen is None:
            known = None if bound is None else max(0.0, bound)
            return Solution(self.name, {}, math.inf, "not_found", lower_bound=known, log=tuple(log))
        chosen = reduction.expand(outcome.chosen)
        cost = problem.evaluate(chosen)
        if outcome.status == "optimal" and self.backend == "cpsat" and error == 0:
            bound = cost
        elif bound is not None:
            bound = min(cost, max(0.0, bound))
        return Solution(self.name, problem.to_names(chosen), cost, outcome.status, bound, log=tuple(log))

    def _hint(self, core: Problem, scale: float, start: float, log: list[str]) -> tuple[int, ...] | None:
        """The PBQP solver's assignment for ``core`` (costs times ``scale``) within the time left, or None if it has
        no finite one."""
        from solvers.pbqp import PBQPSolver

        time_left = self._time_left(start)
        try:
            limit = time_left if math.isfinite(time_left) else None
            solution = PBQPSolver(time_limit=limit, branch=HINT_BRANCH).solve(core)
        except SolverError as exc:
            log.append(f"hint: none ({exc})")
            return None
        if not solution.assignment or math.isinf(solution.cost):
            log.append("hint: none (pbqp found no finite-cost assignment)")
            return None
        log.append(
            f"hint: pbqp (branch {HINT_BRANCH}) cost {solution.cost / scale:.12g} in {solution.seconds:.3f} s "
            "(without the presolve offset)"
        )
        return core.to_indices(solution.assignment)

    # ------------------------------------------------------------------ LP
    def _solve_lp(self, core: Problem, start: float, log: list[str]) -> _Outcome | None:
        """The LP relaxation of ``core`` rounded per node, within the time left: ``optimal`` when the bound proves it
        (see Notes), else ``feasible`` (a hint); None when the LP ends otherwise or the rounding picks a forbidden
        pair."""
        from ortools.linear_solver import pywraplp

        from solvers.bound import lagrangian_bound, local_polytope

        solver = pywraplp.Solver.CreateSolver("GLOP")
        time_left = self._time_left(start)
        if math.isfinite(time_left):
            solver.set_time_limit(max(1, int(time_left * 1000)))
        model = local_polytope(solver, core)
        params = pywraplp.MPSolverParameters()
        params.SetIntegerParam(params.LP_ALGORITHM, params.DUAL)
        if solver.Solve(params) != pywraplp.Solver.OPTIMAL:
            log.append("lp: GLOP found no optimum; the backend decides")
            return None
        bound = lagrangian_bound(core, model)
        chosen = [0] * core.num_nodes
        value = [-math.inf] * core.num_nodes
        for (u, i), var in model.x.items():
            if var.solution_value() > value[u]:
                chosen[u], value[u] = i, var.solution_value()
        cost = core.evaluate(chosen)
        if self.backend == "cpsat":
            bound = float(math.ceil(bound))  # integer costs: the optimum is an integer
            proven = cost <= bound
        else:
            proven = cost <= bound + SCIP_MARGIN * (1 + abs(bound))
        log.append(f"lp: GLOP in {solver.wall_time() / 1000:.3f} s, bound {bound:.17g}, rounded cost {cost:.17g}"
                   f" ({'proven optimal' if proven else 'not proven'}; without the presolve offset)")
        if not math.isfinite(cost):
            return None
        return _Outcome("optimal" if proven else "feasible", tuple(chosen), min(bound, cost))

    # ------------------------------------------------------------------ CP-SAT
    def _solve_cpsat(self, core: Problem, start: float, hint: tuple[int, ...] | None, log: list[str]) -> _Outcome:
        """CP-SAT on ``core``, whose costs are already scaled to integers."""
        from ortools.sat.python import cp_model

        model = cp_model.CpModel()
        allowed = live_candidates(core)
        x = {(u, i): model.new_bool_var(f"x[{u},{i}]") for u, candidates in enumerate(allowed) for i in candidates}
        for u, candidates in enumerate(allowed):
            model.add_exactly_one(x[u, i] for i in candidates)
        # One pair variable per class pair of each edge (solvers/classes.py), tied to the sums of its classes' x
        edges = class_pairs(core)
        y: dict[tuple[tuple[int, int], int, int], Any] = {}
        for (u, v), edge in edges.items():
            rows: dict[int, list[Any]] = {a: [] for a in range(len(edge.rows))}
            cols: dict[int, list[Any]] = {b: [] for b in range(len(edge.cols))}
            for a, b, _ in edge.pairs:
                y[(u, v), a, b] = var = model.new_bool_var(f"y[{u},{v},{a},{b}]")
                rows[a].append(var)
                cols[b].append(var)
            for a, row in enumerate(edge.rows):
                model.add(cp_model.LinearExpr.sum(rows[a]) == cp_model.LinearExpr.sum([x[u, i] for i in row]))
            for b, col in enumerate(edge.cols):
                model.add(cp_model.LinearExpr.sum(cols[b]) == cp_model.LinearExpr.sum([x[v, j] for j in col]))
        # Objective
        terms = [(var, int(core.nodes[u].costs[i])) for (u, i), var in x.items()]
        terms += [(y[e, a, b], int(cost)) for e, edge in edges.items() for a, b, cost in edge.pairs]
        terms = [(var, c) for var, c in terms if c]
        model.minimize(cp_model.LinearExpr.weighted_sum([v for v, _ in terms], [c for _, c in terms]))
        if hint is not None:
            for (u, i), var in x.items():
                model.add_hint(var, hint[u] == i)
            for ((u, v), a, b), var in y.items():
                model.add_hint(var, hint[u] in edges[u, v].rows[a] and hint[v] in edges[u, v].cols[b])
        # Solve
        solver = cp_model.CpSolver()
        params = solver.parameters
        time_left = self._time_left(start)
        if math.isfinite(time_left):
            params.max_time_in_seconds = max(time_left, 1e-3)
        params.num_workers = self.workers
        params.random_seed = self.seed
        params.linearization_level = 2  # the marginals in the LP: without it CP-SAT proves nothing on real graphs
        params.probing_deterministic_time_limit = 0.1  # presolve probing (default 1.0) took 1.5 s of 2 s limits
        if self.workers > 1:
            params.interleave_search = True  # deterministic parallel search
            for subsolver in PORTFOLIO[: max(2, self.workers)]:
                params.subsolvers.append(subsolver)
        status = solver.solve(model)
        log.append(
            f"cp-sat {solver.status_name(status)} in {solver.wall_time:.3f} s: {len(x)} x, {len(y)} y, "
            f"{self.workers} worker(s); scaled objective {solver.objective_value:.17g}, "
            f"bound {solver.best_objective_bound:.17g} (without the presolve offset)"
        )
        # Read back
        if status == cp_model.MODEL_INVALID:
            raise SolverError(f"ilp: CP-SAT rejected the model: {model.validate()}")
        if status == cp_model.INFEASIBLE:
            return _Outcome("infeasible", None, math.inf)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return _Outcome("not_found", None, solver.best_objective_bound)
        chosen = tuple(next(i for i in allowed[u] if solver.boolean_value(x[u, i])) for u in range(core.num_nodes))
        return _Outcome("optimal" if status == cp_model.OPTIMAL else "feasible", chosen, solver.best_objective_bound)

    # ------------------------------------------------------------------ SCIP
    def _solve_scip(self, core: Problem, start: float, hint: tuple[int, ...] | None, log: list[str]) -> _Outcome:
        """SCIP on ``core`` (floating-point costs); its bound is the dual bound less ``SCIP_MARGIN``."""
        from ortools.linear_solver import pywraplp

        from solvers.bound import local_polytope

        solver = pywraplp.Solver.CreateSolver("SCIP")
        if solver is None:
            raise SolverError("ilp: OR-Tools has no SCIP solver")
        model = local_polytope(solver, core, binary_x=True)
        if hint is not None:
            solver.SetHint(list(model.x.values()), [float(hint[u] == i) for u, i in model.x])
        time_left = self._time_left(start)
        if math.isfinite(time_left):
            solver.SetTimeLimit(max(1, int(time_left * 1000)))
        solver.SetSolverSpecificParametersAsString(f"randomization/randomseedshift = {self.seed}\n")
        params = pywraplp.MPSolverParameters()
        params.SetDoubleParam(params.RELATIVE_MIP_GAP, 0.0)
        status = solver.Solve(params)
        names = {
            pywraplp.Solver.OPTIMAL: "OPTIMAL",
            pywraplp.Solver.FEASIBLE: "FEASIBLE",
            pywraplp.Solver.INFEASIBLE: "INFEASIBLE",
        }
        log.append(
            f"scip {names.get(status, f'status {status}')} in {solver.wall_time() / 1000:.3f} s: "
            f"{len(model.x)} x, {len(model.y)} y"
        )
        if status == pywraplp.Solver.INFEASIBLE:
            return _Outcome("infeasible", None, math.inf)
        if status not in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
            return _Outcome("not_found", None, None)
        chosen = [0] * core.num_nodes
        value = [-math.inf] * core.num_nodes
        for (u, i), var in model.x.items():
            if var.solution_value() > value[u]:
                chosen[u], value[u] = i, var.solution_value()
        status_name = "optimal" if status == pywraplp.Solver.OPTIMAL else "feasible"
        best = solver.Objective().BestBound()
        return _Outcome(status_name, tuple(chosen), best - SCIP_MARGIN * (1 + abs(best)))
