"""Measuring on a real two-node Ray cluster on loopback with token authentication: ``ray start --head`` and a second
``ray start --address``, each with its own temp dir, one CPU and its own timing slot. A tiny network is measured
across both, every task once; the second node is killed mid-run and the measurement completes with nothing lost or
stored twice; a killed driver resumes; a restarted driver measures nothing; a wrong token, nothing listening and a
cluster open to anyone are one error line each.

Each driver runs in an interpreter of its own, as ``tessera extract --address`` does (Ray reads its token once per
process), printing its progress events and its figures as JSON lines.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from cost_models.cache import CostCache
from tests.experiments.test_cluster import BIN, _free_port, _stop

ROOT = Path(__file__).resolve().parents[2]
TOKEN = secrets.token_hex(32)
TASKS = 56  # distinct measurements of the tiny network (space size 1, layouts NCHW and NCHW8c; its concat's all)
SMALL_TASKS = 30  # of the smaller one (its softmax is a kernel too)
DRIVER = """
import json, sys
from dataclasses import dataclass
import ray
from cost_models.cache import CostCache
from cost_models.cluster_costs import ClusterCosts
from cost_models.sources import MeasuredSource
from experiments.extraction import extract
from tests.search import tiny_nets

cache, address, second, network, quick = sys.argv[1:]

@dataclass(frozen=True)
class Quick(MeasuredSource):  # a short timing loop for tiny kernels
    def open(self, cache, target, threads, progress, cluster=None):
        return ClusterCosts(CostCache(cache), target=target, threads=threads, cluster=cluster, progress=progress,
                            repeat=3, min_repeat_ms=5)

def report(event):
    on_second = [n["NodeID"][:6] for n in ray.nodes() if second in n["RayletSocketName"]]
    nodes = {c.node: [c.measured, c.state, c.node.endswith(tuple(on_second))] for c in event.nodes}
    print(json.dumps({"done": event.done, "total": event.total, "nodes": nodes}), flush=True)

extracted = extract(getattr(tiny_nets, network)(), name="tiny", threads=1, space_size=1, layouts="NCHW,NCHW8c",
                    cache=cache, costs=Quick() if quick == "quick" else "measured", address=address, progress=report)
cluster = extracted.problem.meta["costs"]["cluster"]
print(json.dumps({"tasks": extracted.tasks, "new": extracted.new, "cluster": cluster}))
"""


def _environment(token: str = TOKEN, mode: str = "token") -> dict[str, str]:
    return {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": mode, "RAY_AUTH_TOKEN": token}


def _stop_node(temp_dir: str) -> None:
    """``_stop`` and the children of the processes it kills, which Ray renames (``ray::DashboardAgent``...) so that
    their command line no longer names the temp dir, and which outlive their raylet."""
    for process in psutil.process_iter(["cmdline"]):
        try:
            if any(temp_dir in part for part in process.info["cmdline"] or []):
                for child in process.children(recursive=True):
                    child.kill()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    _stop(temp_dir)


def _ray_start(temp_dir: str, *where: str, env: dict[str, str]) -> None:
    command = [str(BIN / "ray"), "start", *where, "--node-ip-address=127.0.0.1", "--num-cpus=1",
               '--resources={"timing_slot": 1}', "--disable-usage-stats", f"--temp-dir={temp_dir}"]
    subprocess.run(command, check=True, capture_output=True, text=True, env=env, timeout=120)


def _start_head(env: dict[str, str]) -> tuple[str, str]:
    temp_dir = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths must fit 107 characters
    port = _free_port()
    try:
        _ray_start(temp_dir, "--head", f"--port={port}", "--include-dashboard=false", env=env)
    except BaseException:
        _stop_node(temp_dir)
        raise
    return f"127.0.0.1:{port}", temp_dir


@pytest.fixture(scope="module")
def head():
    address, temp_dir = _start_head(_environment())
    try:
        yield address
    finally:
        _stop_node(temp_dir)


@pytest.fixture()
def second_node(head):
    """A second node joining the head: its temp dir (which its processes are killed by)."""
    temp_dir = tempfile.mkdtemp(prefix="rn", dir="/tmp")
    try:
        _ray_start(temp_dir, f"--address={head}", env=_environment())
        yield temp_dir
    finally:
        _stop_node(temp_dir)


class Driver:
    """A measuring driver process: its progress events as they come, then its figures. ``quick``: the measured
    source with a short timing loop (as in test_measure), else the measured source as the command line opens it."""

    def __init__(self, cache: Path, address: str, second: str, network: str = "residual_concat_net",
                 quick: bool = False) -> None:
        self.log = cache.with_suffix(f".{time.monotonic_ns()}.log")
        second = Path(second).name  # not the whole temp dir, which the node's processes are killed by
        argv = [str(cache), address, second, network, "quick" if quick else "-"]
        with self.log.open("w") as log:
            self.process = subprocess.Popen([sys.executable, "-c", DRIVER, *argv], cwd=ROOT, env=_environment(),
                                            stdout=subprocess.PIPE, stderr=log, text=True)

    def events(self):
        for line in self.process.stdout:
            if not line.startswith("{"):  # Ray prints the news of a dead node on the driver's stdout
                continue
            entry = json.loads(line)
            if "tasks" in entry:
                self.result = entry
                return
            yield entry

    def finish(self) -> dict:
        for _ in self.events():
            pass
        assert self.process.wait(timeout=60) == 0, self.log.read_text()[-3000:]
        return self.result


def _second(event: dict) -> list:
    """The second node's [records, state, True] in a progress event."""
    return next((entry for entry in event["nodes"].values() if entry[2]), [0, "absent", True])


