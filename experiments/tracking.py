"""MLflow bookkeeping of ``tessera ablate``: one experiment per config, a parent run per invocation, a nested run per
trial. Only the driver process uses this module, so the sqlite store never has two writers; the store's URI is
checked first (``experiments.tracking_store``).

The parent run carries the config file as an artifact, the code version as tags (``tessera.version``, and when the
code is a git checkout ``mlflow.source.git.commit`` and ``tessera.git_dirty``), the config's ``repeats`` and
``num_cpus`` as params and, once it ends, the summary as metrics (``trials``, ``skipped``, ``finished``, ``failed``,
``seconds``). Each distinct problem is stored once, under the parent run, as ``problems/<sha256 of its JSON>.json``.

Each trial run carries the tags ``tessera.trial_id``, ``tessera.config_hash`` (the trial's own settings hash, which
``finished_trials`` reads back to resume), ``tessera.status`` (the solver's status, ``bound`` or ``error``),
``tessera.error`` when it failed, and ``tessera.problem_sha256`` and ``tessera.problem`` (the ``runs:/`` URI of the
problem under the parent run; ``trial_problem`` reads it). Params: every grid value, the hashes, versions, CPU and
threads; metrics: cost, lower bound, gap, solve and wall seconds, nodes, edges (and the latencies); the run's start
and end are the trial's own in its worker; artifacts: ``solution.json`` (with the plan) and ``solver.log``. A trial
that ended in an error is a FAILED run (so a rerun tries it again).
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments.config import ExperimentConfig, ExperimentError, Trial, content_hash
from experiments.tracking_store import check_tracking_uri, client, default_tracking_uri
from experiments.trials import ERROR, TrialResult

TRIAL_ID = "tessera.trial_id"
CONFIG_HASH = "tessera.config_hash"
ROLE = "tessera.role"
STATUS = "tessera.status"
ERROR_TAG = "tessera.error"
PROBLEM_HASH = "tessera.problem_sha256"
PROBLEM = "tessera.problem"
MAX_PARAM_CHARS = 500
MAX_ERROR_CHARS = 5000


def experiment_id(mlflow_client: Any, name: str) -> str:
    """The id of the experiment ``name``, created if missing."""
    found = mlflow_client.get_experiment_by_name(name)
    return found.experiment_id if found else mlflow_client.create_experiment(name)


def code_version() -> dict[str, str]:
    """Tags naming the code that runs: tessera's version and, when the code is a git checkout, its commit and
    whether it has uncommitted changes."""
    tags = {"tessera.version": importlib.metadata.version("tessera")}
    root = Path(__file__).resolve().parent.parent
    if (root / ".git").exists():
        try:
            commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                    check=True, timeout=10).stdout.strip()
            changes = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                     capture_output=True, text=True, check=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return tags
        tags |= {"mlflow.source.git.commit": commit, "tessera.git_dirty": str(bool(changes)).lower()}
    return tags


class Tracker:
    """Logs one ``ablate`` invocation of ``config``: ``start()``, ``log_trial()`` per result, ``finish()``."""

    def __init__(self, config: ExperimentConfig, tracking_uri: str | None = None) -> None:
        self.config = config
        self.client = client(tracking_uri, create=True)
        self.experiment_id = experiment_id(self.client, config.name)
        self.parent_id: str | None = None
        self._problems: set[str] = set()  # hashes of the problems stored under the parent run

    def finished_trials(self) -> set[tuple[str, str]]:
        """``(trial id, config hash)`` of every trial run of the experiment that ended FINISHED."""
        runs = self.client.search_runs(
            [self.experiment_id], filter_string=f"tags.`{ROLE}` = 'trial' and attributes.status = 'FINISHED'",
            max_results=50_000,
        )
        return {(r.data.tags[TRIAL_ID], r.data.tags[CONFIG_HASH]) for r in runs}

    def start(self) -> None:
        """Open the parent run of this invocation, with the config file and the code version."""
        tags = {ROLE: "ablate", CONFIG_HASH: self.config.config_hash, "tessera.source": self.config.source,
                **code_version()}
        run = self.client.create_run(self.experiment_id, run_name=f"ablate {time.strftime('%Y-%m-%d %H:%M:%S')}",
                                     tags=tags)
        self.parent_id = run.info.run_id
        self.client.log_batch(self.parent_id, params=_params({"repeats": self.config.repeats,
                                                                "num_cpus": self.config.num_cpus}))
        if self.config.source and Path(self.config.source).is_file():
            self.client.log_artifact(self.parent_id, self.config.source)

    def log_trial(self, trial: Trial, result: TrialResult) -> str:
        """Write one trial's nested run (tags, params, metrics, artifacts) and close it; return its run id."""
        from mlflow.entities import Metric

        tags = {ROLE: "trial", TRIAL_ID: trial.id, CONFIG_HASH: trial.config_hash, STATUS: result.status,
                "mlflow.parentRunId": self.parent_id}
        if result.error:
            tags[ERROR_TAG] = result.error[:MAX_ERROR_CHARS]
        if result.problem is not None:
            tags |= self._store_problem(result.problem)
        run_id = self.client.create_run(self.experiment_id, run_name=trial.id, tags=tags,
                                        start_time=_milliseconds(result.started_at)).info.run_id
        params = {**trial.settings(), "trial_id": trial.id, "config_hash": trial.config_hash, **result.environment}
        when = _milliseconds(result.ended_at) or int(time.time() * 1000)
        metrics = [Metric(key, value, when, 0) for key, value in result.metrics().items()]
        self.client.log_batch(run_id, metrics=metrics, params=_params(params))
        if result.solution is not None:
            self.client.log_dict(run_id, result.solution, "solution.json")
        if result.budget is not None:
            self.client.log_dict(run_id, result.budget, "budget.json")
        log = list(result.log) + ([f"error: {result.error}"] if result.error else [])
        self.client.log_text(run_id, "\n".join(log) + "\n", "solver.log")
        self.client.set_terminated(run_id, "FAILED" if result.status == ERROR else "FINISHED",
                                   end_time=_milliseconds(result.ended_at))
        return run_id

    def _store_problem(self, problem: Mapping[str, Any]) -> dict[str, str]:
        """Store ``problem`` under the parent run unless it is there already; the tags that point a trial to it."""
        digest = content_hash(problem)
        path = f"problems/{digest}.json"
        if digest not in self._problems:
            self.client.log_dict(self.parent_id, dict(problem), path)
            self._problems.add(digest)
        return {PROBLEM_HASH: digest, PROBLEM: f"runs:/{self.parent_id}/{path}"}

    def finish(self, status: str = "FINISHED", summary: Mapping[str, float] | None = None) -> None:
        """Log ``summary`` (counts and seconds) as metrics and close the parent run (``FINISHED``, ``FAILED`` or
        ``KILLED``)."""
        if self.parent_id is None:
            return
        if summary:
            from mlflow.entities import Metric

            now = int(time.time() * 1000)
            self.client.log_batch(self.parent_id, metrics=[Metric(k, float(v), now, 0) for k, v in summary.items()])
        self.client.set_terminated(self.parent_id, status)


