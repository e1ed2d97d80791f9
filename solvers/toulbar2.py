"""Exact solver: toulbar2's branch and bound (``pytoulbar2``) on the problem as a cost function network.

One toulbar2 variable per node, a unary cost function per node and a binary one per edge, costs scaled to integers
(``solvers/scaling.py``, as ``ilp`` does for CP-SAT) and forbidden entries as toulbar2's hard cost (``Top``). toulbar2
keeps a global lower bound while it searches (soft arc consistency, then the best bound over the open nodes of its
hybrid best-first search), so a search cut off by the time limit still reports a proven bound.

pytoulbar2 keeps its options and its problem in process-wide state: solves in one process must not overlap (threads),
which the experiment runner never does (a trial per process, or one at a time with ``--serial``).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from solvers.alarm import Alarm, keeping_sigint
from solvers.base import Solution, Solver, register
from solvers.errors import SolverError
from solvers.problem import Problem
from solvers.reductions import Reduction, reduce_problem
from solvers.scaling import scale_costs

UNLIMITED = 2**63 - 1
"""toulbar2's "no limit" for backtracks."""

UNUSED_CPU_LIMIT = 10**7
"""toulbar2's own timer (whole seconds of CPU time) is only armed to install its signal handler; ``Alarm`` stops the
search on the wall clock."""


