"""The experiment's progress display: drawn in place with rich on a terminal, plain lines elsewhere."""

from __future__ import annotations

import io
import time

from experiments import progress
from experiments.progress import TrialProgress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_bar_and_the_running_trials_are_redrawn_below_the_finished_lines():
    terminal = _Terminal()
    display = TrialProgress(2, terminal)
    display.note("grid: 2 trials")
    display.running({"a/pbqp/r0": (time.time() - 65, "solving"), "b/dp/r0": (time.time() - 5, "measuring: 3/9")})
    time.sleep(0.3)  # the display redraws itself ten times a second
    display.finished("a/pbqp/r0: cost 3 (optimal) in 0.10 s")
    display.running({"b/dp/r0": (time.time() - 6, "solving")})
    time.sleep(0.3)
    display.close()
    drawn = terminal.getvalue()
    assert "\x1b[2K" in drawn  # erased and drawn again, in place
    assert "running a/pbqp/r0 for 1:05: solving" in drawn and "running b/dp/r0 for 0:06: solving" in drawn
    assert "[1/2] a/pbqp/r0: cost 3 (optimal) in 0.10 s; elapsed 0:00, ETA 0:00\n" in drawn
    final = drawn.rpartition("\r")[2]  # the last drawing, left on screen: the bar without the running trials
    assert "1/2" in final and "running" not in final


def test_off_a_terminal_a_line_names_the_running_trials_only_after_a_silence(monkeypatch):
    monkeypatch.setattr(progress, "LOG_SECONDS", 0.2)
    log = io.StringIO()
    display = TrialProgress(3, log)
    display.note("grid: 3 trials")
    running = {"a/pbqp/r0": (time.time() - 1, "solving"), "b/dp/r0": (time.time(), "started")}
    display.running(running)  # just after a line: nothing
    time.sleep(0.25)
    display.running(running)
    display.running(running)  # once
    display.finished("a/pbqp/r0: cost 3 (optimal) in 1.00 s")
    display.close()
    assert log.getvalue().splitlines() == [
        "grid: 3 trials",
        "running a/pbqp/r0 for 0:01: solving; b/dp/r0 for 0:00: started",
        "[1/3] a/pbqp/r0: cost 3 (optimal) in 1.00 s; elapsed 0:00, ETA 0:01",
    ]
