"""The solver conformance suite, shipped like scikit-learn's ``check_estimator``: what every solver must do, whatever
its algorithm.

``check_solver(solver)`` runs every check and raises ``AssertionError`` naming the solver, the check and the instance
at the first violation; ``solver_checks(solver)`` yields the checks as ``(name, check)`` pairs for a test runner to
report one by one. ``solver`` is a registered name or a ``Solver`` subclass, registered or not.

The checks solve tiny problems whose optimum brute force finds (``solvers.testing``): 40 seeded random problems with
forbidden entries, repeated edges and disconnected parts, and small instances of ``solvers.generators`` (chains,
random DAGs, a DenseNet with one dense block, a DenseNet-BC block of ``solvers.dense_blocks`` and the SSD graph with
one candidate per node), plus a one-node and an edge-free problem. They take a second or two for a fast solver, plus
``TIME_LIMIT`` for the time-limit check (the anytime contract of ``solvers.base.Solver``) on a grid no solver proves in
seconds.

Examples
--------
>>> check_solver("greedy")
>>> [name for name, _ in solver_checks("greedy")][:3]
['valid_assignment', 'reported_cost', 'exact_optimum']
"""

from __future__ import annotations

import functools
import json
import math
import threading
import time
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from solvers import generators
from solvers.base import Solution, Solver, Status, make_solver
from solvers.dense_blocks import dense_blocks
from solvers.errors import SolverError
from solvers.problem import Problem, ProblemError
from solvers.testing import brute_force, frustrated_grid, random_problem

TOLERANCE = 1e-6
"""Relative tolerance of every cost comparison (sums taken in another order, LP bounds)."""

TIME_LIMIT = 1.5
"""Seconds the time-limit check gives a solver; it must return within ``TIME_LIMIT + max(0.1 * TIME_LIMIT, 1 s)``."""

Factory = Callable[..., Solver]
"""Builds a fresh solver from keyword parameters (``make_solver`` bound to the solver under test)."""


@dataclass(frozen=True)
class Instance:
    """A named problem small enough for brute force, with its optimum (``inf`` when no assignment is finite)."""

    name: str
    problem: Problem
    optimum: float


@functools.cache
def instances() -> tuple[Instance, ...]:
    """The problems the checks solve, each with its brute-force optimum (computed once per process)."""
    problems = [(f"random_problem-s{seed}", random_problem(seed)) for seed in range(40)]
    problems += [(f"chain-n5-k3-s{seed}", generators.chain(5, 3, seed)) for seed in range(3)]
    problems += [(f"random-n6-k3-s{seed}", generators.random_graph(6, 3, seed)) for seed in range(3)]
    problems += [(f"densenet-1block-k2-s{seed}", generators.densenet(2, seed, blocks=(1,))) for seed in range(2)]
    problems.append(("blocks-1block-k2-s0", dense_blocks(2, 0, blocks=(1,), growth=4)))
    problems.append(("ssd-k1-s0", generators.ssd(1, 0)))
    return tuple(Instance(name, problem, brute_force(problem)[0]) for name, problem in problems)


ONE_NODE = Problem.build([("only", ["a", "b", "c"], [3.0, 1.0, 2.0])])
EDGE_FREE = Problem.build([(f"n{i}", ["a", "b"], [i % 2, 1 - i % 2]) for i in range(6)])


def _fail(instance: str, message: str) -> typing.NoReturn:
    raise AssertionError(f"instance {instance}: {message}")


def _solve(make: Factory, name: str, problem: Problem) -> Solution:
    """A fresh solver's solution; any exception is a violation (the instances are tiny and well-formed)."""
    try:
        return make().solve(problem)
    except Exception as exc:
        _fail(name, f"solve raised {type(exc).__name__}: {exc}")


def _solutions(make: Factory) -> Iterator[tuple[Instance, Solution]]:
    for instance in instances():
        yield instance, _solve(make, instance.name, instance.problem)


def _at_most(value: float, limit: float) -> bool:
    return value <= limit + TOLERANCE * max(1.0, abs(limit)) if math.isfinite(limit) else True


def _same(a: float, b: float) -> bool:
    return a == b or math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=TOLERANCE)


# ---------------------------------------------------------------------------------------------------- checks
def check_valid_assignment(make: Factory) -> None:
    """A known status; the assignment maps every node to one of its candidates, or is empty (nothing found);
    ``optimal`` and ``feasible`` come with a finite-cost assignment, ``infeasible`` and ``not_found`` without one."""
    name = make().name
    for instance, sol in _solutions(make):
        problem = instance.problem
        if sol.status not in typing.get_args(Status):
            _fail(instance.name, f"unknown status {sol.status!r}")
        if sol.solver != name:
            _fail(instance.name, f"the solution names solver {sol.solver!r}, not {name!r}")
        if sol.assignment:
            try:
                problem.to_indices(sol.assignment)
            except ProblemError as exc:
                _fail(instance.name, f"invalid assignment: {exc}")
        found = sol.status in ("optimal", "feasible")
        if found and not (sol.assignment and math.isfinite(problem.evaluate(sol.assignment))):
            _fail(instance.name, f"status {sol.status} without a finite-cost assignment")
        if not found and sol.assignment:
            _fail(instance.name, f"status {sol.status} with an assignment (it should be empty)")


