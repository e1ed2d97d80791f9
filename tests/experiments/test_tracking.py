"""The serial runner and what ``tessera ablate`` / ``report`` keep in MLflow, on a real sqlite store (no Ray): a
failing trial recorded and the rest run, bounded progress off a terminal, the parent run's config, code version and
summary, each problem stored once, and tracking URIs that cannot work refused with one line, creating nothing."""

from __future__ import annotations

import io
import math
import re

import pytest

from experiments import progress
from experiments.cli import main
from experiments.config import load_config
from experiments.runner import run_experiment
from experiments.tracking import (
    CONFIG_HASH,
    ERROR_TAG,
    PROBLEM,
    PROBLEM_HASH,
    STATUS,
    client,
    trial_problem,
    trial_runs,
)
from solvers.base import SOLVERS, Solution, Solver
from tests.cli_helpers import one_error_line

pytestmark = pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy is deprecated")

SEEDS = 45
"""Chain instances of the quick grid: 45 x (greedy, pbqp) = 90 trials."""


class FaultySolver(Solver):
    """A solver with a bug: any solve raises ``ZeroDivisionError`` (not one of the errors a trial expects)."""

    name = "faulty"

    def _solve(self, problem, start: float) -> Solution:
        return 1 / 0


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


@pytest.fixture(scope="module")
def quick_grid(store, tmp_path_factory):
    """90 quick trials on 45 distinct problems, run in-process with progress lines at most every half second (of
    silence); returns (summary, progress text, config path)."""
    path = tmp_path_factory.mktemp("cfg") / "quick.toml"
    path.write_text(f'name = "quick"\nlower_bound = false\n[[problems]]\ngenerator = "chain"\nnodes = 4\n'
                    f'candidates = 2\nseed = {list(range(SEEDS))}\n[[solvers]]\nname = "greedy"\n'
                    f'[[solvers]]\nname = "pbqp"\n')
    stream = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(path.parent)  # MLflow puts the artifacts of an experiment it creates under ./mlruns
        patch.setattr(progress, "LOG_SECONDS", 0.5)
        summary = run_experiment(load_config(path), tracking_uri=store, serial=True, stream=stream)
    return summary, stream.getvalue(), path


def parent_run(store: str, experiment: str):
    mlflow_client = client(store)
    found = mlflow_client.get_experiment_by_name(experiment)
    (run,) = mlflow_client.search_runs([found.experiment_id], filter_string="tags.`tessera.role` = 'ablate'")
    return run


def test_off_a_terminal_progress_is_a_line_per_trial_and_a_few_more(quick_grid):
    summary, text, _ = quick_grid
    assert (summary.trials, summary.finished, summary.failed) == (2 * SEEDS, 2 * SEEDS, 0)
    lines = text.splitlines()
    assert lines[0] == f"quick: {2 * SEEDS} trials, 0 already finished, {2 * SEEDS} to run in-process"
    assert re.fullmatch(rf"quick: {2 * SEEDS} finished, 0 failed in \d+:\d\d", lines[-1])
    finished = [line for line in lines if line.startswith("[")]
    assert len(finished) == 2 * SEEDS and finished[-1].startswith(f"[{2 * SEEDS}/{2 * SEEDS}] chain-n4-k2-s44/pbqp/r0")
    assert len(lines) <= 2 * SEEDS + 4  # at most a few lines naming the running trials
    assert "\x1b" not in text and "\r" not in text


def test_the_parent_run_has_the_config_the_code_version_and_the_summary(quick_grid, store, tmp_path):
    summary, _, path = quick_grid
    run = parent_run(store, "quick")
    artifacts = {a.path for a in client(store).list_artifacts(run.info.run_id)}
    assert artifacts == {"quick.toml", "problems"}
    saved = client(store).download_artifacts(run.info.run_id, "quick.toml", tmp_path)
    assert open(saved).read() == path.read_text()
    assert re.fullmatch(r"\d+\.\d+.*", run.data.tags["tessera.version"])
    assert re.fullmatch(r"[0-9a-f]{40}", run.data.tags["mlflow.source.git.commit"])  # the tests run in a checkout
    assert run.data.tags["tessera.git_dirty"] in ("true", "false")
    metrics = run.data.metrics
    assert {key: metrics[key] for key in ("trials", "skipped", "finished", "failed")} == {
        "trials": 2 * SEEDS, "skipped": 0, "finished": 2 * SEEDS, "failed": 0}
    assert metrics["seconds"] == pytest.approx(summary.seconds, rel=0.1)
    assert set(run.data.params) == {"repeats", "num_cpus"}


