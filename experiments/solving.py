"""The chosen solvers on one problem: their solutions side by side, and the best."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from search.errors import SearchError

if TYPE_CHECKING:
    from solvers.base import Solution, Solver
    from solvers.problem import Problem


def solver_names(solver: str | Sequence[str]) -> tuple[str, ...]:
    """``"pbqp"``, ``"pbqp,ilp"`` or a sequence of names as a tuple of distinct names."""
    names = tuple(n.strip() for n in (solver.split(",") if isinstance(solver, str) else solver))
    if not names or not all(names):
        raise SearchError(f"no solver named in {solver!r}")
    if len(set(names)) != len(names):
        raise SearchError(f"a solver is named twice in {solver!r}")
    return names


@dataclass(frozen=True)
class Solved:
    """Each solver's solution of one problem by name, and the error of each solver that found no plan."""

    solutions: dict[str, Solution]
    errors: dict[str, str]

    @property
    def best(self) -> str:
        """The solver whose plan costs least."""
        return min(self.solutions, key=lambda name: self.solutions[name].cost)


def make_solvers(solver: str | Sequence[str], time_limit: float | None) -> list[Solver]:
    """The solvers named in ``solver`` (see ``solver_names``), each with ``time_limit`` if given."""
    from solvers.base import make_solver

    params = {} if time_limit is None else {"time_limit": time_limit}
    return [make_solver(name, **params) for name in solver_names(solver)]



def solve_all(problem: Problem, chosen: list[Solver]) -> Solved:
    """Each solver's solution (with the LP bound) by name, and the error of each that found no plan. A single
    solver's failure is raised; with several, only all of them failing is."""
    from solvers import solve
    from solvers.errors import SolverError

    solutions, errors = {}, {}
    for instance in chosen:
        try:
            solution = solve(problem, instance, bound=True)
            if not solution.assignment:
                raise SolverError(f"{instance.name} found no finite-cost plan (status: {solution.status})")
        except SolverError as exc:
            if len(chosen) == 1:
                raise
            errors[instance.name] = str(exc)
            continue
        solutions[instance.name] = solution
    if not solutions:
        raise SolverError("no solver found a plan: " + "; ".join(f"{n}: {e}" for n, e in errors.items()))
    return Solved(solutions, errors)
