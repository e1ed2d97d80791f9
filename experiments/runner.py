"""Run an experiment's trials as Ray tasks (or in-process with ``serial=True``) and log each one as it arrives.

Trials already FINISHED in the tracking store (same trial id and config hash) are skipped, so rerunning a config
resumes it. The driver logs every result the moment ``ray.wait`` hands it over, so an interruption loses no finished
trial. A worker process that dies is retried by Ray (``max_retries``); a trial that still fails is a FAILED run.

Ray: an embedded local node by default (the config's ``num_cpus``, no dashboard, node address 127.0.0.1 (Ray 2.60 still
listens on every interface), usage stats off); with ``address`` it joins an existing cluster; if Ray is already
initialised in this process it is used as it is. Trials on synthetic or file problems take one CPU each and run in
parallel. Trials that time the machine (a model instance, whose costs are measured) also take the node's one
``timing_slot`` resource, so two never overlap on a node, and a fresh worker process each (TVM sizes its thread pool
once per process). On a cluster start every node with ``ray start ... --resources '{"timing_slot": 1}'``. """

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from experiments.board import TrialBoard, overdue
from experiments.config import ExperimentConfig, ExperimentError, Trial, expand
from experiments.tracking import Tracker
from experiments.trials import ERROR, TrialResult, run_trial

RAY_ENVIRONMENT = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
"""Set (unless already set) before ``import ray``."""

MAX_RETRIES = 2
"""Times Ray reruns a trial whose worker process died."""

TIMING_SLOT = "timing_slot"
"""Custom Ray resource, one per node, held by every trial that times the machine."""

POLL_SECONDS = 1.0
"""How often the driver refreshes the running trials' lines and checks their timeouts."""

QUIET_SECONDS = 30.0
"""Interval of the running trials' lines when progress goes to a file rather than a terminal."""

BAR_WIDTH = 20


@dataclass(frozen=True)
class AblateSummary:
    """Counts of one ``run_experiment`` call and its parent run id."""

    trials: int
    skipped: int
    finished: int
    failed: int
    seconds: float
    parent_run_id: str | None


def run_experiment(
    config: ExperimentConfig,
    *,
    tracking_uri: str | None = None,
    address: str | None = None,
    serial: bool = False,
    stream: TextIO | None = None,
    max_retries: int = MAX_RETRIES,
) -> AblateSummary:
    """Run the trials of ``config`` not yet finished in the tracking store; progress lines go to ``stream`` (stderr).

    Examples
    --------
    >>> run_experiment(load_config("experiments/configs/solvers_synthetic.toml"))  # doctest: +SKIP
    """
    trials = expand(config)
    timeout = config.trial_timeout
    tracker = Tracker(config, tracking_uri)
    done = tracker.finished_trials()
    todo = [t for t in trials if (t.id, t.config_hash) not in done]
    progress = _Progress(len(todo), stream if stream is not None else sys.stderr)
    progress.note(f"{config.name}: {len(trials)} trials, {len(trials) - len(todo)} already finished, "
                  f"{len(todo)} to run" + (" in-process" if serial else " on Ray"))
    tracker.start(planned=len(todo), skipped=len(trials) - len(todo))
    failed = 0

    def record(trial: Trial, result: TrialResult) -> None:
        nonlocal failed
        tracker.log_trial(trial, result)
        failed += result.status == ERROR
        progress.trial(trial, result)

    status = "KILLED"
    try:
        if serial:
            board = TrialBoard()
            for trial in todo:
                record(trial, _run_serial(trial, board, progress, timeout))
        elif todo:
            _run_on_ray(todo, record, progress, address=address, num_cpus=config.num_cpus, max_retries=max_retries,
                        timeout=timeout)
        status = "FINISHED"
    finally:
        tracker.finish(status)
    progress.note(f"{config.name}: {len(todo) - failed} finished, {failed} failed in {_clock(progress.elapsed())}")
    return AblateSummary(len(trials), len(trials) - len(todo), len(todo) - failed, failed, progress.elapsed(),
                         tracker.parent_id)


def run_reported(trial: Trial, board: Any) -> TrialResult:
    """``run_trial`` in a Ray worker, reporting its stages to the board actor."""
    board.update.remote(trial.id, "started")
    try:
        return run_trial(trial, lambda stage: board.update.remote(trial.id, stage))
    finally:
        board.done.remote(trial.id)


def _run_serial(trial: Trial, board: TrialBoard, progress: _Progress, timeout: float | None) -> TrialResult:
    """``run_trial`` in this process; a timeout interrupts it with SIGALRM (between Python steps, so a long call
    into a solver's native code ends first)."""

    def report(stage: str) -> None:
        board.update(trial.id, stage)
        progress.running(board.snapshot())

    def expire(*_: Any) -> None:
        raise _TrialTimeout

    report("started")
    previous = signal.signal(signal.SIGALRM, expire) if timeout else None
    if timeout:
        signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        return run_trial(trial, report)
    except _TrialTimeout:
        return TrialResult(trial.id, ERROR, error=_timed_out(timeout, board.snapshot().get(trial.id)))
    finally:
        if timeout:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        board.done(trial.id)


class _TrialTimeout(Exception):
    pass


def _timed_out(timeout: float, entry: tuple[float, str] | None) -> str:
    stage = f" while {entry[1]}" if entry else ""
    return f"timed out after {timeout:g} s{stage}"


