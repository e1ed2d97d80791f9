"""Run one trial in the current process and return everything the driver logs (workers never talk to MLflow).

A solver trial solves the instance with ``solvers.solve``; an LP-bound trial computes ``solvers.bound.lp_lower_bound``.
With ``latency`` metrics a solver trial on a model instance also exports its plan (``search.export.export``, which
checks it numerically against the stock build) and times it end to end (``search.artifact.measure_latency``).
A ``SolverError``, ``ProblemError`` or ``SearchError`` (a solver refusing the instance, a bad problem file, a model
that cannot be measured) becomes a result with status ``"error"`` and the message, so one refusal never stops the
experiment.
"""

from __future__ import annotations

import importlib.metadata
import math
import os
import platform
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments.compare import LP_BOUND
from experiments.config import Trial
from search.errors import SearchError
from solvers import ProblemError, SolverError, solve

if TYPE_CHECKING:
    from experiments.tune import Extracted

ERROR = "error"
"""Status of a trial whose solver or problem raised."""

_USER_ERRORS = (SolverError, ProblemError, SearchError)

LATENCY_REPEAT = 10
"""Timed repeats of an exported plan's end-to-end latency."""


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
    numerical_error: float | None = None
    """Relative error of the exported plan's output against the stock NCHW build."""
    started_at: float = 0.0
    """Unix time the trial started and ended in its worker (shows which trials overlapped)."""
    ended_at: float = 0.0

    def metrics(self) -> dict[str, float]:
        """The finite figures, for MLflow metrics."""
        values = {"cost": self.cost, "lower_bound": self.lower_bound, "gap": self.gap, "solve_seconds": self.seconds,
                  "wall_seconds": self.wall_seconds, "nodes": self.nodes, "edges": self.edges,
                  "latency_ms": self.latency_ms, "latency_spread_ms": self.latency_spread_ms,
                  "numerical_error": self.numerical_error, "started_at": self.started_at or None,
                  "ended_at": self.ended_at or None}
        return {key: float(v) for key, v in values.items() if v is not None and math.isfinite(v)}


def run_trial(trial: Trial) -> TrialResult:
    """Generate, load or measure the trial's problem and solve it (or bound it)."""
    started_at, start = time.time(), time.perf_counter()

    def finished(**fields: Any) -> TrialResult:
        return TrialResult(**fields, wall_seconds=time.perf_counter() - start, started_at=started_at,
                           ended_at=time.time())

    environment = environment_info()
    extracted = None
    try:
        extracted = trial.problem.extract() if trial.timed_end_to_end else None
        problem = extracted.problem if extracted else trial.problem.load()
    except _USER_ERRORS as exc:
        return finished(trial_id=trial.id, status=ERROR, error=str(exc), environment=environment)
    shape = {"nodes": problem.num_nodes, "edges": len(problem.edges), "problem": problem.to_dict(),
             "environment": environment}
    try:
        if trial.solver == LP_BOUND:
            result = _bound(trial, problem)
        else:
            result = _solve(trial, problem)
            if extracted is not None and result["solution"]["assignment"]:
                result.update(_latency(extracted, result["solution"]["assignment"]))
    except _USER_ERRORS as exc:
        return finished(trial_id=trial.id, status=ERROR, error=str(exc), **shape)
    return finished(**result, **shape)


def _bound(trial: Trial, problem) -> dict[str, Any]:
    from solvers.bound import lp_lower_bound

    start = time.perf_counter()
    bound = lp_lower_bound(problem)
    return {"trial_id": trial.id, "status": "bound", "lower_bound": bound, "seconds": time.perf_counter() - start}


def _solve(trial: Trial, problem) -> dict[str, Any]:
    solution = solve(problem, trial.solver, **trial.params)
    cost = None if math.isinf(solution.cost) else solution.cost
    bound = solution.cost if solution.optimal else solution.lower_bound
    return {"trial_id": trial.id, "status": solution.status, "cost": cost, "lower_bound": bound,
            "gap": solution.gap, "seconds": solution.seconds, "solution": solution.to_dict(), "log": solution.log}


def _latency(extracted: Extracted, assignment: dict[str, str]) -> dict[str, float]:
    """Export the plan of ``assignment`` (checked against the stock build) and time it end to end."""
    from search.artifact import load_artifact, measure_latency
    from search.costs import plan_from_assignment
    from search.export import export, make_target

    threads = extracted.problem.meta["threads"]
    plan = plan_from_assignment(assignment, extracted.model, extracted.args)
    compiled = export(extracted.graph, plan, target=make_target(threads), threads=threads, seed=extracted.args["seed"])
    with tempfile.TemporaryDirectory(prefix="tessera-trial-") as scratch:
        compiled.save(Path(scratch) / "artifact")
        latency = measure_latency(load_artifact(Path(scratch) / "artifact"), repeat=LATENCY_REPEAT, threads=threads)
    return {"latency_ms": latency.median_ms, "latency_spread_ms": latency.spread_ms,
            "numerical_error": compiled.manifest["numerical_check"]["relative_error"]}


def environment_info() -> dict[str, Any]:
    """Where a trial ran: versions, CPU model, usable cores and thread settings."""
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
        "cpu": _cpu_model(),
        "cores": len(os.sched_getaffinity(0)),
        "threads.omp": os.environ.get("OMP_NUM_THREADS", "unset"),
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
