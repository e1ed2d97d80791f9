"""The default solver: exact reductions, then the exact method the core's shape suits, within one time limit.

1. Costs are scaled to integers (``solvers/scaling.py``) and the exact reductions of ``solvers/reductions.py`` fold
   away every node of degree at most two or with one allowed candidate: chains, trees and series-parallel graphs end
   here, proven optimal.
2. A narrow core goes to elimination (``dp``): when a greedy min-fill order keeps every table within
   ``max_table_entries``, dynamic programming proves the optimum in about the time it takes to fill those tables.
3. Any other core goes to toulbar2's branch and bound, first as it is for ``PLAIN_BACKTRACKS`` backtracks, then, if
   that did not settle it, with virtual arc consistency in preprocessing (``vac``) for the time left less a reserve.
   Plain toulbar2 proved the dense constrained instances (radio-link frequency assignment) and the DNN-shaped ones
   faster than ``ilp``; where the LP relaxation is nearly tight and toulbar2's own bound weak (grids with Potts-like
   costs), VAC, a bound close to that LP's, lets toulbar2 prove them faster than ``ilp``, and it costs a little
   where plain toulbar2 suffices, hence the plain attempt first. CP-SAT never decides here: it proved nothing that
   toulbar2 with VAC did not prove faster. The measurements behind these rules: docs/solvers.md, "The auto
   solver and toulbar2".
4. If that ends without any assignment (out of time on a hard instance), PBQP's heuristic gets the reserve, so a
   finite assignment is returned whenever one is found in time.

The log says which step decided and why.
"""

from __future__ import annotations

import math
from dataclasses import replace

from solvers.base import Solution, Solver, register
from solvers.dp import DPSolver, check_table_cap
from solvers.errors import SolverError
from solvers.pbqp import PBQPSolver
from solvers.problem import Problem
from solvers.reductions import reduce_problem
from solvers.scaling import scale_costs
from solvers.toulbar2 import Toulbar2Solver

MAX_TABLE_ENTRIES = 3e4
"""Largest elimination table auto lets ``dp`` build: between the table sizes where ``dp`` was measured faster and
slower than toulbar2 on random-cost grids (docs/solvers.md); either side of it both take milliseconds."""

PLAIN_BACKTRACKS = 1000
"""Backtracks toulbar2 gets without VAC before auto runs it again with VAC: more than plain toulbar2 needed on the
instances it proved at all but one, a small part of a second where it needs VAC (docs/solvers.md). A count, not
seconds, so that the choice is the same on any machine."""

RESERVE = 0.05
"""Share of the time limit kept back for PBQP when toulbar2 finds nothing (at most ``MAX_RESERVE`` seconds)."""

MAX_RESERVE = 2.0