def _run_on_ray(
    trials: list[Trial],
    record: Callable[[Trial, TrialResult], None],
    progress: _Progress,
    *,
    address: str | None,
    num_cpus: int,
    max_retries: int,
    timeout: float | None,
) -> None:
    ray, started = start_ray(address=address, num_cpus=num_cpus)
    remote = {False: ray.remote(run_reported), True: ray.remote(max_calls=1)(run_reported)}  # timing: fresh worker
    board = ray.remote(num_cpus=0)(TrialBoard).remote()
    pending: dict[Any, Trial] = {}
    expired: dict[str, str] = {}  # trial id -> why it was cancelled
    try:
        _check_cluster(trials, ray.cluster_resources())
        for trial in trials:
            options = {**_options(trial), "max_retries": max_retries, "retry_exceptions": False}
            pending[remote[trial.problem.measured].options(**options).remote(trial, board)] = trial
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=POLL_SECONDS)
            for ref in ready:
                trial = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    summary = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                    error = expired.get(trial.id) or f"ray: {type(exc).__name__}: {summary}"
                    result = TrialResult(trial.id, ERROR, error=error)
                record(trial, result)
            snapshot = {tid: entry for tid, entry in ray.get(board.snapshot.remote()).items() if tid not in expired}
            progress.running(snapshot)
            for trial_id in overdue(snapshot, timeout):
                expired[trial_id] = _timed_out(timeout, snapshot[trial_id])
                ray.cancel(next(ref for ref, t in pending.items() if t.id == trial_id), force=True)
                board.done.remote(trial_id)
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        if started:
            ray.shutdown()


def _check_cluster(trials: list[Trial], resources: dict[str, float]) -> None:
    """Refuse trials the cluster could never schedule (Ray would wait for them forever)."""
    for trial in trials:
        if trial.problem.measured and resources.get(TIMING_SLOT, 0) < 1:
            raise ExperimentError(f"{trial.id} times the machine but the Ray cluster has no {TIMING_SLOT!r} "
                                  f"resource; start each node with ray start --resources '{{\"{TIMING_SLOT}\": 1}}'")
        if trial.problem.measured and trial.problem.threads > resources.get("CPU", 0):
            raise ExperimentError(f"{trial.id} needs {trial.problem.threads} CPUs; the Ray cluster has "
                                  f"{resources.get('CPU', 0):g}")


def _options(trial: Trial) -> dict[str, Any]:
    """Ray resources of a trial: one CPU; a timing trial holds the node's timing slot and its threads' CPUs."""
    if not trial.problem.measured:
        return {"num_cpus": 1}
    return {"num_cpus": trial.problem.threads, "resources": {TIMING_SLOT: 1}}


def start_ray(*, address: str | None = None, num_cpus: int = 2) -> tuple[Any, bool]:
    """``(ray module, whether this call started it)``: join ``address``, else start an embedded local node, unless
    Ray is already initialised in this process."""
    for key, value in RAY_ENVIRONMENT.items():
        os.environ.setdefault(key, value)
    import ray

    if ray.is_initialized():
        return ray, False
    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        ray.init(num_cpus=num_cpus, resources={TIMING_SLOT: 1}, include_dashboard=False,
                 _node_ip_address="127.0.0.1", log_to_driver=False)
    return ray, True


class _Progress:
    """A line per finished trial with an overall bar and ETA, and a live line per running trial: redrawn in place
    on a terminal, printed every ``QUIET_SECONDS`` (when something runs) otherwise."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total, self.done, self.stream = total, 0, stream
        self.start = time.perf_counter()
        self.tty = stream.isatty()
        self.drawn = 0  # live lines currently on the terminal
        self.last_print = 0.0

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def note(self, text: str) -> None:
        self._erase()
        print(text, file=self.stream, flush=True)

    def trial(self, trial: Trial, result: TrialResult) -> None:
        self.done += 1
        eta = self.elapsed() / self.done * (self.total - self.done)
        filled = round(BAR_WIDTH * self.done / max(self.total, 1))
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        self.note(f"[{bar}] {self.done}/{self.total} {trial.id}: {_figure(result)} in {result.seconds:.2f} s; "
                  f"elapsed {_clock(self.elapsed())}, ETA {_clock(eta)}")

    def running(self, snapshot: dict[str, tuple[float, str]]) -> None:
        now = time.time()
        lines = [f"  running {trial_id} for {_clock(now - started)}: {stage}"
                 for trial_id, (started, stage) in sorted(snapshot.items(), key=lambda item: item[1][0])]
        if self.tty:
            self._erase()
            if lines:
                print("\n".join(lines), file=self.stream, flush=True)
            self.drawn = len(lines)
        elif lines and time.monotonic() - self.last_print >= QUIET_SECONDS:
            self.last_print = time.monotonic()
            print("\n".join(lines), file=self.stream, flush=True)

    def _erase(self) -> None:
        if self.tty and self.drawn:
            self.stream.write(f"\x1b[{self.drawn}F\x1b[J")
            self.drawn = 0


def _figure(result: TrialResult) -> str:
    if result.status == ERROR:
        message = result.error or ""
        return f"error ({message if len(message) <= 100 else message[:100] + '...'})"
    if result.status == "bound":
        return f"bound {result.lower_bound:.6g}"
    return result.status if result.cost is None else f"cost {result.cost:.6g} ({result.status})"


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"
