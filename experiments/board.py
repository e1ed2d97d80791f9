"""What the running trials are doing, for the live progress display and the per-trial timeout.

Trials report their stage to a ``TrialBoard`` (on Ray it lives in a zero-CPU actor, in-process with ``--serial``);
the driver reads ``snapshot()`` to draw a line per running trial and to cancel a trial that has run too long. A
trial's clock starts when it starts running, not when it is queued.
"""

from __future__ import annotations

import time


class TrialBoard:
    """trial id -> (unix time it started, its current stage) for every running trial."""

    def __init__(self) -> None:
        self._running: dict[str, tuple[float, str]] = {}

    def update(self, trial_id: str, stage: str) -> None:
        started = self._running.get(trial_id, (time.time(), ""))[0]
        self._running[trial_id] = (started, stage)

    def done(self, trial_id: str) -> None:
        self._running.pop(trial_id, None)

    def snapshot(self) -> dict[str, tuple[float, str]]:
        return dict(self._running)


def overdue(snapshot: dict[str, tuple[float, str]], timeout: float | None, now: float | None = None) -> list[str]:
    """The trials of ``snapshot`` running for longer than ``timeout`` seconds."""
    if timeout is None:
        return []
    now = time.time() if now is None else now
    return [trial_id for trial_id, (started, _) in snapshot.items() if now - started > timeout]
