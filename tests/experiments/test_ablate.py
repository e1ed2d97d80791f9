"""``tessera ablate`` / ``report`` end to end: real local Ray (started once), a real sqlite MLflow store in tmp."""

from __future__ import annotations

import contextlib
import csv
import ipaddress
import json
import os
import signal
import threading
import time

import psutil
import pytest

from experiments.cli import main
from experiments.config import LP_BOUND, parse_config
from experiments.runner import SINGLE_MACHINE, run_experiment, start_ray
from experiments.tracking import CONFIG_HASH, PROBLEM_HASH, STATUS, TRIAL_ID, client, trial_problem, trial_runs

pytestmark = pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy is deprecated")

GRID = """
repeats = 1
num_cpus = 2
[[problems]]
generator = "chain"
nodes = 20
seed = 0
candidates = 4
[[problems]]
generator = "densenet"
seed = 0
candidates = 4
[[solvers]]
name = "dp"
[[solvers]]
name = "pbqp"
"""


@pytest.fixture(scope="module", autouse=True)
def artifacts_in_tmp(tmp_path_factory):
    """MLflow puts the artifacts of an experiment it creates under ./mlruns: in a temporary folder, not here."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path_factory.mktemp("cwd"))
        yield


@pytest.fixture(scope="module")
def ray_session():
    ray, started = start_ray(num_cpus=2)
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One sqlite tracking store for the module (creating one takes seconds); tests use their own experiments."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


def write_config(path, name: str, body: str = GRID):
    path.write_text(f'name = "{name}"\n{body}')
    return path


@pytest.fixture(scope="module")
def grid(ray_session, store, tmp_path_factory):
    """The grid run once on Ray through the CLI; returns (config path, experiment name)."""
    path = write_config(tmp_path_factory.mktemp("cfg") / "grid.toml", "grid")
    assert main(["ablate", str(path), "--tracking-uri", store]) == 0
    return path, "grid"


def by_trial(experiment: str, store: str) -> dict:
    return {run.data.tags[TRIAL_ID]: run for run in trial_runs(experiment, store)}


def test_grid_runs_on_ray_and_is_read_back_from_mlflow(grid, store, tmp_path):
    runs = by_trial(grid[1], store)
    assert sorted(runs) == sorted(f"{inst}/{solver}/r0" for inst in ("chain-n20-k4-s0", "densenet-k4-s0")
                                  for solver in ("dp", "pbqp", LP_BOUND))
    pbqp = runs["chain-n20-k4-s0/pbqp/r0"]
    assert pbqp.info.status == "FINISHED"
    assert pbqp.data.params["solver"] == "pbqp" and pbqp.data.params["problem.generator"] == "chain"
    assert pbqp.data.params["problem.seed"] == "0" and pbqp.data.tags[STATUS] == "optimal"
    assert pbqp.data.params["config_hash"] == pbqp.data.tags[CONFIG_HASH]
    assert {"version.tessera", "cpu", "cores"} <= set(pbqp.data.params)
    metrics = pbqp.data.metrics
    assert metrics["nodes"] == 20 and metrics["gap"] == 0 and metrics["cost"] == metrics["lower_bound"] > 0
    bound = runs[f"chain-n20-k4-s0/{LP_BOUND}/r0"].data.metrics["lower_bound"]
    assert bound == pytest.approx(metrics["cost"], rel=1e-6)  # the LP bound is tight on a chain
    artifacts = {a.path for a in client(store).list_artifacts(pbqp.info.run_id)}
    assert artifacts == {"solution.json", "solver.log"}  # the problem is the parent run's, once per instance
    assert len({run.data.tags[PROBLEM_HASH] for run in runs.values()}) == 2
    assert len(trial_problem(pbqp, store)["nodes"]) == 20
    solution = json.loads(open(client(store).download_artifacts(pbqp.info.run_id, "solution.json", tmp_path)).read())
    assert len(solution["assignment"]) == 20 and solution["cost"] == metrics["cost"]


def test_a_failing_trial_records_its_error_and_the_others_complete(grid, store):
    runs = by_trial(grid[1], store)
    refused = runs["densenet-k4-s0/dp/r0"]
    assert refused.info.status == "FAILED" and refused.data.tags[STATUS] == "error"
    assert "too wide" in refused.data.tags["tessera.error"]
    assert "cost" not in refused.data.metrics
    others = [run for trial_id, run in runs.items() if trial_id != "densenet-k4-s0/dp/r0"]
    assert len(others) == 5 and all(run.info.status == "FINISHED" for run in others)


def test_serial_gives_the_same_results(grid, store, tmp_path):
    path = write_config(tmp_path / "serial.toml", "grid-serial")
    assert main(["ablate", str(path), "--serial", "--tracking-uri", store]) == 0
    on_ray, serial = by_trial(grid[1], store), by_trial("grid-serial", store)
    assert sorted(on_ray) == sorted(serial)
    for trial_id, run in serial.items():
        assert run.data.tags[STATUS] == on_ray[trial_id].data.tags[STATUS]
        assert run.data.tags[CONFIG_HASH] == on_ray[trial_id].data.tags[CONFIG_HASH]
        for key in ("cost", "lower_bound"):
            expected = on_ray[trial_id].data.metrics.get(key)
            assert run.data.metrics.get(key) == (None if expected is None else pytest.approx(expected, rel=1e-9))


def test_rerunning_skips_finished_trials(grid, store, capsys):
    before = len(client(store).search_runs([client(store).get_experiment_by_name(grid[1]).experiment_id]))
    assert main(["ablate", str(grid[0]), "--tracking-uri", store]) == 0
    out, err = capsys.readouterr()
    assert "6 trials, 5 already finished, 0 finished now, 1 failed" in out  # only the refused trial is tried again
    assert "[1/1] densenet-k4-s0/dp/r0: error (dp: problem too wide" in err
    runs = client(store).search_runs([client(store).get_experiment_by_name(grid[1]).experiment_id])
    assert len(runs) == before + 2  # a parent run and the retried failure


def test_a_killed_worker_is_retried(ray_session, store):
    config = parse_config({"name": "killed", "lower_bound": False,
                           "problems": [{"generator": "densenet", "seed": 0, "candidates": 8}],
                           # without dominance pruning the LP takes about 2.5 s here: time to kill it mid-solve
                           "solvers": [{"name": "ilp", "time_limit": 20.0, "workers": 1, "dominance": False}]})
    killed: list[int] = []

    def kill_the_trial_worker() -> None:
        deadline = time.monotonic() + 30
        while not killed and time.monotonic() < deadline:
            for process in psutil.Process().children(recursive=True):
                try:
                    if process.cmdline()[:1] == ["ray::run_reported"]:
                        time.sleep(0.5)  # let it get into the solve
                        os.kill(process.pid, signal.SIGKILL)
                        killed.append(process.pid)
                        return
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
            time.sleep(0.05)

    killer = threading.Thread(target=kill_the_trial_worker)
    killer.start()
    summary = run_experiment(config, tracking_uri=store)
    killer.join()
    assert killed, "no worker running the trial was found"
    assert (summary.finished, summary.failed) == (1, 0)
    (run,) = trial_runs("killed", store)
    assert run.info.status == "FINISHED" and run.data.tags[STATUS] == "optimal"
    assert run.data.metrics["solve_seconds"] > 0.5  # so the first attempt was still solving when it was killed


def test_report_writes_tables_and_plots(grid, store, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["report", grid[1], "--out", str(out), "--tracking-uri", store]) == 0
    markdown = (out / "report.md").read_text()
    assert "| chain-n20-k4-s0 | pbqp" in markdown and "error: dp: problem too wide" in markdown
    lines = (out / "report.csv").read_text().splitlines()
    assert lines[0].startswith("instance,nodes,edges,solver,runs,cost,bound,best_bound,cost_ratio")
    rows = [line.split(",") for line in lines[1:]]
    assert len(rows) == 6
    chain_pbqp = next(r for r in rows if r[0] == "chain-n20-k4-s0" and r[3] == "pbqp")
    assert float(chain_pbqp[8]) == pytest.approx(1.0)
    densenet_pbqp = next(r for r in rows if r[0] == "densenet-k4-s0" and r[3] == "pbqp")
    assert float(densenet_pbqp[8]) >= 1.0 and densenet_pbqp[1] == "303"
    for name in ("cost_ratio.png", "solve_time.png"):
        data = (out / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 5000


def test_report_of_an_unknown_experiment_is_one_error(store, capsys):
    assert main(["report", "no-such-experiment", "--tracking-uri", store]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no MLflow experiment named 'no-such-experiment'") and err.count("\n") == 1


def test_the_local_ray_listens_on_loopback_only(ray_session):
    """Every socket the embedded Ray's processes listen on (its GCS, raylet, agents, a worker) is on loopback."""
    worker = ray_session.get(ray_session.remote(lambda: os.getpid()).remote())
    processes = [psutil.Process(), *psutil.Process().children(recursive=True)]
    assert worker in {process.pid for process in processes}
    listening = []
    for process in processes:
        with contextlib.suppress(psutil.Error):  # a process that ended meanwhile
            listening += [(process.name(), connection.laddr) for connection in process.net_connections("inet")
                          if connection.status == psutil.CONN_LISTEN]
    assert len(listening) > 2 and all(_loopback(address.ip) for _, address in listening), listening
    assert SINGLE_MACHINE not in os.environ  # restored once the node started: a later join reaches other machines


