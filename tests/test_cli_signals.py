"""SIGTERM and SIGHUP end a command as Ctrl-C does: one ``error:`` line and exit code 128 + the signal. Sent to a real
``tessera`` process while it measures, tunes or exports: its temporary files (build folders, TVM's, the plans it
times) removed, no output written (nor anything hidden beside it), and the cost cache readable, holding what was
measured before the signal; during ``cache export``, the file it replaces is left as it was."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from cost_models.cache import Context, CostCache, CostRecord
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


def test_a_signal_a_library_wraps_in_its_own_error_still_ends_the_command_as_ctrl_c(monkeypatch, capsys):
    def wrapped(args):  # as TVM's FFI re-raises an exception raised in a Python callback
        try:
            signal.raise_signal(signal.SIGTERM)
        except KeyboardInterrupt as exc:
            raise RuntimeError(str(exc)) from exc

    monkeypatch.setattr(cli, "_run_generate", wrapped)
    assert cli.main(["generate", "chain", "--seed", "0", "--out", "q.json"]) == 128 + signal.SIGTERM
    assert one_error_line(capsys) == "error: interrupted (SIGTERM)"


def _interrupted(command: list[str], tmp_path: Path, ready, signum: signal.Signals = signal.SIGTERM) -> Path:
    """Run ``command`` with a TMPDIR of its own, send it ``signum`` once ``ready(scratch)`` holds (the command still
    running), and check that it ended with exit code 128 + the signal, one error line and no traceback, and that once
    the processes it had started ended, its TMPDIR is empty; returns the TMPDIR."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "TMPDIR": str(scratch)})
    deadline = time.monotonic() + 120
    while not ready(scratch) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, process.communicate()  # still working when the signal comes
    time.sleep(0.5)
    children = psutil.Process(process.pid).children(recursive=True)
    process.send_signal(signum)
    _, err = process.communicate(timeout=120)
    psutil.wait_procs(children, timeout=60)  # a compiler TVM started finishes on its own and removes its files
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert process.returncode == 128 + signum and errors == [f"error: interrupted ({signum.name})"], err
    assert "Traceback" not in err and list(scratch.iterdir()) == []
    return scratch


def _tessera(*args: str) -> list[str]:
    return [sys.executable, "-m", "experiments.cli", *args]


def test_sigterm_while_measuring_cleans_up_and_exits_with_one_error_line(tmp_path):
    model = one_conv_onnx(tmp_path / "one_conv.onnx")
    command = _tessera("extract", str(model), "--out", str(tmp_path / "q.json"), "--cache",
                       str(tmp_path / "costs.sqlite"), "--threads", "1")
    _interrupted(command, tmp_path, lambda scratch: any(scratch.glob(f"{WORKDIR_PREFIX}*")))
    assert not (tmp_path / "q.json").exists()
    records = [record for _, _, record in CostCache(tmp_path / "costs.sqlite", read_only=True).items()]
    assert all(record.ok or record.error for record in records)  # readable, every record whole


def test_sigterm_while_tune_times_its_plans_leaves_no_output_and_no_plans(tmp_path):
    model = one_conv_onnx(tmp_path / "one_conv.onnx")
    out = tmp_path / "tuned"
    command = _tessera("tune", str(model), "--out", str(out), "--cache", str(tmp_path / "costs.sqlite"), "--threads",
                       "1", "--layouts", "NCHW,NCHW8c", "--space-size", "1", "--calibrate", "0")
    _interrupted(command, tmp_path, lambda scratch: out.exists())  # measured: exporting and timing the plans
    assert not out.exists()


def test_sighup_while_exporting_leaves_no_artifact_and_nothing_hidden_beside_it(tmp_path):
    out = tmp_path / "artifact"
    command = _tessera("export", "resnet18", "--plan", "nchw16c", "--image-size", "32", "--out", str(out))
    _interrupted(command, tmp_path, lambda scratch: any(scratch.iterdir()), signal.SIGHUP)  # compiling
    assert sorted(path.name for path in tmp_path.iterdir()) == ["tmp"]


def test_a_signal_while_exporting_the_cache_leaves_the_file_as_it_was(tmp_path, monkeypatch, capsys):
    from cost_models import exchange

    cache, out = tmp_path / "costs.sqlite", tmp_path / "records.jsonl"
    out.write_text("earlier\n")
    CostCache(cache).put(Context("llvm", "a CPU", 1, "0.27.0", "2"), "key", CostRecord(1.0, 0.1, 3))

    def records(cache):  # a signal after the first line is written
        yield {"line": 1}
        signal.raise_signal(signal.SIGTERM)
        yield {"line": 2}

    monkeypatch.setattr(exchange, "records", records)
    assert cli.main(["cache", "export", str(out), "--cache", str(cache)]) == 128 + signal.SIGTERM
    assert one_error_line(capsys) == "error: interrupted (SIGTERM)"
    assert out.read_text() == "earlier\n" and sorted(path.name for path in tmp_path.iterdir()) == [
        "costs.sqlite", "records.jsonl"]
