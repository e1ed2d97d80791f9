"""Run one trial in the current process and return everything the driver logs (workers never talk to MLflow).

A solver trial solves the instance with ``solvers.solve``; an LP-bound trial computes ``solvers.bound.lp_lower_bound``.
A model instance with bf16 or int8 candidates holds its solver's plan to the instance's error budget as ``tune`` does
(``experiments.budget``). With ``latency`` metrics a solver trial on a model instance also exports its plan
(``search.export.export``, which checks it numerically against the stock build) and times it end to end
(``search.artifact.measure_latency``).
A ``SolverError``, ``ProblemError`` or ``SearchError`` (a solver refusing the instance, a bad problem file, a model
that cannot be measured) becomes a result with status ``"error"`` and the message, so one refusal never stops the
experiment; any other exception is the runner's to record (as ``Type: message``), on Ray and in-process alike.
"""

from __future__ import annotations

import importlib.metadata
import math
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from experiments.compare import LP_BOUND
from experiments.config import Trial
from experiments.progress import describe
from search.errors import SearchError
from search.host import host
from solvers import ProblemError, SolverError, solve

if TYPE_CHECKING:
    from experiments.extraction import Extracted

ERROR = "error"
"""Status of a trial whose solver or problem raised."""

_USER_ERRORS = (SolverError, ProblemError, SearchError)

LATENCY_REPEAT = 10
"""Interleaved rounds timing an exported plan and the uniform baselines end to end."""


@dataclass(frozen=True)
class TrialResult:
    """What a trial produced: status, figures (None when not applicable), artifacts and where it ran."""

    trial_id: str
    status: str
    """A solver's status (``optimal``, ``feasible``, ``infeasible``, ``not_found``), ``bound`` or ``error``."""
    cost: float | None = None
    lower_bound: float | None = None
    gap: float | None = None
    seconds: float = 0.0
    """Solve (or bound) seconds as measured by the solver; ``wall_seconds`` includes problem generation."""
    wall_seconds: float = 0.0
    error: str | None = None
    nodes: int = 0
    edges: int = 0
    problem: dict[str, Any] | None = None
    solution: dict[str, Any] | None = None
    log: tuple[str, ...] = ()
    environment: dict[str, Any] = field(default_factory=dict)
    latency_ms: float | None = None
    """Median end-to-end latency of the exported plan (``latency`` metrics on a model instance)."""
    latency_spread_ms: float | None = None
    baselines_ms: dict[str, float] = field(default_factory=dict)
    """Median latency of each uniform baseline plan, timed in the same interleaved rounds as the plan."""
    measurements: int | None = None
    """Kernels and transforms measured anew to build the problem (0 when the cache had them all)."""
    numerical_error: float | None = None
    """Relative error of the exported plan's output against the stock NCHW build."""
    budget: dict[str, Any] | None = None
    """The error budget the plan was held to, with its checks (``experiments.budget.Budget``); None for fp32."""
    started_at: float = 0.0
    """Unix time the trial started and ended in its worker (its MLflow run's start and end: shows which trials
    overlapped); 0 when the trial never ran to an end in a worker."""
    ended_at: float = 0.0

    def metrics(self) -> dict[str, float]:
        """The finite figures, for MLflow metrics (the status, error and times are the run's tags and times)."""
        values = {"cost": self.cost, "lower_bound": self.lower_bound, "gap": self.gap, "solve_seconds": self.seconds,
                  "wall_seconds": self.wall_seconds, "nodes": self.nodes, "edges": self.edges,
                  "latency_ms": self.latency_ms, "latency_spread_ms": self.latency_spread_ms,
                  "numerical_error": self.numerical_error, "measurements": self.measurements}
        for name, ms in self.baselines_ms.items():
            values[f"baseline_{name}_ms"] = ms
            values[f"speedup_{name}"] = ms / self.latency_ms if self.latency_ms else None
        return {key: float(v) for key, v in values.items() if v is not None and math.isfinite(v)}


