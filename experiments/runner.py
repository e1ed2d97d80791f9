"""Run an experiment's trials as Ray tasks (or in-process with ``serial=True``) and log each one as it arrives.

Trials already FINISHED in the tracking store (same trial id and config hash) are skipped, so rerunning a config
resumes it. The driver logs every result the moment ``ray.wait`` hands it over, so an interruption loses no finished
trial. A worker process that dies is retried by Ray (``max_retries``); a trial that still fails, or raises an
unexpected exception (on Ray or in-process alike), is a FAILED run with the exception's type and message, and the
other trials go on. Progress goes to ``experiments.progress.TrialProgress``.

Ray: an embedded local node by default (the config's ``num_cpus``, no dashboard, every process listening on loopback
alone and taking a token: ``start_ray``, usage stats off); with ``address`` it joins an
existing cluster with Ray's token authentication, after checking that something answers there, takes the token and
refuses a process without one (``cost_models.cluster.check_cluster``; ``ray.init`` would wait for minutes); if Ray is
already initialised in this process it is used as it is. Trials on synthetic or file problems take one CPU each and run
in parallel. Trials that time the machine (a model instance, whose costs are measured) also take the node's one
``timing_slot`` resource, so two never overlap on a node, and a fresh worker process each (TVM sizes its thread pool
once per process). On a cluster start every node with ``ray start ... --resources '{"timing_slot": 1}'``. """

from __future__ import annotations

import contextlib
import os
import secrets
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TextIO

from cost_models.cluster import TIMING_SLOT, Cluster, check_cluster, connect, has_token, reload_ray_settings
from experiments.board import TrialBoard, overdue
from experiments.config import ExperimentConfig, ExperimentError, Trial, expand
from experiments.progress import TrialProgress, clock
from experiments.tracking import Tracker
from experiments.trials import ERROR, TrialResult, run_trial

MAX_RETRIES = 2
"""Times Ray reruns a trial whose worker process died."""


POLL_SECONDS = 1.0
"""How often the driver refreshes the running trials' lines and checks their timeouts."""

SINGLE_MACHINE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Ray's switch between a node other machines can reach and a single-machine node on loopback (``_single_machine``)."""


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
    """Run the trials of ``config`` not yet finished in the tracking store; progress goes to ``stream`` (stderr).

    Examples
    --------
    >>> run_experiment(load_config("experiments/configs/solvers_synthetic.toml"))  # doctest: +SKIP
    """
    if address and not serial:
        check_cluster(Cluster(address))  # before the store is touched
    trials = expand(config)
    timeout = config.trial_timeout
    tracker = Tracker(config, tracking_uri)
    done = tracker.finished_trials()
    todo = [t for t in trials if (t.id, t.config_hash) not in done]
    skipped = len(trials) - len(todo)
    tracker.start()
    progress = TrialProgress(len(todo), stream)
    progress.note(f"{config.name}: {len(trials)} trials, {skipped} already finished, {len(todo)} to run"
                  + (" in-process" if serial else " on Ray"))
    recorded, failed = 0, 0

    def record(trial: Trial, result: TrialResult) -> None:
        nonlocal recorded, failed
        tracker.log_trial(trial, result)
        recorded += 1
        failed += result.status == ERROR
        progress.finished(f"{trial.id}: {_figure(result)} in {result.seconds:.2f} s")

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
        progress.close()
        tracker.finish(status, {"trials": len(trials), "skipped": skipped, "finished": recorded - failed,
                                "failed": failed, "seconds": progress.elapsed()})
    progress.note(f"{config.name}: {recorded - failed} finished, {failed} failed in {clock(progress.elapsed())}")
    return AblateSummary(len(trials), skipped, recorded - failed, failed, progress.elapsed(), tracker.parent_id)


def run_reported(trial: Trial, board: Any) -> TrialResult:
    """``run_trial`` in a Ray worker, reporting its stages to the board actor."""
    board.update.remote(trial.id, "started")
    try:
        return run_trial(trial, lambda stage: board.update.remote(trial.id, stage))
    finally:
        board.done.remote(trial.id)


def _run_serial(trial: Trial, board: TrialBoard, progress: TrialProgress, timeout: float | None) -> TrialResult:
    """``run_trial`` in this process; a timeout interrupts it with SIGALRM (between Python steps, so a long call
    into a solver's native code ends first), and an unexpected exception becomes an error result, as on Ray."""

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
    except Exception as exc:  # a bug in a solver or in tessera: recorded, and the next trial runs
        return TrialResult(trial.id, ERROR, error=_unexpected(exc))
    finally:
        if timeout:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        board.done(trial.id)


class _TrialTimeout(Exception):
    pass


def _unexpected(exc: BaseException) -> str:
    """A trial's error text for an exception ``run_trial`` let through: its type and message."""
    return f"{type(exc).__name__}: {exc}"