def _milliseconds(unix_time: float) -> int | None:
    """A unix time in seconds as MLflow's milliseconds, None for 0 (unknown)."""
    return int(unix_time * 1000) if unix_time else None


def log_benchmark_run(experiment: str, name: str, params: Mapping[str, Any], metrics: Mapping[str, float],
                      data: Mapping[str, Any], tracking_uri: str | None = None) -> str:
    """One finished run of a benchmark script in ``experiment`` (created if missing): params, metrics and ``data``
    as the artifact ``result.json``; returns the run id."""
    mlflow_client = client(tracking_uri)
    run_id = mlflow_client.create_run(experiment_id(mlflow_client, experiment), run_name=name).info.run_id
    now = int(time.time() * 1000)
    from mlflow.entities import Metric

    mlflow_client.log_batch(run_id, params=_params(params),
                            metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()
                                     if v is not None and math.isfinite(v)])
    mlflow_client.log_dict(run_id, dict(data), "result.json")
    mlflow_client.set_terminated(run_id)
    return run_id


TUNE_EXPERIMENT = "tessera-tune"


def log_tune(summary: Mapping[str, Any], tracking_uri: str | None = None, experiment: str = TUNE_EXPERIMENT) -> str:
    """One finished ``tessera tune`` as a run of ``experiment``: the model, solver and measurement settings as
    params; the plan's and each baseline's measured (and, calibrated, predicted) latency as metrics; each calibration
    round's predicted and measured latency per plan as the metrics ``predicted_ms.<plan>`` and ``measured_ms.<plan>``
    at step = the round; the wall seconds of each phase as ``seconds.<phase>``; ``summary.json`` as an artifact.
    Returns the run id."""
    from mlflow.entities import Metric

    mlflow_client = client(tracking_uri)
    run_id = mlflow_client.create_run(experiment_id(mlflow_client, experiment), run_name=f"tune {summary['model']}",
                                      tags={ROLE: "tune"}).info.run_id
    costs = summary["measurements"]
    params = {"model": summary["model"], "solver": summary["solver"]["solver"], "threads": summary["threads"],
              "mcpu": summary["target"]["mcpu"], "costs": costs.get("source"),
              "timing": costs.get("context", {}).get("timing", "warm"),
              "calibrate.rounds": len(summary.get("calibration", {}).get("rounds", [])),
              **{f"version.{name}": version for name, version in summary["versions"].items()}}
    now = int(time.time() * 1000)
    plans = {"plan": summary["plan"], **{f"baseline.{name}": result for name, result in summary["baselines"].items()}}
    metrics = [Metric("solver_cost_ms", summary["solver"]["cost"], now, 0)]
    for label, result in plans.items():
        metrics.append(Metric(f"{label}.latency_ms", result["latency"]["median_ms"], now, 0))
        if result.get("predicted_ms") is not None:
            metrics.append(Metric(f"{label}.predicted_ms", result["predicted_ms"], now, 0))
    metrics += [Metric(f"seconds.{phase}", seconds, now, 0)
                for phase, seconds in summary.get("time", {}).get("phases", {}).items()]
    for entry in summary.get("calibration", {}).get("rounds", []):
        for kind in ("predicted_ms", "measured_ms"):
            metrics += [Metric(f"{kind}.{_key(label)}", value, now, entry["index"])
                        for label, value in entry[kind].items()]
    mlflow_client.log_batch(run_id, params=_params(params),
                            metrics=[m for m in metrics if m.value is not None and math.isfinite(m.value)])
    mlflow_client.log_dict(run_id, dict(summary), "summary.json")
    mlflow_client.set_terminated(run_id)
    return run_id


