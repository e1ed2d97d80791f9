"""The interference benchmark's background loads: started, and stopped whatever ends the benchmark."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from experiments.background_load import LOADS, BackgroundLoad

ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("name", LOADS)
def test_a_load_runs_its_processes_for_the_block_and_reaps_them(name):
    cores = os.sched_getaffinity(0)
    with BackgroundLoad(name) as load:
        pids = load.pids
        assert len(pids) == {"quiet": 0, "one-core": 1, "memory": 1, "all-cores-niced": len(cores)}[name]
        assert all(_alive(pid) for pid in pids)
        if name == "one-core":
            assert os.sched_getaffinity(pids[0]) == {max(cores)}
        if name == "all-cores-niced":
            assert {os.getpriority(os.PRIO_PROCESS, pid) for pid in pids} == {19}
    assert not any(_alive(pid) for pid in pids)


@pytest.fixture
def work(resnet18_artifact, tmp_path):
    """A work folder as benchmarks/peers.py leaves it, with the plan already exported again (a tiny network)."""
    for place in ("tessera", "interference/tessera"):
        shutil.copytree(resnet18_artifact, tmp_path / "resnet18" / place)
    return tmp_path


def _alive_after(pid: int, seconds: float) -> bool:
    """Whether ``pid`` still lives after up to ``seconds``: a process the kernel kills with its parent, then reaped by
    init, takes a moment to go."""
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _alive(pid)


def _children(pid: int) -> dict[int, str]:
    """The child processes of ``pid``: their states (R, S, T for stopped, ...)."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found[int(stat.parent.name)] = fields[0]
    return found


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_the_benchmark_stops_its_load_when_interrupted(work, signum):
    """The load and the contenders' workers end with the benchmark, even with kill -9; while one worker is timed
    the others are stopped."""
    command = [sys.executable, str(ROOT / "benchmarks" / "interference.py"), "--models", "resnet18", "--work",
               str(work), "--loads", "one-core", "--peers", "--rounds", "1000"]
    # as from a terminal: Ctrl-C reaches the script even if this process ignores SIGINT (its children would inherit it)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        for line in process.stderr:
            if found := re.search(r"load one-core \(pids \[(\d+)\]\)", line):
                break
        else:
            pytest.fail(f"the benchmark ended before loading anything: {process.wait()}")
        load = int(found.group(1))
        assert _alive(load)
        workers = {pid: state for pid, state in _children(process.pid).items() if pid != load}
        assert len(workers) == 3  # tessera's plan on tessera's pool, on TVM's, on TVM's unbound
        assert sum(state != "T" for state in workers.values()) <= 1
        process.send_signal(signum)
        _, err = process.communicate(timeout=120)
    finally:
        process.kill()
    if signum == signal.SIGKILL:
        assert process.returncode == -signum
    else:
        assert process.returncode == 128 + signum
        assert "the background loads were stopped" in err
    assert not any(_alive_after(pid, seconds=10) for pid in (load, *workers))


def test_the_paired_table_cancels_a_machine_state_that_moves_both_contenders():
    from experiments.interference import paired_table

    loads = ["quiet", "one-core"]
    state = {"quiet": [1.0, 1.6, 1.0], "one-core": [1.6, 1.0, 1.6]}  # slow phases land unevenly on the loads

    def result(times):
        return {"loads": {load: {"samples_ms": [t * s for t, s in zip(times[load], state[load])]}
                          for load in loads}}

    results = {"onnxruntime": result({"quiet": [10.0] * 3, "one-core": [20.0] * 3}),
               "steady": result({"quiet": [8.0] * 3, "one-core": [16.0] * 3}),
               "fragile": result({"quiet": [8.0] * 3, "one-core": [32.0] * 3})}
    rows = paired_table(results, loads, "onnxruntime")
    assert [row.split(" | ")[0] for row in rows[2:]] == ["| steady", "| fragile"]
    assert rows[2].endswith("| 0.800 | 0.800 | 1.00x (1.00-1.00) |")  # doubles as the reference does
    assert rows[3].endswith("| 0.800 | 1.600 | 2.00x (2.00-2.00) |")
    assert paired_table({"steady": results["steady"]}, loads, "onnxruntime") == []


def test_the_paired_ratio_s_interval_holds_1_only_where_the_rounds_cannot_tell_the_contenders_apart():
    from experiments.interference import paired_ratio

    rng = np.random.default_rng(1)
    quiet = 0.8 * rng.lognormal(0, 0.05, 20)
    same, low, high = paired_ratio(0.8 * rng.lognormal(0, 0.05, 20), quiet)
    assert low < 1 < high and low <= same <= high
    worse, low, high = paired_ratio(0.9 * rng.lognormal(0, 0.05, 20), quiet)
    assert 1 < low <= worse <= high
    _, wide_low, wide_high = paired_ratio(0.8 * rng.lognormal(0, 0.2, 20), quiet)
    assert wide_high - wide_low > high - low