def test_a_network_is_measured_across_both_nodes_each_task_once(head, second_node, tmp_path):
    cache = tmp_path / "c.sqlite"
    driver = Driver(cache, head, second_node, "add_node_net")
    result = driver.finish()
    nodes = result["cluster"]["nodes"]
    assert result["tasks"] == result["new"] == SMALL_TASKS and len(CostCache(cache)) == SMALL_TASKS
    assert result["cluster"]["submitted"] == SMALL_TASKS and result["cluster"]["resubmitted"] == 0
    assert len(nodes) == 2 and sum(nodes.values()) == SMALL_TASKS and min(nodes.values()) > 0  # both nodes timed

    again = Driver(cache, head, second_node, "add_node_net").finish()  # a restarted driver finds all in the cache
    assert (again["tasks"], again["new"], again["cluster"]["submitted"]) == (SMALL_TASKS, 0, 0)


def test_a_node_killed_mid_run_loses_nothing_and_duplicates_nothing(head, second_node, tmp_path):
    cache = tmp_path / "c.sqlite"
    driver = Driver(cache, head, second_node, quick=True)
    for event in driver.events():
        if _second(event)[0] >= 10:  # in its second batch of 8: it holds the rest of it
            _stop_node(second_node)
            break
    result = driver.finish()
    cluster = result["cluster"]
    assert result["new"] == TASKS and len(CostCache(cache)) == TASKS  # every task stored once, none lost
    assert sum(cluster["nodes"].values()) == TASKS  # no record of the dead node stored twice either
    assert cluster["resubmitted"] >= 1 and cluster["submitted"] == TASKS + cluster["resubmitted"]


def test_a_killed_driver_resumes_where_it_stopped(head, second_node, tmp_path):
    cache = tmp_path / "c.sqlite"
    driver = Driver(cache, head, second_node, "add_node_net", quick=True)
    for event in driver.events():
        if event["done"] >= 10:
            driver.process.kill()
            break
    driver.process.wait(timeout=30)
    kept = len(CostCache(cache))
    assert 10 <= kept < SMALL_TASKS
    result = Driver(cache, head, second_node, "add_node_net", quick=True).finish()
    assert result["new"] == result["cluster"]["submitted"] == SMALL_TASKS - kept
    assert len(CostCache(cache)) == SMALL_TASKS


def _refusals(tmp_path: Path, *runs: tuple[str, dict[str, str]]) -> list[str]:
    """``tessera extract resnet18 --address ADDRESS`` with each (address, environment), run at once: each ends within
    30 s, with exit code 2, nothing on stdout, no problem file and one line on stderr, which it returns."""
    started, processes = time.monotonic(), []
    for index, (address, env) in enumerate(runs):
        command = [str(BIN / "tessera"), "extract", "resnet18", "--address", address, "--cache",
                   str(tmp_path / f"c{index}.sqlite"), "--out", str(tmp_path / f"p{index}.json")]
        processes.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                          cwd=tmp_path, env=env))
    lines = []
    for index, process in enumerate(processes):
        out, err = process.communicate(timeout=60)
        assert time.monotonic() - started < 30
        assert process.returncode == 2 and out == "" and err.count("\n") == 1, err[-2000:]
        assert not (tmp_path / f"p{index}.json").exists()
        lines.append(err)
    return lines


def test_a_wrong_token_or_nothing_listening_is_one_error_within_30_s(head, tmp_path):
    nowhere = f"127.0.0.1:{_free_port()}"
    wrong, closed, disabled = _refusals(tmp_path, (head, _environment(token=secrets.token_hex(32))),
                                        (nowhere, _environment()), (head, _environment(mode="disabled")))
    assert wrong.startswith(f"error: the Ray cluster at {head} refused this process's token")
    assert closed.startswith(f"error: no Ray cluster answers at {nowhere} (Connection refused)")
    assert "needs Ray's token authentication, but RAY_AUTH_MODE is 'disabled'" in disabled


def test_a_cluster_open_to_anyone_is_refused(tmp_path):
    address, temp_dir = _start_head(_environment(mode="disabled"))
    try:
        (refusal,) = _refusals(tmp_path, (address, _environment()))
    finally:
        _stop_node(temp_dir)
    assert refusal.startswith(f"error: the Ray cluster at {address} admits connections without a token")