def _timed_out(timeout: float, entry: tuple[float, str] | None) -> str:
    stage = f" while {entry[1]}" if entry else ""
    return f"timed out after {timeout:g} s{stage}"


def _run_on_ray(
    trials: list[Trial],
    record: Callable[[Trial, TrialResult], None],
    progress: TrialProgress,
    *,
    address: str | None,
    num_cpus: int,
    max_retries: int,
    timeout: float | None,
) -> None:
    ray, started = start_ray(address=address, num_cpus=num_cpus, checked=True)  # by run_experiment
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
                    result = TrialResult(trial.id, ERROR, error=expired.get(trial.id) or _ray_error(ray, exc))
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


def _ray_error(ray: Any, exc: BaseException) -> str:
    """A trial's error text for what ``ray.get`` raised: the trial's own exception as ``_unexpected`` words it, else
    Ray's (a worker lost, a task cancelled)."""
    cause = getattr(exc, "cause", None)
    if isinstance(exc, ray.exceptions.RayTaskError) and cause is not None:
        return _unexpected(cause)
    summary = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"ray: {type(exc).__name__}: {summary}"


def _check_cluster(trials: list[Trial], resources: dict[str, float]) -> None:
    """Refuse trials the cluster could never schedule (Ray would wait for them forever)."""
    for trial in trials:
        if not _times_its_node(trial):
            continue
        if resources.get(TIMING_SLOT, 0) < 1:
            raise ExperimentError(f"{trial.id} times the machine but the Ray cluster has no {TIMING_SLOT!r} "
                                  f"resource; start each node with ray start --resources '{{\"{TIMING_SLOT}\": 1}}'")
        if trial.problem.threads > resources.get("CPU", 0):
            raise ExperimentError(f"{trial.id} needs {trial.problem.threads} CPUs; the Ray cluster has "
                                  f"{resources.get('CPU', 0):g}")


def _times_its_node(trial: Trial) -> bool:
    """Whether a trial times the node it runs on: it measures, not on a cluster of its own (``address``: there the
    measuring actors hold the nodes' timing slots, so the trial must not hold one), or it times its plan end to end."""
    return trial.problem.measured and (trial.problem.address is None or trial.timed_end_to_end)


def _options(trial: Trial) -> dict[str, Any]:
    """Ray resources of a trial: one CPU; a trial timing its node holds the node's timing slot and its threads'
    CPUs."""
    if not _times_its_node(trial):
        return {"num_cpus": 1}
    return {"num_cpus": trial.problem.threads, "resources": {TIMING_SLOT: 1}}


def start_ray(*, address: str | None = None, num_cpus: int = 2, checked: bool = False) -> tuple[Any, bool]:
    """``(ray module, whether this call started or joined it)``: join the cluster at ``address`` with Ray's token
    authentication (``cost_models.cluster.connect``; ``checked``: the caller checked it already), else start an
    embedded local node, unless Ray is already initialised in this process. The embedded node listens on loopback
    alone (``_single_machine``) and uses token authentication too: with ``RAY_AUTH_MODE`` unset it is ``token``, and
    a process without a token makes up one of its own, which the node's workers inherit."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if address:
        return connect(Cluster(address), checked=checked)
    import ray

    if ray.is_initialized():
        return ray, False
    if os.environ.setdefault("RAY_AUTH_MODE", "token") == "token" and not has_token():
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)  # kept for a later start in this process
    reload_ray_settings()
    with _single_machine():
        ray.init(num_cpus=num_cpus, resources={TIMING_SLOT: 1}, include_dashboard=False, _node_ip_address="127.0.0.1",
                 log_to_driver=False)
    return ray, True


@contextlib.contextmanager
def _single_machine() -> Iterator[None]:
    """Ray on Linux takes a node address of 127.0.0.1 as the machine's network address, and its GCS, raylet, agents
    and workers then listen on every interface; as a single-machine Ray (its mode on macOS and Windows, which
    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` selects) the node's address stays 127.0.0.1 and they all listen on
    loopback. Set while the node starts (the processes it starts inherit it), then restored, so that this process
    can still join a cluster later."""
    from ray._private import ray_constants

    before = os.environ.get(SINGLE_MACHINE), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[SINGLE_MACHINE] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False  # read once, when Ray is first imported
    try:
        yield
    finally:
        if before[0] is None:
            os.environ.pop(SINGLE_MACHINE, None)
        else:
            os.environ[SINGLE_MACHINE] = before[0]
        ray_constants.ENABLE_RAY_CLUSTER = before[1]


def _figure(result: TrialResult) -> str:
    if result.status == ERROR:
        message = result.error or ""
        return f"error ({message if len(message) <= 100 else message[:100] + '...'})"
    if result.status == "bound":
        return f"bound {result.lower_bound:.6g}"
    return result.status if result.cost is None else f"cost {result.cost:.6g} ({result.status})"

