"""The shipped conformance suite (``solvers.checks``) over every registered solver, and the suite itself: it catches
broken solvers and passes a correct one that is not registered."""

from __future__ import annotations

import doctest
import itertools
import math
import time
from dataclasses import replace

import pytest

from solvers import SOLVERS, Problem, Solution, Solver, SolverError, checks, testing
from solvers.base import make_solver
from solvers.checks import CHECKS, check_solver, solver_checks
from solvers.greedy import GreedySolver
from solvers.testing import brute_force


@pytest.mark.parametrize("solver, check", list(itertools.product(sorted(SOLVERS), CHECKS)))
def test_contract(solver, check):
    dict(solver_checks(solver))[check]()


def test_every_builtin_solver_is_registered_on_import():
    assert {"dp", "pbqp", "ilp", "greedy"} <= set(SOLVERS)


@pytest.mark.parametrize("solver", sorted(SOLVERS))
def test_make_solver_refuses_a_bad_value_before_any_solve(solver):
    for bad in (-1, 0, math.nan, math.inf):
        with pytest.raises(SolverError, match="time_limit must be a positive number"):
            make_solver(solver, time_limit=bad)


class Exhaustive(Solver):
    """Correct by construction: enumerate every assignment, refusing problems with more than a million."""

    name = "exhaustive"

    def _solve(self, problem: Problem, start: float) -> Solution:
        if math.prod(problem.domain_sizes) > 10**6:
            raise SolverError("exhaustive: more than a million assignments to enumerate")
        optimum, best = brute_force(problem)
        if math.isinf(optimum):
            return Solution(self.name, {}, math.inf, "infeasible", lower_bound=math.inf)
        return Solution(self.name, problem.to_names(best), optimum, "optimal", lower_bound=optimum)


class Misreports(GreedySolver):
    """Greedy's assignment with half its cost reported."""

    name = "misreports"

    def solve(self, problem: Problem) -> Solution:
        solution = super().solve(problem)
        return replace(solution, cost=solution.cost / 2)


class Overclaims(GreedySolver):
    """Greedy's assignment, whenever it finds one, claimed optimal."""

    name = "overclaims"

    def _solve(self, problem: Problem, start: float) -> Solution:
        solution = super()._solve(problem, start)
        return replace(solution, status="optimal") if solution.assignment else solution


class Dawdles(GreedySolver):
    """Greedy's answer, but only after 3 s whatever the time limit (only on the time-limit check's 400-node grid)."""

    name = "dawdles"

    def _solve(self, problem: Problem, start: float) -> Solution:
        if problem.num_nodes >= 400:
            time.sleep(3.0)
        return super()._solve(problem, start)


class SwallowsParameters(Exhaustive):
    """Takes a time limit but never checks it."""

    name = "swallows"

    def _check_params(self) -> None:
        pass


def test_a_correct_solver_passes_without_being_registered():
    check_solver(Exhaustive)
    assert "exhaustive" not in SOLVERS


@pytest.mark.parametrize(
    "broken, message",
    [
        (Misreports, r"misreports: reported_cost: instance \S+: reported cost .* but the assignment costs"),
        (Overclaims, r"overclaims: exact_optimum: instance \S+: status optimal with cost .* but the optimum is"),
        (SwallowsParameters, r"swallows: bad_time_limit: time_limit=-1 was accepted"),
        (Dawdles, r"dawdles: time_limit: instance frustrated-grid-20x20-k6 with time_limit=1.5: returned after 3"),
    ],
    ids=["wrong-cost", "not-optimal", "unchecked-time-limit", "ignored-time-limit"],
)
def test_the_suite_catches_broken_solvers(broken, message):
    with pytest.raises(AssertionError, match=message):
        check_solver(broken)


def test_the_examples_run():
    assert doctest.testmod(checks).failed == 0 and doctest.testmod(testing).failed == 0


def test_instances_are_named_not_passed():
    with pytest.raises(TypeError, match="name or a Solver subclass"):
        list(solver_checks(GreedySolver()))