def _loopback(ip: str) -> bool:
    """Whether ``ip`` is a loopback address, IPv4 mapped into IPv6 (``::ffff:127.0.0.1``, a dual-stack socket) too."""
    address = ipaddress.ip_address(ip)
    return address.is_loopback or bool(getattr(address, "ipv4_mapped", None) and address.ipv4_mapped.is_loopback)


def test_the_local_ray_lets_in_no_process_without_its_token(ray_session):
    """The embedded node takes a token as a cluster does (another user of the machine reaches loopback): a process
    without one is refused."""
    from cost_models.cluster import _lets_strangers_in

    assert os.environ["RAY_AUTH_MODE"] == "token"
    assert not _lets_strangers_in(ray_session.get_runtime_context().gcs_address)


def one_conv_onnx(path):
    """A one-convolution ONNX network (3 -> 8 channels, 8x8 input): the cheapest model to measure."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "one_conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])],
                              initializer=[weight])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_measured_trials_are_timed_end_to_end_one_at_a_time(ray_session, store, tmp_path):
    one_conv_onnx(tmp_path / "one_conv.onnx")
    body = ('lower_bound = false\nmetrics = ["solver", "latency"]\n'
            '[[problems]]\nmodel = "one_conv.onnx"\nspace_size = 1\nlayouts = "NCHW"\n'
            'cache = "costs.sqlite"\n[[solvers]]\nname = "pbqp"\n[[solvers]]\nname = "greedy"\n')
    path = write_config(tmp_path / "measured.toml", "measured", body)
    assert main(["ablate", str(path), "--tracking-uri", store]) == 0
    runs = sorted(trial_runs("measured", store), key=lambda run: run.info.start_time)
    assert [run.data.tags[TRIAL_ID] for run in runs] == [
        "one_conv-b1-s0-n1-t1-NCHW/pbqp/r0", "one_conv-b1-s0-n1-t1-NCHW/greedy/r0"]
    assert all(run.info.status == "FINISHED" and run.data.metrics["cost"] > 0 for run in runs)
    assert all(run.data.metrics["latency_ms"] > 0 and run.data.metrics["numerical_error"] < 1e-3 for run in runs)
    for name in ("nchw", "nhwc", "nchw16c"):  # the baselines, timed in the same rounds as each plan
        assert all(run.data.metrics[f"baseline_{name}_ms"] > 0 and run.data.metrics[f"speedup_{name}"] > 0
                   for run in runs)
    assert runs[0].data.metrics["measurements"] > 0 == runs[1].data.metrics["measurements"]  # cached the 2nd time
    assert runs[0].info.end_time <= runs[1].info.start_time  # one at a time on the node
    assert runs[0].data.params["problem.layouts"] == "NCHW" and (tmp_path / "costs.sqlite").is_file()
    problem = trial_problem(runs[0], store)
    assert problem["meta"]["model"].endswith("one_conv.onnx")
    assert problem["meta"]["costs"]["provider"] == "MeasuredCosts"
    assert main(["report", "measured", "--out", str(tmp_path / "report"), "--tracking-uri", store]) == 0
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "| one_conv-b1-s0-n1-t1-NCHW | pbqp |" in markdown and "speed-up over the best baseline" in markdown
    for name in ("latency.png", "predicted_vs_measured.png"):
        assert (tmp_path / "report" / name).read_bytes().startswith(b"\x89PNG")
    rows = list(csv.DictReader((tmp_path / "report" / "report.csv").open()))
    assert [float(row["latency_ms"]) for row in rows] == [pytest.approx(r.data.metrics["latency_ms"]) for r in
                                                          sorted(runs, key=lambda r: r.data.params["solver"])]
    assert all(float(row["baseline_nchw_ms"]) > 0 for row in rows)


def frustrated_grid(path, side: int = 20, k: int = 6):
    """A side x side grid with random node and edge costs: ilp cannot prove it within a minute (30 s: 2.3% gap)."""
    import numpy as np

    from solvers import Problem

    rng = np.random.default_rng(0)
    name = lambda i, j: f"n{i}_{j}"  # noqa: E731
    nodes = [(name(i, j), [f"c{c}" for c in range(k)], rng.uniform(0, 1, k)) for i in range(side) for j in range(side)]
    edges = [(name(i, j), name(i + di, j + dj), rng.uniform(0, 1, (k, k))) for i in range(side) for j in range(side)
             for di, dj in ((0, 1), (1, 0)) if i + di < side and j + dj < side]
    Problem.build(nodes, edges).save(path)
    return path


def test_a_trial_over_its_timeout_is_cancelled_and_running_trials_are_shown(ray_session, store, monkeypatch,
                                                                             tmp_path):
    import io

    from experiments import progress

    monkeypatch.setattr(progress, "LOG_SECONDS", 0.0)
    config = parse_config({"name": "timeout", "lower_bound": False, "trial_timeout": 10.0,  # greedy's, on a busy host
                           "problems": [{"file": str(frustrated_grid(tmp_path / "grid.json"))}],
                           "solvers": [{"name": "ilp", "time_limit": 60.0, "workers": 1, "dominance": False},
                                       {"name": "greedy"}]})
    stream = io.StringIO()
    start = time.monotonic()
    summary = run_experiment(config, tracking_uri=store, stream=stream)
    assert time.monotonic() - start < 40 and (summary.finished, summary.failed) == (1, 1)
    runs = by_trial("timeout", store)
    cancelled = runs["grid/ilp(time_limit=60.0,workers=1,dominance=False)/r0"]
    assert cancelled.info.status == "FAILED" and "timed out after 10 s while solving" in cancelled.data.tags[
        "tessera.error"]
    assert runs["grid/greedy/r0"].info.status == "FINISHED"
    running = [line for line in stream.getvalue().splitlines() if line.startswith("running ")]
    assert any("grid/ilp(time_limit=60.0,workers=1,dominance=False)/r0 for 0:0" in line for line in running)