def test_trial_outcomes_are_tags_and_timestamps_are_the_runs_times(store, quick_grid):
    runs = trial_runs("quick", store)
    assert len(runs) == 2 * SEEDS
    for run in runs:
        assert run.data.tags[STATUS] in ("optimal", "feasible") and "status" not in run.data.params
        assert not {"started_at", "ended_at"} & set(run.data.metrics)
        assert 0 < run.info.end_time - run.info.start_time < 60_000
        assert run.data.tags[CONFIG_HASH] == run.data.params["config_hash"]


def test_each_distinct_problem_is_stored_once_under_the_parent_run(store, quick_grid):
    parent = parent_run(store, "quick")
    stored = {a.path for a in client(store).list_artifacts(parent.info.run_id, "problems")}
    runs = trial_runs("quick", store)
    assert len(stored) == SEEDS  # 45 problems, each solved by two solvers
    assert {f"problems/{run.data.tags[PROBLEM_HASH]}.json" for run in runs} == stored
    assert all(run.data.tags[PROBLEM].startswith(f"runs:/{parent.info.run_id}/problems/") for run in runs)
    assert all("problem.json" not in {a.path for a in client(store).list_artifacts(run.info.run_id)}
               for run in runs[:4])
    problem = trial_problem(runs[0], store)
    assert len(problem["nodes"]) == 4 and len(problem["edges"]) == 3


def test_serial_records_a_failing_trial_and_goes_on(store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(SOLVERS, FaultySolver.name, FaultySolver)
    path = tmp_path / "faulty.toml"
    path.write_text('name = "faulty"\nlower_bound = false\n[[problems]]\ngenerator = "chain"\nnodes = 4\n'
                    'candidates = 2\nseed = 0\n[[solvers]]\nname = "faulty"\n[[solvers]]\nname = "greedy"\n')
    stream = io.StringIO()
    summary = run_experiment(load_config(path), tracking_uri=store, serial=True, stream=stream)
    assert (summary.finished, summary.failed) == (1, 1)
    runs = {run.data.params["solver"]: run for run in trial_runs("faulty", store)}
    assert runs["faulty"].info.status == "FAILED" and runs["faulty"].data.tags[STATUS] == "error"
    assert runs["faulty"].data.tags[ERROR_TAG] == "ZeroDivisionError: division by zero"
    assert runs["greedy"].info.status == "FINISHED" and math.isfinite(runs["greedy"].data.metrics["cost"])
    assert "[1/2] chain-n4-k2-s0/faulty/r0: error (ZeroDivisionError: division by zero)" in stream.getvalue()
    assert parent_run(store, "faulty").data.metrics["failed"] == 1


def test_report_on_a_missing_store_is_one_error_and_creates_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    database = tmp_path / "missing.db"
    assert main(["report", "quick", "--tracking-uri", f"sqlite:///{database}"]) == 2
    assert f"no MLflow store at {database}" in one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []


def test_report_of_an_unknown_experiment_in_a_store_is_one_error(store, quick_grid, capsys):
    assert main(["report", "no-such-experiment", "--tracking-uri", store]) == 2
    assert "no MLflow experiment named 'no-such-experiment'" in one_error_line(capsys)


@pytest.mark.parametrize("command", ["ablate", "report", "tune"])
@pytest.mark.parametrize(("uri", "message"), [
    ("nosuchscheme://x", "is not an MLflow store"),
    ("{tmp}", "is not an MLflow store"),  # a plain path: MLflow's old file store
    ("sqlite:///{tmp}", "is a directory, not a database file"),
    ("sqlite:///{tmp}/no/such/folder/mlflow.db", "{absent}"),
    ("sqlite:///{tmp}/quick.toml", "is not an SQLite database"),
])
def test_a_tracking_uri_that_cannot_work_is_one_error_and_creates_nothing(command, uri, message, tmp_path, capsys,
                                                                         monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "quick.toml"
    config.write_text('name = "q"\n[[problems]]\ngenerator = "chain"\nnodes = 4\nseed = 0\n'
                      '[[solvers]]\nname = "greedy"\n')
    argv = {"ablate": ["ablate", str(config)], "report": ["report", "q"],
            "tune": ["tune", "resnet18", "--out", str(tmp_path / "out")]}[command]
    assert main([*argv, "--tracking-uri", uri.format(tmp=tmp_path)]) == 2
    absent = "does not exist" if command != "report" else "no MLflow store at"
    assert message.format(absent=absent) in one_error_line(capsys)
    assert [p.name for p in tmp_path.iterdir()] == ["quick.toml"]