def run_trial(trial: Trial, report: Callable[[str], None] | None = None) -> TrialResult:
    """Generate, load or measure the trial's problem and solve it (or bound it); ``report`` receives a short text
    whenever the trial moves to a new stage (measuring, with its progress; solving; exporting; timing)."""
    started_at, start = time.time(), time.perf_counter()
    report = report or (lambda _: None)

    def finished(**fields: Any) -> TrialResult:
        return TrialResult(**fields, wall_seconds=time.perf_counter() - start, started_at=started_at,
                           ended_at=time.time())

    environment = environment_info()
    extracted = None
    try:
        if trial.problem.measured:
            report("measuring")
            extracted = trial.problem.extract(progress=_measuring(report))
            problem = extracted.problem
        else:
            problem = trial.problem.load()
    except _USER_ERRORS as exc:
        return finished(trial_id=trial.id, status=ERROR, error=str(exc), environment=environment)
    shape = {"nodes": problem.num_nodes, "edges": len(problem.edges), "problem": problem.to_dict(),
             "environment": environment, "measurements": None if extracted is None else extracted.new}
    try:
        report("solving")
        if trial.solver == LP_BOUND:
            result = _bound(trial, problem)
        else:
            result = _solve(trial, problem, extracted, report)
            if trial.timed_end_to_end and result["solution"]["assignment"]:
                report("exporting and timing the plan and the baselines")
                result.update(_latency(extracted, result["solution"]["assignment"]))
    except _USER_ERRORS as exc:
        return finished(trial_id=trial.id, status=ERROR, error=str(exc), **shape)
    return finished(**result, **shape)


def _bound(trial: Trial, problem) -> dict[str, Any]:
    from solvers.bound import lp_lower_bound

    start = time.perf_counter()
    bound = lp_lower_bound(problem)
    return {"trial_id": trial.id, "status": "bound", "lower_bound": bound, "seconds": time.perf_counter() - start}


def _solve(trial: Trial, problem, extracted: Extracted | None, report: Callable[[str], None]) -> dict[str, Any]:
    """The trial's solution; on a model with bf16 or int8 candidates, held to its error budget (``experiments.budget``,
    imported only then: it imports TVM, which a trial on a problem file never needs)."""
    budget = None
    if extracted is not None and extracted.precision != "fp32":
        from experiments.budget import budget_for, solve_within
        from experiments.solving import Solved

        budget = budget_for(extracted)
        solution = solve_within(extracted, lambda instance: Solved(
            {trial.solver: solve(instance, trial.solver, **trial.params)}, {}), budget, report).solutions[trial.solver]
    else:
        solution = solve(problem, trial.solver, **trial.params)
    cost = None if math.isinf(solution.cost) else solution.cost
    bound = solution.cost if solution.optimal else solution.lower_bound
    return {"trial_id": trial.id, "status": solution.status, "cost": cost, "lower_bound": bound,
            "gap": solution.gap, "seconds": solution.seconds, "solution": solution.to_dict(), "log": solution.log,
            "budget": None if budget is None else budget.to_dict()}


def _latency(extracted: Extracted, assignment: dict[str, str]) -> dict[str, Any]:
    """Export the plan of ``assignment`` and the uniform baselines (each checked against the stock build) and time
    them end to end in interleaved rounds."""
    from experiments.timing import time_plans
    from search.plan import BASELINES, baseline_plan, plan_from_assignment

    plans = {"plan": plan_from_assignment(assignment, extracted.model, extracted.args,
                                          auxiliary=extracted.problem.meta.get("auxiliary", ()))}
    plans.update({name: baseline_plan(extracted.graph, name, extracted.model, extracted.args) for name in BASELINES})
    timed = time_plans(extracted, plans, repeat=LATENCY_REPEAT)
    plan = timed.timings["plan"]
    return {"latency_ms": plan.median_ms, "latency_spread_ms": plan.latency["spread_ms"],
            "numerical_error": plan.relative_error,
            "baselines_ms": {name: timed.timings[name].median_ms for name in BASELINES}}


def _measuring(report: Callable[[str], None]) -> Callable[[Any], None]:
    """A measurement progress callback that reports at most once a second."""
    last = [0.0]

    def progress(event: Any) -> None:
        now = time.monotonic()
        if now - last[0] >= 1.0 or event.done == event.total:
            last[0] = now
            report(f"measuring: {describe(event)}")

    return progress


def environment_info() -> dict[str, Any]:
    """Where a trial ran: versions, CPU model (and LLVM's name for it), vector unit, usable cores and thread
    settings."""
    versions = {}
    for package in ("tessera", "numpy", "ortools", "ray"):
        try:
            versions[f"version.{package}"] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[f"version.{package}"] = "missing"
    return {
        **versions,
        "version.python": platform.python_version(),
        "host": platform.node(),
        "cpu": host().cpu,
        "mcpu": host().mcpu,
        "vector_unit": host().unit.name,
        "cores": len(os.sched_getaffinity(0)),
        "threads.omp": os.environ.get("OMP_NUM_THREADS", "unset"),
    }