def _key(label: str) -> str:
    """A plan label as an MLflow metric name (``solver:auto`` -> ``solver.auto``)."""
    return label.replace(":", ".")


def _params(values: Mapping[str, Any]) -> list[Any]:
    from mlflow.entities import Param

    return [Param(key, str(value)[:MAX_PARAM_CHARS]) for key, value in values.items()]


def trial_runs(experiment: str, tracking_uri: str | None = None) -> list[Any]:
    """The latest run of every trial of ``experiment`` (MLflow ``Run`` objects), oldest trial first; the store must
    exist."""
    mlflow_client = client(tracking_uri, create=False)
    found = mlflow_client.get_experiment_by_name(experiment)
    if found is None:
        raise ExperimentError(f"no MLflow experiment named {experiment!r} in {tracking_uri or default_tracking_uri()}")
    runs = mlflow_client.search_runs([found.experiment_id], filter_string=f"tags.`{ROLE}` = 'trial'",
                                     order_by=["attributes.start_time ASC"], max_results=50_000)
    latest = {r.data.tags[TRIAL_ID]: r for r in runs}
    return list(latest.values())


def trial_problem(run: Any, tracking_uri: str | None = None) -> dict[str, Any]:
    """The problem a trial run solved, read from the parent run's artifact its ``tessera.problem`` tag names."""
    from mlflow.artifacts import download_artifacts

    with tempfile.TemporaryDirectory() as folder:
        path = download_artifacts(artifact_uri=run.data.tags[PROBLEM], dst_path=folder,
                                  tracking_uri=check_tracking_uri(tracking_uri, create=False))
        return json.loads(Path(path).read_text())
