"""``tessera ablate --address`` joins a real, separately started Ray cluster (head node on loopback) with Ray's token
authentication, and fails with one line when nothing listens there or the cluster admits anyone."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest

from experiments.tracking import TRIAL_ID, trial_runs

pytestmark = pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy is deprecated")

BIN = Path(sys.executable).parent
TOKENED = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token",
           "RAY_AUTH_TOKEN": secrets.token_hex(32)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(temp_dir: str) -> None:
    """Kill the processes of the cluster started with ``temp_dir`` (not ``ray stop``, which stops every cluster of
    this user on the machine)."""
    for process in psutil.process_iter(["cmdline"]):
        try:
            if any(temp_dir in part for part in process.info["cmdline"] or []):
                process.kill()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture(params=["token"])
def cluster(request):
    """A head node with token authentication (``TOKENED``'s token), or with ``disabled``, open to anyone."""
    temp_dir = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths must fit 107 characters
    port = _free_port()
    env = {**TOKENED, "RAY_AUTH_MODE": request.param}
    command = [str(BIN / "ray"), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
               "--num-cpus=2", '--resources={"timing_slot": 1}', "--include-dashboard=false",
               "--disable-usage-stats", f"--temp-dir={temp_dir}"]
    try:
        subprocess.run(command, check=True, capture_output=True, text=True, env=env, timeout=120)
        yield f"127.0.0.1:{port}", Path(temp_dir)
    finally:
        _stop(temp_dir)


def test_ablate_joins_an_existing_cluster(cluster, tmp_path):
    address, temp_dir = cluster
    config = tmp_path / "grid.toml"
    config.write_text('name = "on-cluster"\nlower_bound = false\n[[problems]]\ngenerator = "chain"\nnodes = 30\n'
                      'seed = [0, 1]\ncandidates = 4\n[[solvers]]\nname = "dp"\n[[solvers]]\nname = "pbqp"\n')
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    done = subprocess.run([str(BIN / "tessera"), "ablate", str(config), "--address", address, "--tracking-uri", store],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=TOKENED)
    assert done.returncode == 0, done.stderr[-2000:]
    runs = trial_runs("on-cluster", store)
    assert sorted(run.data.tags[TRIAL_ID] for run in runs) == sorted(
        f"chain-n30-k4-s{seed}/{solver}/r0" for seed in (0, 1) for solver in ("dp", "pbqp"))
    assert all(run.info.status == "FINISHED" for run in runs)
    workers = list((temp_dir / "session_latest" / "logs").glob("worker-*"))
    assert workers, "no worker ran on the cluster started here"  # the trials ran there, not on an embedded Ray


def test_ablate_with_nothing_listening_at_the_address_is_one_error_within_30_s(tmp_path):
    config = tmp_path / "grid.toml"
    config.write_text('name = "nowhere"\n[[problems]]\ngenerator = "chain"\nnodes = 4\nseed = 0\n'
                      '[[solvers]]\nname = "greedy"\n')
    address = f"127.0.0.1:{_free_port()}"  # closed: nothing listens there once the probe socket is gone
    done = subprocess.run([str(BIN / "tessera"), "ablate", str(config), "--address", address], capture_output=True,
                          text=True, timeout=30, cwd=tmp_path, env=TOKENED)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"error: no Ray cluster answers at {address} (Connection refused)")
    assert done.stderr.count("\n") == 1
    assert [p.name for p in tmp_path.iterdir()] == ["grid.toml"]  # no tracking store created either


@pytest.mark.parametrize("cluster", ["disabled"], indirect=True)
def test_ablate_refuses_a_cluster_open_to_anyone_before_touching_the_store(cluster, tmp_path):
    address, _ = cluster
    config = tmp_path / "grid.toml"
    config.write_text('name = "open"\n[[problems]]\ngenerator = "chain"\nnodes = 4\nseed = 0\n'
                      '[[solvers]]\nname = "dp"\n')
    done = subprocess.run([str(BIN / "tessera"), "ablate", str(config), "--address", address], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path, env=TOKENED)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr[-2000:]
    assert done.stderr.startswith(f"error: the Ray cluster at {address} admits connections without a token")
    assert [p.name for p in tmp_path.iterdir()] == ["grid.toml"]
