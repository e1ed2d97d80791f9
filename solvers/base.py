"""The solver interface: one abstract ``Solver``, the name -> class registry, and ``solve`` for notebooks.

The built-in solvers register themselves when ``solvers`` is imported (``solvers/__init__.py`` imports their modules),
so ``SOLVERS`` is complete as soon as any part of the package is."""

from __future__ import annotations

import inspect
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

from solvers.bound import lp_lower_bound
from solvers.errors import SolverError
from solvers.problem import Problem

Status = Literal["optimal", "feasible", "infeasible", "not_found"]
"""``optimal``: proven; ``feasible``: a finite-cost assignment, not proven optimal; ``infeasible``: proven that no
finite-cost assignment exists; ``not_found``: no finite-cost assignment found and nothing proven."""


class TimeUp(SolverError):
    """The time limit ran out (raised by ``Solver._check_time``). A solver catches it to return the best assignment
    it has; ``Solver.solve`` turns one that escapes into status ``not_found``, so no caller ever sees it."""


@dataclass(frozen=True)
class Solution:
    """What a solve returns. ``assignment`` maps node name to candidate name (empty when nothing was found)."""

    solver: str
    assignment: Mapping[str, str]
    cost: float
    status: Status
    lower_bound: float | None = None
    seconds: float = 0.0
    params: Mapping[str, Any] = field(default_factory=dict)
    log: tuple[str, ...] = ()

    @property
    def optimal(self) -> bool:
        return self.status == "optimal"

    @property
    def gap(self) -> float | None:
        """Relative gap ``(cost - lower_bound) / cost`` (0 when both are 0); None without a bound or a solution."""
        if self.lower_bound is None or math.isinf(self.cost):
            return None
        if self.optimal:
            return 0.0
        return relative_gap(self.cost, self.lower_bound)

    def to_dict(self) -> dict[str, Any]:
        """The JSON summary printed by ``tessera solve``; an infinite cost (nothing found) or bound (proven
        infeasible, see ``status``) is written as null, which strict JSON can hold."""
        return {
            "solver": self.solver,
            "cost": None if math.isinf(self.cost) else self.cost,
            "optimal": self.optimal,
            "status": self.status,
            "lower_bound": None if self.lower_bound is None or math.isinf(self.lower_bound) else self.lower_bound,
            "gap": self.gap,
            "seconds": round(self.seconds, 6),
            "params": dict(self.params),
            "assignment": dict(self.assignment),
        }


def relative_gap(cost: float, bound: float) -> float:
    """``(cost - bound) / cost``, clipped at 0; 0 when cost is 0."""
    if cost <= 0:
        return 0.0
    return max(0.0, (cost - bound) / cost)


