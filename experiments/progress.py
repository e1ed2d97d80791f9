"""Progress on stderr, drawn with rich: the measurement bar of ``extract`` and ``tune`` (``ProgressBar``, fed by the
cost provider's ``Progress`` events) and the display of an experiment (``TrialProgress``).

On a terminal rich redraws the bars in place: the measurement bar with counts, elapsed time and ETA; for an experiment,
a line per finished trial above the overall bar (with its ETA) and a live line per running trial with its stage.
Anywhere else (a pipe, a file, CI) both print plain single lines: the first, then at most one every ``LOG_SECONDS``
(of measuring for the bar; of silence for an experiment, whose line names the running trials), and the last; an
experiment also prints a line per finished trial, so 90 quick trials print 92 lines.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TextIO

from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

LOG_SECONDS = 30.0
"""Off a terminal, the least number of seconds between two progress lines (first, last and finished trials aside)."""


def clock(seconds: float | None) -> str:
    """``m:ss``, ``h:mm:ss`` past an hour, ``?`` for None."""
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def describe(event: Any) -> str:
    """``measured/total`` measured, cache hits, failures, elapsed time and ETA of one progress event, and on a
    cluster each node's records and state (``cost_models.measure.NodeCount``)."""
    line = (f"{event.done}/{event.total} measured, {event.hits} cached, {event.failures} failed, "
            f"{clock(event.elapsed)} elapsed, ETA {clock(event.eta)}")
    nodes = [f"{n.node} {n.measured} {n.state}{f' ({n.reason})' if n.reason else ''}"
             for n in getattr(event, "nodes", ())]
    return f"{line}; nodes: {', '.join(nodes)}" if nodes else line


def console_on(stream: TextIO | None) -> Console:
    """A rich console writing to ``stream`` (stderr by default) that draws in place only if ``stream`` is a terminal
    (and not a dumb one), whatever the environment's colour settings say."""
    stream = stream if stream is not None else sys.stderr
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        terminal = False
    return Console(file=stream, force_terminal=terminal, highlight=False, soft_wrap=True)


class ProgressBar:
    """Callable that shows cost-provider progress events on ``stream`` (stderr by default): a bar on a terminal, else
    a line for the first event, at most one every ``LOG_SECONDS`` of measuring, and the last. A new series of events
    after the last one starts a new bar.

    Examples
    --------
    >>> bar = ProgressBar(label="measuring")
    >>> provider = MeasuredCosts(cache, target=target, threads=2, progress=bar)  # doctest: +SKIP
    """

    def __init__(self, stream: TextIO | None = None, label: str = "measuring") -> None:
        self.console = console_on(stream)
        self.label = label
        self._bar: Progress | None = None
        self._logged: float | None = None  # elapsed seconds at the last line printed off a terminal

    def __call__(self, event: Any) -> None:
        last = event.done >= event.total
        if self.console.is_interactive:
            self._draw(event)
        elif self._logged is None or last or event.elapsed >= self._logged + LOG_SECONDS:
            self.console.print(Text(f"{self.label}: {describe(event)}"))
            self._logged = event.elapsed
        if last:
            self.close()

    def _draw(self, event: Any) -> None:
        if self._bar is None:
            self._bar = Progress(TextColumn(self.label, markup=False), BarColumn(),
                                 TextColumn("{task.description}", markup=False), console=self.console)
            self._bar.add_task(describe(event), total=event.total, completed=event.done)
            self._bar.start()
        else:
            self._bar.update(self._bar.task_ids[0], total=event.total, completed=event.done,
                             description=describe(event))

    def close(self) -> None:
        """End the bar, leaving its last state on screen (done by the last event; call it when measuring stops
        early)."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        self._logged = None


class TrialProgress:
    """The progress of an experiment's ``total`` trials on ``stream`` (stderr by default).

    ``note`` prints a line; ``finished`` prints a finished trial's line with the count, elapsed time and ETA;
    ``running`` takes the running trials (trial id -> (unix time it started, stage), a ``TrialBoard`` snapshot);
    ``close`` ends the live display. On a terminal the overall bar and a line per running trial are redrawn in place
    below the printed lines; elsewhere a line naming the running trials is printed after ``LOG_SECONDS`` of silence.
    """

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.console = console_on(stream)
        self.total, self.done = total, 0
        self.start = time.perf_counter()
        self._running: dict[str, tuple[float, str]] = {}
        self._printed = time.monotonic()
        self._board: _Board | None = None
        if self.console.is_interactive:
            self._board = _Board(self._running_lines, console=self.console)
            self._board.add_task("trials", total=total)
            self._board.start()

    def elapsed(self) -> float:
        """Seconds since the display was created."""
        return time.perf_counter() - self.start

    def note(self, text: str) -> None:
        """Print one line (above the live display on a terminal)."""
        self.console.print(Text(text))
        self._printed = time.monotonic()

    def finished(self, text: str) -> None:
        """Count one finished trial and print ``text`` (what it gave) with the count, elapsed time and ETA."""
        self.done += 1
        eta = self.elapsed() / self.done * (self.total - self.done)
        self.note(f"[{self.done}/{self.total}] {text}; elapsed {clock(self.elapsed())}, ETA {clock(eta)}")
        if self._board is not None:
            self._board.update(self._board.task_ids[0], completed=self.done)

    def running(self, snapshot: Mapping[str, tuple[float, str]]) -> None:
        """Show the running trials (redrawn on a terminal; one line after ``LOG_SECONDS`` of silence otherwise)."""
        self._running = dict(snapshot)
        if self._board is None and snapshot and time.monotonic() - self._printed >= LOG_SECONDS:
            self.note("running " + "; ".join(self._running_lines()))

    def close(self) -> None:
        """End the live display (a no-op off a terminal)."""
        if self._board is not None:
            self._running = {}
            self._board.stop()
            self._board = None

    def _running_lines(self) -> list[str]:
        now = time.time()
        return [f"{trial_id} for {clock(now - started)}: {stage}"
                for trial_id, (started, stage) in sorted(self._running.items(), key=lambda item: item[1][0])]


class _Board(Progress):
    """The overall bar with, below it, a line per running trial (recomputed at each redraw, so the clocks move)."""

    def __init__(self, running_lines: Callable[[], list[str]], console: Console) -> None:
        self._running_lines = running_lines  # before Progress.__init__, which draws once
        super().__init__(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                         TextColumn("ETA"), TimeRemainingColumn(), console=console)

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        for line in self._running_lines():
            yield Text(f"  running {line}", no_wrap=True, overflow="ellipsis")
