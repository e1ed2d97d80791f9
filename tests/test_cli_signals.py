"""SIGTERM and SIGHUP end a command as Ctrl-C does: one ``error:`` line and exit code 128 + the signal. Sent to a real
``tessera`` process while it measures: its temporary files (build folders, TVM's included) removed, no output
written, and the cost cache readable, holding what was measured before the signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cost_models.cache import CostCache
from cost_models.measure import WORKDIR_PREFIX
from experiments import cli
from tests.cli_helpers import one_error_line
from tests.experiments.test_ablate import one_conv_onnx

ROOT = Path(__file__).resolve().parents[1]


def test_sighup_ends_a_command_as_ctrl_c_and_the_handlers_are_restored(monkeypatch, capsys):
    before = signal.getsignal(signal.SIGHUP), signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(cli, "_run_generate", lambda args: signal.raise_signal(signal.SIGHUP))
    assert cli.main(["generate", "chain", "--seed", "0", "--out", "q.json"]) == 128 + signal.SIGHUP
    assert one_error_line(capsys) == "error: interrupted (SIGHUP)"
    assert (signal.getsignal(signal.SIGHUP), signal.getsignal(signal.SIGTERM)) == before


def test_sigterm_while_measuring_cleans_up_and_exits_with_one_error_line(tmp_path):
    signum = signal.SIGTERM
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    model = one_conv_onnx(tmp_path / "one_conv.onnx")
    command = [sys.executable, "-m", "experiments.cli", "extract", str(model), "--out", str(tmp_path / "q.json"),
               "--cache", str(tmp_path / "costs.sqlite"), "--threads", "1"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "TMPDIR": str(scratch)})
    deadline = time.monotonic() + 120
    while not any(scratch.glob(f"{WORKDIR_PREFIX}*")) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, process.communicate()  # still measuring when the signal comes
    time.sleep(1.0)  # builds under way
    process.send_signal(signum)
    _, err = process.communicate(timeout=120)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert process.returncode == 128 + signum and errors == [f"error: interrupted ({signum.name})"], err
    assert "Traceback" not in err
    assert list(scratch.iterdir()) == [] and not (tmp_path / "q.json").exists()
    records = [record for _, _, record in CostCache(tmp_path / "costs.sqlite", read_only=True).items()]
    assert all(record.ok or record.error for record in records)  # readable, every record whole