class Solver(ABC):
    """Base of every solver. ``__init__`` stores keyword parameters; ``solve`` validates and runs.

    Subclasses set ``name``, take their parameters as keyword arguments of ``__init__`` (each stored under the same
    attribute name, as in scikit-learn) and implement ``_solve``. ``time_limit`` (seconds, None = unlimited) is common
    to all solvers and covers the whole call (model building, LP, search). The anytime contract: when the time runs
    out, a solver returns the best finite-cost assignment it has found (status ``feasible``, with the best bound it has
    proven), or status ``not_found`` with an empty assignment when it has found none; it never raises for lack of time
    and never substitutes another solver's answer. ``_check_time`` raises ``TimeUp``, which ``solve`` turns into
    ``not_found`` if the solver lets it escape.
    """

    name: ClassVar[str]
    searches_to_optimality: ClassVar[bool] = False
    """Whether the solver searches until it proves its answer optimal, so that it runs as long as it is let:
    comparisons give such solvers their time limit."""

    def __init__(self, *, time_limit: float | None = None) -> None:
        self.time_limit = time_limit

    def get_params(self) -> dict[str, Any]:
        """Parameters as passed to ``__init__`` (for logging and reproduction)."""
        names = [
            p.name
            for cls in type(self).__mro__
            if "__init__" in vars(cls)
            for p in inspect.signature(cls.__init__).parameters.values()
            if p.kind is p.KEYWORD_ONLY
        ]
        return {n: getattr(self, n) for n in dict.fromkeys(names)}

    def _check_params(self) -> None:
        """Validate parameters; subclasses extend and call ``super()._check_params()``."""
        if self.time_limit is not None and not (
            isinstance(self.time_limit, (int, float)) and self.time_limit > 0 and math.isfinite(self.time_limit)
        ):
            raise SolverError(f"{self.name}: time_limit must be a positive number of seconds, got {self.time_limit!r}")

    def solve(self, problem: Problem) -> Solution:
        """Solve ``problem``; the returned cost is always re-evaluated from the assignment."""
        self._check_params()
        start = time.perf_counter()
        try:
            solution = self._solve(problem, start)
        except TimeUp as exc:
            solution = Solution(self.name, {}, math.inf, "not_found", log=(f"{exc}; nothing found by then",))
        seconds = time.perf_counter() - start
        if solution.assignment:
            cost = problem.evaluate(solution.assignment)
        else:
            cost = math.inf
        return replace(solution, cost=cost, seconds=seconds, params=self.get_params(), solver=self.name)

    @abstractmethod
    def _solve(self, problem: Problem, start: float) -> Solution:
        """Do the work; ``start`` is the ``time.perf_counter()`` at which the solve began (for the time limit)."""

    def _time_left(self, start: float) -> float:
        """Seconds left before ``time_limit`` (inf without a limit)."""
        if self.time_limit is None:
            return math.inf
        return self.time_limit - (time.perf_counter() - start)

    def _check_time(self, start: float) -> None:
        """Raise ``TimeUp`` once the time limit has run out."""
        if self._time_left(start) <= 0:
            raise TimeUp(f"{self.name}: time limit of {self.time_limit:g} s reached")


SOLVERS: dict[str, type[Solver]] = {}


def register(cls: type[Solver]) -> type[Solver]:
    """Class decorator adding a solver to the registry under ``cls.name``."""
    SOLVERS[cls.name] = cls
    return cls


def make_solver(solver: str | type[Solver] | Solver, **params: Any) -> Solver:
    """An instance from a registered name or a ``Solver`` subclass (with parameters), or an instance passed through
    unchanged. Unknown names and parameters, and bad parameter values, raise ``SolverError`` (so a bad time limit is
    refused before the work that leads to the solve)."""
    if isinstance(solver, Solver):
        if params:
            raise SolverError("parameters can only be given with a solver name or class, not with an instance")
        return solver
    if isinstance(solver, type) and issubclass(solver, Solver):
        cls = solver
    elif isinstance(solver, str) and solver in SOLVERS:
        cls = SOLVERS[solver]
    else:
        raise SolverError(f"unknown solver {solver!r}; choose from {', '.join(sorted(SOLVERS))}")
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self"}
    unknown = set(params) - accepted
    if unknown:
        raise SolverError(
            f"{cls.name}: unknown parameter(s) {', '.join(sorted(unknown))}; it takes {', '.join(sorted(accepted))}"
        )
    instance = cls(**params)
    instance._check_params()
    return instance


def solve(
    problem: Problem, solver: str | type[Solver] | Solver = "auto", *, bound: bool = False, **params: Any
) -> Solution:
    """Solve ``problem`` with a solver chosen by name (default ``auto``, or a class, or an instance); ``bound=True``
    adds the LP lower bound (computed after the solve, outside its time limit).

    Examples
    --------
    >>> from solvers.problem import Problem
    >>> p = Problem.build([("a", ["x", "y"], [1, 2]), ("b", ["x", "y"], [2, 1])], [("a", "b", [[0, 5], [5, 0]])])
    >>> solve(p, "dp").cost
    3.0
    """
    solution = make_solver(solver, **params).solve(problem)
    if bound:
        lp = lp_lower_bound(problem)
        best = lp if solution.lower_bound is None else max(lp, solution.lower_bound)
        solution = replace(solution, lower_bound=min(best, solution.cost))
    return solution