@register
class Toulbar2Solver(Solver):
    """toulbar2 on the problem (after tessera's exact reductions), with costs scaled to integers.

    Parameters
    ----------
    time_limit
        Seconds for the whole call (default 60; None = unlimited), measured on the wall clock: the search is stopped
        by a signal when the time runs out (``solvers/alarm.py``) and returns the best assignment found with toulbar2's
        proven bound.
    scale
        Costs are multiplied by ``scale`` and rounded to integers; None (default) picks it as ``ilp`` does
        (``solvers/scaling.py``): exact for integer costs and costs with at most six decimals, else a power of two
        with the rounding error bound in the log.
    seed
        toulbar2's random seed.
    presolve
        Apply the exact reductions of ``solvers/reductions.py`` first (on the integer costs, so exactly) and give
        toulbar2 only the core (False: the whole problem).
    vac
        Enforce virtual arc consistency in preprocessing (toulbar2's ``-A=1``; default False, toulbar2's default): a
        bound close to the LP relaxation's: it pays off where that LP is nearly tight (grids with Potts-like costs)
        and costs a little elsewhere (docs/solvers.md).

    Notes
    -----
    Status and bound as for ``ilp``'s CP-SAT: ``optimal`` when toulbar2's bound meets its solution's cost on the
    integer costs (within ``2 * err`` of the true optimum, ``err`` the rounding error bound); the lower bound is
    ``(toulbar2's bound + offset) / scale - err``. ``infeasible`` when the search ended before the time limit without
    a solution: toulbar2 proved that every assignment hits a forbidden entry. ``not_found`` when the time (or the
    backtrack budget) ran out first.

    Examples
    --------
    >>> p = Problem.build([("a", ["x", "y"], [1, 3]), ("b", ["x", "y"], [2, 1])], [("a", "b", [[0, 5], [5, 0]])],)
    >>> sol = Toulbar2Solver(presolve=False).solve(p)
    >>> sol.status, sol.cost, dict(sol.assignment)
    ('optimal', 3.0, {'a': 'x', 'b': 'x'})
    """

    name = "toulbar2"
    searches_to_optimality = True

    def __init__(
        self,
        *,
        time_limit: float | None = 60.0,
        scale: float | None = None,
        seed: int = 0,
        presolve: bool = True,
        vac: bool = False,
        max_backtracks: int | None = None,
    ) -> None:
        super().__init__(time_limit=time_limit)
        self.scale = scale
        self.seed = seed
        self.presolve = presolve
        self.vac = vac
        self.max_backtracks = max_backtracks

    def _check_params(self) -> None:
        super()._check_params()
        if self.scale is not None and (
            isinstance(self.scale, bool)
            or not isinstance(self.scale, numbers.Real)
            or not (math.isfinite(self.scale) and self.scale > 0)
        ):
            raise SolverError(f"toulbar2: scale must be None or a positive finite number, got {self.scale!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**31:
            raise SolverError(f"toulbar2: seed must be an integer in [0, 2**31), got {self.seed!r}")
        limit = self.max_backtracks
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise SolverError(f"toulbar2: max_backtracks must be None or a non-negative integer, got {limit!r}")
        for flag in ("presolve", "vac"):
            if not isinstance(getattr(self, flag), bool):
                raise SolverError(f"toulbar2: {flag} must be True or False, got {getattr(self, flag)!r}")

    def _solve(self, problem: Problem, start: float) -> Solution:
        costs = scale_costs(problem, self.scale, solver=self.name)
        log = [costs.describe()]
        working = costs.as_problem(problem)
        if self.presolve:
            reduction = reduce_problem(working, lambda: self._check_time(start))
            log.append(f"presolve {reduction.summary} (offset {reduction.offset / costs.scale:.12g})")
        else:
            reduction = Reduction.identity(working)
        if reduction.infeasible:
            return Solution(self.name, {}, math.inf, "infeasible", lower_bound=math.inf, log=tuple(log))
        if reduction.core is None:
            chosen, scaled_bound, proven = (), 0.0, True
        else:
            found = self._search(reduction.core, start, log)
            if found is None:
                return Solution(self.name, {}, math.inf, "infeasible", lower_bound=math.inf, log=tuple(log))
            chosen, scaled_bound, proven = found
        if chosen is None:
            bound = max(0.0, (scaled_bound + reduction.offset) / costs.scale - costs.error)
            return Solution(self.name, {}, math.inf, "not_found", lower_bound=bound, log=tuple(log))
        assignment = reduction.expand(chosen)
        cost = problem.evaluate(assignment)
        bound = cost if proven and costs.error == 0 else costs.lower_bound(scaled_bound + reduction.offset, cost)
        status = "optimal" if proven else "feasible"
        return Solution(self.name, problem.to_names(assignment), cost, status, bound, log=tuple(log))

    def _search(
        self, core: Problem, start: float, log: list[str]
    ) -> tuple[tuple[int, ...] | None, float, bool] | None:
        """toulbar2 on ``core`` (integer costs) within the time left: the assignment found (None if none), the proven
        bound on the core objective and whether it is optimal; None when toulbar2 proved it infeasible."""
        pytoulbar2 = _import_pytoulbar2()
        pytoulbar2.pytb2.init()  # toulbar2's options are per thread: set them up in this one (import did in its own)
        cfn = pytoulbar2.CFN(None, resolution=0, seed=self.seed, vac=int(self.vac))
        cfn.Option.backtrackLimit = UNLIMITED if self.max_backtracks is None else self.max_backtracks  # not reset
        for u, node in enumerate(core.nodes):
            cfn.AddVariable(f"x{u}", range(len(node.candidates)))
        try:
            for u, node in enumerate(core.nodes):
                cfn.AddFunction([u], node.costs.tolist())
            for (u, v), matrix in core.pairs.items():
                self._check_time(start)
                cfn.AddFunction([u, v], matrix.ravel().tolist())  # row-major: the last variable's value varies fastest
        except cfn.Contradiction:  # posting an edge that forbids every pair
            log.append("toulbar2: a cost function forbids every assignment: proven infeasible")
            return None
        self._check_time(start)
        time_left = self._time_left(start)
        keeping_sigint(lambda: cfn.CFN.timer(UNUSED_CPU_LIMIT))  # installs toulbar2's SIGVTALRM handler
        try:
            if math.isfinite(time_left):
                with Alarm(time_left) as alarm:
                    found = cfn.Solve()
                interrupted = alarm.fired
            else:
                found, interrupted = cfn.Solve(), False
        finally:
            cfn.CFN.timerStop()
        if self.max_backtracks is not None and cfn.GetNbBacktracks() > self.max_backtracks:
            interrupted = True
        dual = float(cfn.GetDDualBound())
        nodes = cfn.GetNbNodes()
        if found is None:
            log.append(f"toulbar2: {'stopped' if interrupted else 'proven infeasible'} without a solution after "
                       f"{nodes} search nodes; bound {dual:.17g}")
            return None if not interrupted else (None, dual, False)
        values, scaled_cost, _ = found
        proven = not interrupted or dual >= scaled_cost  # a search that ran to its end proved its best solution
        bound = scaled_cost if proven else min(dual, scaled_cost)
        log.append(f"toulbar2: {'optimal' if proven else 'stopped (time or backtracks)'} after {nodes} search nodes: "
                   f"scaled cost {scaled_cost:.17g}, bound {bound:.17g} (without the presolve offset)")
        return tuple(int(value) for value in values), bound, proven


def _import_pytoulbar2() -> Any:
    try:
        import pytoulbar2
    except ImportError as exc:
        raise SolverError(f"toulbar2: pytoulbar2 is not installed ({exc}); pip install pytoulbar2") from exc
    return pytoulbar2