def check_reported_cost(make: Factory) -> None:
    """The reported cost is the assignment's cost re-evaluated (``inf`` for an empty assignment)."""
    for instance, sol in _solutions(make):
        try:
            cost = instance.problem.evaluate(sol.assignment) if sol.assignment else math.inf
        except ProblemError as exc:
            _fail(instance.name, f"invalid assignment: {exc}")
        if not _same(sol.cost, cost):
            _fail(instance.name, f"reported cost {sol.cost} but the assignment costs {cost}")


def check_exact_optimum(make: Factory) -> None:
    """A solution with status ``optimal`` costs the brute-force optimum."""
    for instance, sol in _solutions(make):
        if sol.status == "optimal" and not (math.isfinite(instance.optimum) and _same(sol.cost, instance.optimum)):
            _fail(instance.name, f"status optimal with cost {sol.cost}, but the optimum is {instance.optimum}")


def check_lower_bound(make: Factory) -> None:
    """Every reported lower bound is at most the brute-force optimum."""
    for instance, sol in _solutions(make):
        bound = sol.lower_bound
        if bound is not None and (math.isnan(bound) or not _at_most(bound, instance.optimum)):
            _fail(instance.name, f"lower bound {bound} above the optimum {instance.optimum}")


def check_infeasible(make: Factory) -> None:
    """Status ``infeasible`` only when brute force finds no finite-cost assignment."""
    for instance, sol in _solutions(make):
        if sol.status == "infeasible" and math.isfinite(instance.optimum):
            _fail(instance.name, f"status infeasible, but an assignment costs {instance.optimum}")


def check_never_below_optimum(make: Factory) -> None:
    """No reported cost is below the brute-force optimum (what a heuristic may do is stay above it)."""
    for instance, sol in _solutions(make):
        if not _at_most(instance.optimum, sol.cost):
            _fail(instance.name, f"cost {sol.cost} below the optimum {instance.optimum}")


def check_one_node(make: Factory) -> None:
    """A single node takes its cheapest candidate."""
    sol = _solve(make, "one-node", ONE_NODE)
    if dict(sol.assignment) != {"only": "b"} or sol.cost != 1.0:
        _fail("one-node", f"assignment {dict(sol.assignment)} at cost {sol.cost}, not {{'only': 'b'}} at 1.0")


def check_edge_free(make: Factory) -> None:
    """Without edges every node takes its cheapest candidate."""
    sol = _solve(make, "edge-free", EDGE_FREE)
    if sol.cost != 0.0:
        _fail("edge-free", f"cost {sol.cost}, but every node has a candidate costing 0")


def check_deterministic(make: Factory) -> None:
    """Two fresh solvers on two equal problems return the same assignment, cost, status and bound."""
    builds = {
        "random_problem-dense-s7": lambda: random_problem(7, nodes=7, max_candidates=4, density=0.7),
        "random-n8-k3-s1": lambda: generators.random_graph(8, 3, 1),
    }
    for name, build in builds.items():
        first, second = (_solve(make, name, build()) for _ in range(2))
        outcomes = [(dict(s.assignment), s.cost, s.status, s.lower_bound) for s in (first, second)]
        if outcomes[0] != outcomes[1]:
            _fail(name, f"two solves differ: {outcomes[0]} vs {outcomes[1]}")


def check_unknown_parameter(make: Factory) -> None:
    """An unknown parameter is refused with ``SolverError`` naming it."""
    try:
        make(no_such_knob=1)
    except SolverError as exc:
        if "no_such_knob" not in str(exc):
            raise AssertionError(f"the SolverError does not name the parameter: {exc}") from exc
        return
    raise AssertionError("no_such_knob=1 was accepted")


def check_bad_time_limit(make: Factory) -> None:
    """``time_limit`` is accepted as a positive number of seconds; anything else raises ``SolverError`` naming it."""
    try:
        make(time_limit=10.0).solve(ONE_NODE)
    except Exception as exc:
        raise AssertionError(f"time_limit=10.0 was refused: {type(exc).__name__}: {exc}") from exc
    for value in (-1, 0, math.nan, "10"):
        try:
            make(time_limit=value).solve(ONE_NODE)
        except SolverError as exc:
            if "time_limit" not in str(exc):
                raise AssertionError(f"time_limit={value!r}: the SolverError does not name it: {exc}") from exc
            continue
        raise AssertionError(f"time_limit={value!r} was accepted")


