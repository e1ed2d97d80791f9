"""A progress bar for cost measurement, fed by the cost provider's progress callback.

On a terminal it redraws one line in place; otherwise (logs, pipes) it prints a plain line for the first update, then
at most one every ``LOG_SECONDS`` of measuring, and the last (a cold densenet201 space is over 7000 updates).
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

WIDTH = 30
LOG_SECONDS = 30.0


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def describe(event: Any) -> str:
    """``measured/total`` measured, cache hits, failures, elapsed time and ETA of one progress event."""
    return (f"{event.done}/{event.total} measured, {event.hits} cached, {event.failures} failed, "
            f"{_clock(event.elapsed)} elapsed, ETA {_clock(event.eta)}")


class ProgressBar:
    """Callable that renders provider progress events on ``stream`` (stderr by default).

    Examples
    --------
    >>> bar = ProgressBar(label="measuring")
    >>> provider = MeasuredCosts(cache, target=target, threads=2, progress=bar)  # doctest: +SKIP
    """

    def __init__(self, stream: TextIO | None = None, label: str = "measuring") -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.label = label
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._open = False
        self._logged: float | None = None  # elapsed seconds at the last line printed off a terminal

    def __call__(self, event: Any) -> None:
        text = describe(event)
        if not self.tty:
            last = event.done >= event.total
            if self._logged is None or last or event.elapsed >= self._logged + LOG_SECONDS:
                print(f"{self.label}: {text}", file=self.stream, flush=True)
                self._logged = event.elapsed
            return
        filled = WIDTH if event.total == 0 else WIDTH * event.done // event.total
        bar = "#" * filled + "." * (WIDTH - filled)
        self.stream.write(f"\r{self.label} [{bar}] {text}\x1b[K")
        self._open = True
        if event.done >= event.total:
            self.close()
        self.stream.flush()

    def close(self) -> None:
        """End the redrawn line (done by the last event; call it when measuring stops early)."""
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False
