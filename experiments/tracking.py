"""MLflow bookkeeping of ``tessera ablate``: one experiment per config, a parent run per invocation, a nested run per
trial. Only the driver process uses this module, so the sqlite store never has two writers.

Each trial run carries the tags ``tessera.trial_id`` and ``tessera.config_hash`` (the trial's own settings hash);
``finished_trials`` reads them back to resume. Params: every grid value, the hashes, versions, CPU and threads; metrics:
cost, lower bound, gap, solve and wall seconds, nodes, edges; artifacts: ``problem.json``, ``solution.json`` (with the
plan) and ``solver.log``. A trial that ended in an error is a FAILED run (so a rerun tries it again).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments.config import ExperimentConfig, ExperimentError, Trial
from experiments.trials import ERROR, TrialResult

TRIAL_ID = "tessera.trial_id"
CONFIG_HASH = "tessera.config_hash"
ROLE = "tessera.role"
MAX_PARAM_CHARS = 500


def default_tracking_uri() -> str:
    """``sqlite:///<cwd>/mlflow.db``."""
    return f"sqlite:///{Path.cwd() / 'mlflow.db'}"


def client(tracking_uri: str | None = None):
    """An ``MlflowClient`` on ``tracking_uri`` (default: ``default_tracking_uri()``), telemetry off."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri or default_tracking_uri())


def experiment_id(mlflow_client: Any, name: str) -> str:
    """The id of the experiment ``name``, created if missing."""
    found = mlflow_client.get_experiment_by_name(name)
    return found.experiment_id if found else mlflow_client.create_experiment(name)


class Tracker:
    """Logs one ``ablate`` invocation of ``config``: ``start()``, ``log_trial()`` per result, ``finish()``."""

    def __init__(self, config: ExperimentConfig, tracking_uri: str | None = None) -> None:
        self.config = config
        self.client = client(tracking_uri)
        self.experiment_id = experiment_id(self.client, config.name)
        self.parent_id: str | None = None

    def finished_trials(self) -> set[tuple[str, str]]:
        """``(trial id, config hash)`` of every trial run of the experiment that ended FINISHED."""
        runs = self.client.search_runs(
            [self.experiment_id], filter_string=f"tags.`{ROLE}` = 'trial' and attributes.status = 'FINISHED'",
            max_results=50_000,
        )
        return {(r.data.tags[TRIAL_ID], r.data.tags[CONFIG_HASH]) for r in runs}

    def start(self, planned: int, skipped: int) -> None:
        """Open the parent run of this invocation."""
        tags = {ROLE: "ablate", CONFIG_HASH: self.config.config_hash, "tessera.source": self.config.source}
        run = self.client.create_run(self.experiment_id, run_name=f"ablate {time.strftime('%Y-%m-%d %H:%M:%S')}",
                                     tags=tags)
        self.parent_id = run.info.run_id
        self.client.log_batch(self.parent_id, params=_params({"trials.planned": planned, "trials.skipped": skipped,
                                                                "repeats": self.config.repeats,
                                                                "num_cpus": self.config.num_cpus}))

    def log_trial(self, trial: Trial, result: TrialResult) -> str:
        """Write one trial's nested run (params, metrics, artifacts) and close it; return its run id."""
        from mlflow.entities import Metric

        tags = {ROLE: "trial", TRIAL_ID: trial.id, CONFIG_HASH: trial.config_hash, "mlflow.parentRunId": self.parent_id}
        if result.error:
            tags["tessera.error"] = result.error[:5000]
        run_id = self.client.create_run(self.experiment_id, run_name=trial.id, tags=tags).info.run_id
        params = {**trial.settings(), "trial_id": trial.id, "config_hash": trial.config_hash, "status": result.status,
                  **result.environment}
        now = int(time.time() * 1000)
        metrics = [Metric(key, value, now, 0) for key, value in result.metrics().items()]
        self.client.log_batch(run_id, metrics=metrics, params=_params(params))
        if result.problem is not None:
            self.client.log_dict(run_id, result.problem, "problem.json")
        if result.solution is not None:
            self.client.log_dict(run_id, result.solution, "solution.json")
        log = list(result.log) + ([f"error: {result.error}"] if result.error else [])
        self.client.log_text(run_id, "\n".join(log) + "\n", "solver.log")
        self.client.set_terminated(run_id, "FAILED" if result.status == ERROR else "FINISHED")
        return run_id

    def finish(self, status: str = "FINISHED") -> None:
        """Close the parent run (``FINISHED``, ``FAILED`` or ``KILLED``)."""
        if self.parent_id is not None:
            self.client.set_terminated(self.parent_id, status)


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
    at step = the round; ``summary.json`` as an artifact. Returns the run id."""
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
    """The latest run of every trial of ``experiment`` (MLflow ``Run`` objects), oldest trial first."""
    mlflow_client = client(tracking_uri)
    found = mlflow_client.get_experiment_by_name(experiment)
    if found is None:
        raise ExperimentError(f"no MLflow experiment named {experiment!r} in {tracking_uri or default_tracking_uri()}")
    runs = mlflow_client.search_runs([found.experiment_id], filter_string=f"tags.`{ROLE}` = 'trial'",
                                     order_by=["attributes.start_time ASC"], max_results=50_000)
    latest = {r.data.tags[TRIAL_ID]: r for r in runs}
    return list(latest.values())