def check_time_limit(make: Factory) -> None:
    """With ``time_limit=TIME_LIMIT`` on a 20 x 20 grid of random costs that no solver proves in seconds (every
    assignment finite), the call ends within ``TIME_LIMIT`` plus 10% or one second, whichever is more, with a
    finite-cost assignment (``feasible``, or ``optimal`` if it did prove it); a solver that refuses the instance
    (``SolverError``, as ``dp`` does a problem too wide to eliminate) must do so as quickly."""
    name = f"frustrated-grid-20x20-k6 with time_limit={TIME_LIMIT:g}"
    allowed = TIME_LIMIT + max(0.1 * TIME_LIMIT, 1.0)
    problem = frustrated_grid()
    solver = make(time_limit=TIME_LIMIT)
    outcome: list[Solution | SolverError] = []

    def run() -> None:
        try:
            outcome.append(solver.solve(problem))
        except SolverError as exc:
            outcome.append(exc)

    begin = time.perf_counter()
    worker = threading.Thread(target=run, daemon=True)  # a solver that ignores its limit must not hang the suite
    worker.start()
    worker.join(allowed + 5.0)
    seconds = time.perf_counter() - begin
    if worker.is_alive() or seconds > allowed:
        _fail(name, f"{'still running' if worker.is_alive() else 'returned'} after {seconds:.2f} s, more than the "
                    f"{allowed:g} s allowed")
    if not outcome:
        _fail(name, "solve raised an exception other than SolverError")
    sol = outcome[0]
    if isinstance(sol, SolverError):
        if "time limit" in str(sol):
            _fail(name, f"raised for lack of time instead of returning its best assignment: {sol}")
        return
    if not (sol.status in ("optimal", "feasible") and math.isfinite(sol.cost)):
        _fail(name, f"status {sol.status} with cost {sol.cost} after {seconds:.2f} s: every assignment is finite, so "
                    "the best found so far should have been returned")


def check_serialises(make: Factory) -> None:
    """``Solution.to_dict`` is strict JSON (no NaN or infinity) with the summary's keys and the assignment."""
    keys = {"solver", "cost", "optimal", "status", "lower_bound", "gap", "seconds", "params", "assignment"}
    for instance, sol in _solutions(make):
        try:
            data = json.loads(json.dumps(sol.to_dict(), allow_nan=False))
        except (TypeError, ValueError) as exc:
            _fail(instance.name, f"to_dict is not JSON: {exc}")
        if not keys <= set(data) or data["assignment"] != dict(sol.assignment):
            _fail(instance.name, f"to_dict lacks keys {sorted(keys - set(data))} or the assignment: {data}")


CHECKS: dict[str, Callable[[Factory], None]] = {
    "valid_assignment": check_valid_assignment,
    "reported_cost": check_reported_cost,
    "exact_optimum": check_exact_optimum,
    "lower_bound": check_lower_bound,
    "infeasible": check_infeasible,
    "never_below_optimum": check_never_below_optimum,
    "one_node": check_one_node,
    "edge_free": check_edge_free,
    "deterministic": check_deterministic,
    "unknown_parameter": check_unknown_parameter,
    "bad_time_limit": check_bad_time_limit,
    "time_limit": check_time_limit,
    "serialises": check_serialises,
}
"""Check name -> check, in the order ``check_solver`` runs them."""


# ---------------------------------------------------------------------------------------------------- entry points
def solver_checks(solver: str | type[Solver]) -> Iterator[tuple[str, Callable[[], None]]]:
    """``(name, check)`` for every check of ``CHECKS``; calling ``check()`` runs it on ``solver``.

    Parameters
    ----------
    solver : str or type
        A registered solver name or a ``Solver`` subclass (it need not be registered). Each check builds fresh
        instances with ``make_solver(solver, **params)``.

    Raises
    ------
    SolverError
        ``solver`` is not a registered name.
    TypeError
        ``solver`` is neither a name nor a ``Solver`` subclass (an instance, say: the checks need fresh ones).
    """
    if not (isinstance(solver, str) or (isinstance(solver, type) and issubclass(solver, Solver))):
        raise TypeError(f"pass a solver name or a Solver subclass, not {solver!r}")
    make = functools.partial(make_solver, solver)
    label = make().name
    for name, check in CHECKS.items():
        yield name, functools.partial(_run, f"{label}: {name}", check, make)


def _run(label: str, check: Callable[[Factory], None], make: Factory) -> None:
    try:
        check(make)
    except AssertionError as exc:
        raise AssertionError(f"{label}: {exc}") from exc


def check_solver(solver: str | type[Solver]) -> None:
    """Run every check of ``solver_checks(solver)``; the first violation raises ``AssertionError`` with the solver,
    the check and the instance in its message (``"pbqp: exact_optimum: instance chain-n5-k3-s0: ..."``)."""
    for _, check in solver_checks(solver):
        check()
