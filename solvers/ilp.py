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
from typing import Any

from solvers.base import Solution, Solver, TimeUp, register
from solvers.classes import class_pairs, live_candidates
from solvers.dominance import prune_dominated
from solvers.errors import SolverError
from solvers.problem import Problem
from solvers.reductions import Reduction, reduce_problem
from solvers.scaling import scale_costs

BACKENDS = ("cpsat", "scip")

HINT_BRANCH = 1
"""The hint is PBQP's with ``branch=1`` (every candidate of the core's highest-degree node tried). On the DenseNet-201
problem of 2026-11-23 it finds the optimum, which one PBQP run misses by 0.03%, and with it CP-SAT proved the optimum
for each of the six seeds tried; from one run's hint, for three of six (docs/solvers.md, "Inside ilp")."""

SCIP_MARGIN = 1e-6
"""SCIP's dual bound is lowered by ``SCIP_MARGIN * (1 + |bound|)`` for its floating-point tolerances."""

PORTFOLIO = ("max_lp", "core", "quick_restart", "reduced_costs", "default_lp", "pseudo_costs", "no_lp")
"""CP-SAT full-problem subsolvers, in the order they are given to workers (at least the first two, one per worker
beyond). ``max_lp`` (linearization level 2: the whole local polytope in the LP) comes first because it is what proves
optimality; ``core`` (core-based lower bounds) found the better solutions on the hard instances measured."""


class _Best:
    """The best assignment of a core found so far (candidate index per core node, None before any), whether it is
    proven optimal, and the best bound proven on the core's optimum (core cost units; inf: proven infeasible)."""

    def __init__(self, core: Problem | None) -> None:
        self.core = core
        self.chosen: tuple[int, ...] | None = None
        self.cost = math.inf
        self.proven = False
        self.bound: float | None = None

    @property
    def infeasible(self) -> bool:
        return self.bound == math.inf

    def offer(self, chosen: tuple[int, ...] | None, *, proven: bool = False) -> None:
        """Keep ``chosen`` if it is finite and cheaper than the best so far (or proven optimal)."""
        if chosen is None:
            return
        cost = 0.0 if self.core is None else self.core.evaluate(chosen)
        if math.isfinite(cost) and (cost < self.cost or (proven and cost <= self.cost)):
            self.chosen, self.cost = tuple(chosen), cost
        self.proven = self.proven or proven

    def bound_by(self, bound: float | None) -> None:
        """Raise the best bound to ``bound`` (None: no bound)."""
        if bound is not None and (self.bound is None or bound > self.bound):
            self.bound = bound