@register
class AutoSolver(Solver):
    """Reductions, then elimination for a narrow core or toulbar2 (then with VAC) for any other, one time limit.

    Parameters
    ----------
    time_limit
        Seconds for the whole call (default 60; None = unlimited), shared by the steps in order.
    max_table_entries
        Largest elimination table before a core counts as too wide for ``dp`` (default ``MAX_TABLE_ENTRIES``).

    Notes
    -----
    Status and bound are those of the step that decided, carried back through the reductions: ``optimal`` with the
    cost as bound when the reductions, ``dp`` or toulbar2 proved it (within twice the rounding error bound of the
    integer costs, logged, when the costs are not integers or short decimals), ``feasible`` with toulbar2's bound
    when the time ran out, ``infeasible`` when a step proved that every assignment hits a forbidden entry.

    Examples
    --------
    >>> p = Problem.build([("a", ["x", "y"], [1, 3]), ("b", ["x", "y"], [2, 1])], [("a", "b", [[0, 5], [5, 0]])])
    >>> sol = AutoSolver().solve(p)
    >>> sol.status, sol.cost, sol.log[-1]
    ('optimal', 3.0, 'auto: the reductions solved the problem')
    """

    name = "auto"
    searches_to_optimality = True

    def __init__(self, *, time_limit: float | None = 60.0, max_table_entries: float = MAX_TABLE_ENTRIES) -> None:
        super().__init__(time_limit=time_limit)
        self.max_table_entries = max_table_entries

    def _check_params(self) -> None:
        super()._check_params()
        check_table_cap(self.name, self.max_table_entries)

    def _solve(self, problem: Problem, start: float) -> Solution:
        costs = scale_costs(problem, solver=self.name)
        log = [costs.describe()]
        reduction = reduce_problem(costs.as_problem(problem), lambda: self._check_time(start))
        log.append(f"presolve {reduction.summary} (offset {reduction.offset / costs.scale:.12g})")
        if reduction.infeasible:
            log.append("auto: the reductions proved every assignment forbidden")
            return Solution(self.name, {}, math.inf, "infeasible", lower_bound=math.inf, log=tuple(log))
        if reduction.core is None:
            log.append("auto: the reductions solved the problem")
            chosen = reduction.expand()
            cost = problem.evaluate(chosen)
            bound = costs.lower_bound(reduction.offset, cost)
            return Solution(self.name, problem.to_names(chosen), cost, "optimal", bound, log=tuple(log))
        core_solution = self._solve_core(reduction.core, start, log)
        log += [f"  {line}" for line in core_solution.log]
        if core_solution.status == "infeasible":
            return Solution(self.name, {}, math.inf, "infeasible", lower_bound=math.inf, log=tuple(log))
        bound = None
        if core_solution.lower_bound is not None:
            bound = max(0.0, (core_solution.lower_bound + reduction.offset) / costs.scale - costs.error)
        if not core_solution.assignment:
            return Solution(self.name, {}, math.inf, "not_found", lower_bound=bound, log=tuple(log))
        chosen = reduction.expand(reduction.core.to_indices(core_solution.assignment))
        cost = problem.evaluate(chosen)
        optimal = core_solution.status == "optimal"
        bound = cost if optimal and costs.error == 0 else None if bound is None else min(cost, bound)
        status = "optimal" if optimal else "feasible"
        return Solution(self.name, problem.to_names(chosen), cost, status, bound, log=tuple(log))

    def _solve_core(self, core: Problem, start: float, log: list[str]) -> Solution:
        """The core's solution (integer costs) from the step its shape calls for; its log is the step's."""
        left = self._time_left(start)
        try:
            solution = DPSolver(time_limit=_limit(left), max_table_entries=self.max_table_entries).solve(core)
        except SolverError:  # too wide: refused before any table was built
            log.append(f"auto: {core.num_nodes} nodes left; elimination would need a table of more than "
                       f"{self.max_table_entries:g} entries: toulbar2")
        else:
            log.append(f"auto: {core.num_nodes} nodes left, narrow (every elimination table within "
                       f"{self.max_table_entries:g} entries): elimination (dp)")
            return solution
        left = self._time_left(start)
        reserve = min(MAX_RESERVE, RESERVE * left) if math.isfinite(left) else 0.0
        self._check_time(start)
        solution = Toulbar2Solver(time_limit=_limit(left - reserve), presolve=False,
                                  max_backtracks=PLAIN_BACKTRACKS).solve(core)
        if solution.status not in ("optimal", "infeasible") and self._time_left(start) > reserve:
            log.append(f"auto: toulbar2 without VAC stopped unproven (at most {PLAIN_BACKTRACKS} backtracks): "
                       "toulbar2 with VAC")
            first = solution
            second = Toulbar2Solver(time_limit=_limit(self._time_left(start) - reserve), presolve=False,
                                    vac=True).solve(core)
            solution = second if second.cost <= first.cost or second.optimal else first
            bounds = [s.lower_bound for s in (first, second) if s.lower_bound is not None]
            solution = replace(solution, lower_bound=max(bounds, default=None), log=first.log + second.log,
                               status="optimal" if second.optimal else solution.status)
        if solution.status != "not_found":
            return solution
        self._check_time(start)
        log.append("auto: toulbar2 found no assignment in time: pbqp's heuristic")
        fallback = PBQPSolver(time_limit=_limit(self._time_left(start))).solve(core)
        return Solution(self.name, fallback.assignment, fallback.cost,
                        "feasible" if fallback.assignment else "not_found", lower_bound=solution.lower_bound,
                        log=solution.log + fallback.log)


def _limit(seconds: float) -> float | None:
    """A sub-solver's time limit: None when unlimited, never zero or negative."""
    return None if math.isinf(seconds) else max(seconds, 1e-3)