@register
class ILPSolver(Solver):
    """The local-polytope integer program, solved exactly by CP-SAT or SCIP.

    Parameters
    ----------
    time_limit
        Seconds for the whole call (default 60; None = unlimited): scaling, reductions, hints, dominance, building and
        solving the LP and the CP-SAT model all count, each step given what is left. CP-SAT needs a limit by default:
        a proof can take exponential time, and without one a hard instance would never return. When the time runs
        out the best assignment found so far (the hint, the LP's rounding or CP-SAT's) is returned as ``feasible``
        with the best bound proven (the LP's or CP-SAT's), ``not_found`` only when none was found.
    workers
        CP-SAT worker threads (default 2). One runs the base search with the full LP; more run the first ``workers``
        of ``PORTFOLIO`` (``max_lp``, the worker that proves optimality, first) in CP-SAT's deterministic interleaved
        mode. Ignored by SCIP.
    backend
        ``"cpsat"`` (default) or ``"scip"`` (the same model through ``pywraplp``, with floating-point costs).
    hint
        Solve the core with the PBQP solver first (one quick run, before the LP, so that an assignment is at hand
        whatever happens next), and when the backend runs (the LP did not prove the optimum) again with
        ``branch=1`` (``HINT_BRANCH``); the best of these and the LP's rounding is the backend's solution hint, and
        the answer if the backend finds nothing better in time.
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
        instead of 12.2 s on the per-candidate model of then (docs/solvers.md) (False: keep them, for ablation).
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
    (clipped to the cost), which is the cost itself when ``err = 0``. ``feasible``: out of time with an assignment (the
    backend's, the LP's rounding or the PBQP hint, whichever is cheapest) and the best proven bound. ``infeasible``:
    proven that no finite-cost assignment exists (``lower_bound`` inf). ``not_found``: out of time before any finite
    assignment was found (``hint=False``, or every hint hit a forbidden entry). SCIP's
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
    searches_to_optimality = True

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
            costs = scale_costs(problem, self.scale, solver=self.name)
            log.append(costs.describe())
            scale, error, working = costs.scale, costs.error, costs.as_problem(problem)
        else:
            scale, error, working = 1.0, 0.0, problem
        if self.presolve:  # out of time here (milliseconds): nothing found, not_found
            reduction = reduce_problem(working, lambda: self._check_time(start))
            log.append(f"presolve {reduction.summary} (offset {reduction.offset / scale:.12g})")
        else:
            reduction = Reduction.identity(working)
        if reduction.infeasible:
            return Solution(self.name, {}, math.inf, "infeasible", lower_bound=math.inf, log=tuple(log))
        if reduction.core is None:
            best = _Best(None)
            best.offer((), proven=True)
            best.bound_by(0.0)
        else:
            best = self._solve_core(reduction.core, start, log)
        if best.infeasible:
            return Solution(self.name, {}, math.inf, "infeasible", lower_bound=math.inf, log=tuple(log))
        bound = None
        if best.bound is not None and math.isfinite(best.bound):
            bound = (best.bound + reduction.offset) / scale - error
        if best.chosen is None:
            known = None if bound is None else max(0.0, bound)
            return Solution(self.name, {}, math.inf, "not_found", lower_bound=known, log=tuple(log))
        chosen = reduction.expand(best.chosen)
        cost = problem.evaluate(chosen)
        if best.proven and self.backend == "cpsat" and error == 0:
            bound = cost
        elif bound is not None:
            bound = min(cost, max(0.0, bound))
        status = "optimal" if best.proven else "feasible"
        return Solution(self.name, problem.to_names(chosen), cost, status, bound, log=tuple(log))

    def _solve_core(self, core: Problem, start: float, log: list[str]) -> _Best:
        """The best assignment of ``core`` within the time left: PBQP's (the quick hint), the LP's rounding, the
        branching hint and the backend's, as far as time allows; the best bound proven on the way."""
        best = _Best(core)  # pruning only forbids candidates: assignments of the pruned core are valid here
        try:
            if self.hint:
                best.offer(self._hint(core, 0, start, log))
            if self.dominance and self.backend == "cpsat":
                core, forbidden = prune_dominated(core, lambda: self._check_time(start))
                log.append(f"dominance: {forbidden} dominated candidates of the core forbidden")
            if self.lp_first:
                self._solve_lp(core, start, best, log)
            if not best.proven:
                if self.hint:
                    best.offer(self._hint(core, HINT_BRANCH, start, log))
                solve_core = self._solve_scip if self.backend == "scip" else self._solve_cpsat
                solve_core(core, start, best, log)
        except TimeUp as exc:
            found = "no assignment" if best.chosen is None else f"the best assignment found, cost {best.cost:.17g}"
            log.append(f"{exc}: returning {found} (without the presolve offset)")
        return best

    def _hint(self, core: Problem, branch: int, start: float, log: list[str]) -> tuple[int, ...] | None:
        """The PBQP solver's assignment for ``core`` with ``branch`` within the time left, or None if it has no
        finite one."""
        from solvers.pbqp import PBQPSolver

        self._check_time(start)
        time_left = self._time_left(start)
        solution = PBQPSolver(time_limit=time_left if math.isfinite(time_left) else None, branch=branch).solve(core)
        if not solution.assignment:
            log.append(f"hint: none (pbqp, branch {branch}, found no finite-cost assignment: {solution.status})")
            return None
        log.append(
            f"hint: pbqp (branch {branch}) cost {solution.cost:.17g} in {solution.seconds:.3f} s "
            "(scaled, without the presolve offset)"
        )
        return core.to_indices(solution.assignment)

    # ------------------------------------------------------------------ LP
    def _solve_lp(self, core: Problem, start: float, best: _Best, log: list[str]) -> None:
        """The LP relaxation of ``core`` within the time left: its bound, and its solution rounded per node, proven
        optimal when the bound allows it (see Notes), as an offer to ``best``."""
        from ortools.linear_solver import pywraplp

        from solvers.bound import lagrangian_bound, local_polytope

        solver = pywraplp.Solver.CreateSolver("GLOP")
        model = local_polytope(solver, core, check_time=lambda: self._check_time(start))
        self._check_time(start)
        time_left = self._time_left(start)
        if math.isfinite(time_left):
            solver.set_time_limit(max(1, int(time_left * 1000)))
        params = pywraplp.MPSolverParameters()
        params.SetIntegerParam(params.LP_ALGORITHM, params.DUAL)
        if solver.Solve(params) != pywraplp.Solver.OPTIMAL:
            log.append("lp: GLOP found no optimum; the backend decides")
            self._check_time(start)
            return
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
        best.bound_by(min(bound, cost))
        if math.isfinite(cost):
            best.offer(tuple(chosen), proven=proven)

    # ------------------------------------------------------------------ CP-SAT
    def _solve_cpsat(self, core: Problem, start: float, best: _Best, log: list[str]) -> None:
        """CP-SAT on ``core``, whose costs are already scaled to integers, from ``best`` as the hint; what it finds
        and proves goes to ``best``."""
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
            self._check_time(start)
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
        hint = best.chosen
        if hint is not None:
            for (u, i), var in x.items():
                model.add_hint(var, hint[u] == i)
            for ((u, v), a, b), var in y.items():
                model.add_hint(var, hint[u] in edges[u, v].rows[a] and hint[v] in edges[u, v].cols[b])
        # Solve
        solver = cp_model.CpSolver()
        params = solver.parameters
        self._check_time(start)
        time_left = self._time_left(start)
        if math.isfinite(time_left):
            params.max_time_in_seconds = time_left
        params.num_workers = self.workers
        params.random_seed = self.seed
        params.linearization_level = 2  # the marginals in the LP: without it CP-SAT proves nothing on real graphs
        params.probing_deterministic_time_limit = 0.1  # presolve probing (default 1.0) took 1.5 s of 2 s limits
        params.catch_sigint_signal = False  # CP-SAT's own handler leaves SIGINT at its default after the solve
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
            best.bound_by(math.inf)
            return
        best.bound_by(solver.best_objective_bound)
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            chosen = tuple(next(i for i in allowed[u] if solver.boolean_value(x[u, i])) for u in range(core.num_nodes))
            best.offer(chosen, proven=status == cp_model.OPTIMAL)

    # ------------------------------------------------------------------ SCIP
    def _solve_scip(self, core: Problem, start: float, best: _Best, log: list[str]) -> None:
        """SCIP on ``core`` (floating-point costs) from ``best`` as the hint; its bound is the dual bound less
        ``SCIP_MARGIN``. What it finds and proves goes to ``best``."""
        from ortools.linear_solver import pywraplp

        from solvers.bound import local_polytope

        solver = pywraplp.Solver.CreateSolver("SCIP")
        if solver is None:
            raise SolverError("ilp: OR-Tools has no SCIP solver")
        model = local_polytope(solver, core, binary_x=True, check_time=lambda: self._check_time(start))
        if best.chosen is not None:
            solver.SetHint(list(model.x.values()), [float(best.chosen[u] == i) for u, i in model.x])
        self._check_time(start)
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
            best.bound_by(math.inf)
            return
        if status not in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
            return
        chosen = [0] * core.num_nodes
        value = [-math.inf] * core.num_nodes
        for (u, i), var in model.x.items():
            if var.solution_value() > value[u]:
                chosen[u], value[u] = i, var.solution_value()
        dual = solver.Objective().BestBound()
        best.bound_by(dual - SCIP_MARGIN * (1 + abs(dual)))
        best.offer(tuple(chosen), proven=status == pywraplp.Solver.OPTIMAL)
