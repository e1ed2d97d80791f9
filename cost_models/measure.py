"""Cost providers: the one interface the problem builder prices tasks through, and ``MeasuredCosts``, which builds
and times every task that the persistent cache does not already hold.

``MeasuredCosts`` looks every task up first, then measures the missing ones in batches (``LocalMeasurer``): a few
builder processes compile a batch into shared libraries in parallel, then a single runner process times them one after
the other, so no timing ever overlaps another timing or a build on its cores (where the host has cores beside the
timing threads, the builders compile the next batch there meanwhile). Each result, success or failure, is written to the
cache the moment it is known, so a killed search loses only the measurements in flight and a restart redoes none of
the rest. A failure (exception, crash, timeout) is cached too: the candidate is forbidden and not retried. On a Ray
cluster every node runs a ``LocalMeasurer`` (``cost_models.cluster_costs``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import shutil
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import tvm

from cost_models.cache import DEFAULT_TIMING, TIMING_METHODS, Context, CostCache, CostRecord
from cost_models.exchange import put_or_set_aside
from cost_models.tasks import FREE, Task
from cost_models.workers import PASSES, Artifact, Outcome, RunSettings, WorkerError, WorkerPool, resolve
from search.host import host
from search.templates import TEMPLATE_VERSION
from search.threads import thread_variables

DEFAULT_BUILD = "cost_models.workers.build_artifact"
DEFAULT_RUN = "cost_models.workers.run_artifact"


class MeasureError(RuntimeError):
    """The provider is configured so that nothing could be measured (bad thread count, worker settings)."""


@dataclass(frozen=True)
class NodeCount:
    """One cluster node's part in a ``measure`` call: the records it delivered (``failures`` of them failed) and its
    ``state``: ``starting`` (placed, loading), ``measuring``, ``idle``, ``lost`` (it died or stopped answering: its
    unfinished tasks went to other nodes) or ``refused`` (``reason``: another CPU or versions than the target's)."""

    node: str
    measured: int
    failures: int
    state: str
    reason: str = ""


@dataclass(frozen=True)
class Progress:
    """Where a ``measure`` call stands: ``done`` of the ``total`` distinct tasks it has to measure are finished,
    ``failures`` of them failed; ``hits`` distinct tasks came from the cache (cached failures included); seconds
    ``elapsed`` and the ``eta`` (None before the first result); on a cluster, each node's part (``nodes``)."""

    done: int
    total: int
    hits: int
    failures: int
    elapsed: float
    eta: float | None
    nodes: tuple[NodeCount, ...] = ()


class CostProvider(ABC):
    """Prices measurement tasks (``cost_models.tasks``) for the problem builder.

    ``measure(tasks)`` returns one ``CostRecord`` per task, in order: a median time in milliseconds (``record.ok``) or
    the reason the task cannot run (the candidate is then forbidden). Transforms between identical layouts cost 0.
    Implementations: ``MeasuredCosts`` (build and time on this machine); a learned model can predict instead.
    Providers are context managers; ``close`` releases what they hold.
    """

    @abstractmethod
    def measure(self, tasks: Sequence[Task]) -> list[CostRecord]:
        """One record per task, in the order given."""

    def spent(self) -> dict[str, float]:
        """Wall seconds spent so far building (``builds``) and timing (``timings``) tasks on this machine; empty
        for a provider that measures nothing here."""
        return {}

    def close(self) -> None:  # noqa: B027 - a deliberate no-op default, not an abstract method
        """Release processes and files (nothing by default)."""

    def __enter__(self) -> CostProvider:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def machine_context(target: tvm.target.Target | str, threads: int, timing: str = DEFAULT_TIMING) -> Context:
    """The cache context of timings taken here with ``target``, ``threads`` and timing method ``timing``."""
    return Context(str(tvm.target.Target(target)), host().cpu, threads, tvm.__version__, TEMPLATE_VERSION, timing)


def check_settings(*, batch_size: int, build_timeout: float, run_timeout: float, repeat: int, min_repeat_ms: int,
                   timing: str, f_build: str, f_run: str, builders: int = 1, passes: int = PASSES) -> None:
    """Raise ``MeasureError`` for measurement settings that cannot work (``MeasuredCosts`` lists them)."""
    if min(builders, batch_size, repeat, passes) < 1 or min(build_timeout, run_timeout) <= 0 or min_repeat_ms < 0:
        raise MeasureError("builders, batch_size, repeat and passes must be >= 1, timeouts > 0 and min_repeat_ms >= 0")
    if timing not in TIMING_METHODS:
        raise MeasureError(f"unknown timing method {timing!r}; choose from {', '.join(TIMING_METHODS)}")
    try:
        resolve(f_build), resolve(f_run)  # fail here, not in every worker
    except WorkerError as exc:
        raise MeasureError(str(exc)) from exc


WORKDIR_PREFIX = "tessera-measure-"  # + the measuring process's id: the build folder of a LocalMeasurer


def remove_orphaned_workdirs() -> None:
    """Delete the build folders that measuring processes which no longer run left behind (a process killed before
    its ``close``, as Ray kills a cluster node's actor): each folder's name holds its process's id."""
    for path in Path(tempfile.gettempdir()).glob(f"{WORKDIR_PREFIX}*-*"):
        pid = path.name[len(WORKDIR_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


Built = tuple[list[tuple[str, Artifact]], list[tuple[str, CostRecord]]]
"""A batch built: its artifacts and its build failures' records, by key."""


class LocalMeasurer:
    """Builds batches of tasks in ``builders`` worker processes in parallel, then times what built one task at a time
    in a single runner process (``TVM_NUM_THREADS`` = ``settings.threads``), on this machine; no cache.

    ``measure(batch)`` yields ``(key, record)`` for every task of the batch: the build failures once the batch is
    built, then each task's record as its last pass ends. The built tasks are timed in ``settings.passes`` passes over
    the batch, each with its share of the repeats, and a task's record is its fastest pass (its median and spread,
    its repeats): a slow window of the host inflates the pass it falls into, not the record. A pass
    that fails makes the record a failure. Processes start on the first batch (``start`` starts the runner early, to
    import while the first batch builds) and stop on ``close``, which also deletes the libraries.

    ``measure_batches`` measures several batches; where the usable cores outnumber the timing threads (and
    ``overlap``), it builds the next batch while the current one is timed, without sharing a core with the timing:
    the runner is pinned to the first ``settings.threads`` usable cores and the builders (at most one per remaining
    core) to the others. ``seconds``: wall seconds in timings, in builds the timing waited for (``builds``) and, when
    overlapping, in builds that ran beside timings (``overlapped builds``).
    """

    def __init__(self, target: str, settings: RunSettings, *, builders: int, build_timeout: float,
                 run_timeout: float, f_build: str = DEFAULT_BUILD, f_run: str = DEFAULT_RUN,
                 overlap: bool = True) -> None:
        self.target, self.settings = target, settings
        remove_orphaned_workdirs()
        self._workdir = tempfile.TemporaryDirectory(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-")
        workdir = self._workdir.name
        cores = sorted(os.sched_getaffinity(0))
        spare = cores[settings.threads:]
        self.overlap = overlap and bool(spare)
        self._builders = WorkerPool(  # TVM's build folders inside ours: gone with it, even a killed build's
            f_build, size=min(builders, len(spare)) if self.overlap else builders, timeout=build_timeout,
            environment={"TMPDIR": workdir}, log_dir=workdir, label="build",
            cores=spare if self.overlap else None,
        )
        self._runner = WorkerPool(
            f_run, size=1, timeout=run_timeout, environment=thread_variables(settings.threads),
            log_dir=workdir, label="run", cores=cores[:settings.threads] if self.overlap else None,
        )
        self._background = concurrent.futures.ThreadPoolExecutor(1, "tessera-builds") if self.overlap else None
        self.seconds = {"builds": 0.0, "timings": 0.0, **({"overlapped builds": 0.0} if self.overlap else {})}

    def start(self) -> None:
        """Start the runner process now (it imports TVM in the background)."""
        self._runner.start()

    def measure(self, batch: Sequence[tuple[str, Task]]) -> Iterator[tuple[str, CostRecord]]:
        """Build ``batch`` ((key, task) pairs), then time what built; yields each task's record as it is known."""
        for records in self.measure_batches([batch]):
            yield from records

    def measure_batches(self, batches: Iterable[Sequence[tuple[str, Task]]]
                        ) -> Iterator[Iterator[tuple[str, CostRecord]]]:
        """Per batch, an iterator over its records as ``measure`` yields them; consume each before taking the next.
        With ``overlap``, the next batch builds while this one's records are timed; left early, the build under way
        ends before this does (its libraries deleted), so the builders serve one batch at a time."""
        upcoming = iter(batches)
        batch, building = next(upcoming, None), None
        try:
            while batch is not None:
                built, failed = self._built(batch, building)
                batch, building = next(upcoming, None), None
                if batch is not None and self._background is not None:
                    building = self._background.submit(self._build, batch, "overlapped builds")
                yield self._timed(built, failed)
        finally:
            if building is not None:
                with contextlib.suppress(Exception):
                    for _, artifact in building.result()[0]:
                        Path(artifact.path).unlink(missing_ok=True)

    def _built(self, batch: Sequence[tuple[str, Task]], building: concurrent.futures.Future | None) -> Built:
        """``batch`` built: by its background build (``building``), waited for, else now."""
        start = time.perf_counter()
        try:
            return building.result() if building is not None else self._build(batch)
        finally:
            self.seconds["builds"] += time.perf_counter() - start

    def _build(self, batch: Sequence[tuple[str, Task]], charge: str | None = None) -> Built:
        """``batch`` built in the builder processes: the artifacts and the build failures' records, by key."""
        built: list[tuple[str, Artifact]] = []
        failed: list[tuple[str, CostRecord]] = []

        def on_built(index: int, outcome: Outcome) -> None:
            key = batch[index][0]
            if outcome.error is None:
                built.append((key, outcome.value))
            else:
                failed.append((key, CostRecord.failed(outcome.error)))

        start = time.perf_counter()
        self._builders.map([(task, self.target, self._workdir.name) for _, task in batch], on_built)
        if charge:
            self.seconds[charge] += time.perf_counter() - start
        return built, failed

    def _timed(self, built: list[tuple[str, Artifact]], failed: list[tuple[str, CostRecord]]
               ) -> Iterator[tuple[str, CostRecord]]:
        """The build failures, then the built tasks timed in passes (see the class docstring)."""
        yield from failed
        timings: dict[str, list] = {key: [] for key, _ in built}
        try:
            for last in [False] * (self.settings.passes - 1) + [True]:
                for key, artifact in built:
                    if timings[key] and isinstance(timings[key][-1], str):
                        continue  # failed in an earlier pass
                    outcome = self._time(artifact)
                    timings[key].append(outcome.value if outcome.error is None else outcome.error)
                    if last or outcome.error is not None:
                        yield key, _record(timings[key])
        finally:
            for _, artifact in built:
                Path(artifact.path).unlink(missing_ok=True)

    def _time(self, artifact: Artifact) -> Outcome:
        """One pass's timing of a built library in the runner process."""
        outcomes: list[Outcome] = []
        start = time.perf_counter()
        self._runner.map([(artifact, self.settings.per_pass())], lambda _, outcome: outcomes.append(outcome))
        self.seconds["timings"] += time.perf_counter() - start
        return outcomes[0]

    def close(self) -> None:
        """Wait for a background build, stop the worker processes and delete the build directory."""
        if self._background is not None:
            self._background.shutdown(wait=True)
        self._builders.close()
        self._runner.close()
        self._workdir.cleanup()


def _record(passes: list) -> CostRecord:
    """A task's record from its passes' timings (an error message for a failed pass): the fastest pass, or the
    failure."""
    failures = [item for item in passes if isinstance(item, str)]
    if failures:
        return CostRecord.failed(failures[0])
    fastest = min(passes, key=lambda timing: timing.median_ms)
    return CostRecord(fastest.median_ms, fastest.iqr_ms, fastest.repeats, measured_at=time.time())


class MeasuredCosts(CostProvider):
    """Measure tasks on this machine, caching every result in ``cache`` under this machine's context.

    Parameters
    ----------
    cache
        The persistent cost cache.
    target
        The compile target (a ``tvm.target.Target`` or its JSON string); its string is part of the cache context.
    threads
        TVM runtime threads to time with (1 .. usable cores); part of the context.
    builders
        Builder processes compiling in parallel.
    build_timeout, run_timeout
        Seconds one build / one timing may take before it is killed and recorded as failed.
    batch_size
        Tasks built before the batch is timed.
    repeat, min_repeat_ms
        Timed repeats per task and the minimum length of each (see ``cost_models.timer.time_kernel``).
    passes
        Passes over a batch the repeats are spread over, the fastest kept (``cost_models.workers.PASSES``; see
        ``LocalMeasurer``).
    timing
        The timing method, one of ``cost_models.timer.TIMING_METHODS`` (default
        ``cost_models.cache.DEFAULT_TIMING``); part of the context.
    progress
        Called with a ``Progress`` after the cache lookup and after every measured task.
    f_build, f_run
        Dotted paths of the build function ``(task, target_json, out_dir) -> Artifact`` and the run function
        ``(artifact, RunSettings) -> Timing`` that the worker processes call.
    overlap
        Build the next batch while one is timed where cores are left beside the timing threads, on those cores
        (``LocalMeasurer``).

    Notes
    -----
    The workers are spawned processes, started on the first ``measure`` that misses the cache and kept until
    ``close``: a script that measures needs the usual ``if __name__ == "__main__":`` guard. Timings are taken with
    the machine otherwise idle as far as this provider is concerned; other programs running meanwhile still skew
    them.
    """

    def __init__(
        self,
        cache: CostCache,
        *,
        target: tvm.target.Target | str,
        threads: int,
        builders: int = 2,
        build_timeout: float = 120.0,
        run_timeout: float = 60.0,
        batch_size: int = 16,
        repeat: int = 5,
        min_repeat_ms: int = 50,
        passes: int = PASSES,
        timing: str = DEFAULT_TIMING,
        progress: Callable[[Progress], None] | None = None,
        f_build: str = DEFAULT_BUILD,
        f_run: str = DEFAULT_RUN,
        overlap: bool = True,
    ) -> None:
        cores = len(os.sched_getaffinity(0))
        if not 1 <= threads <= cores:
            raise MeasureError(f"threads must be between 1 and the {cores} usable cores, got {threads}")
        check_settings(builders=builders, batch_size=batch_size, build_timeout=build_timeout, run_timeout=run_timeout,
                       repeat=repeat, min_repeat_ms=min_repeat_ms, timing=timing, f_build=f_build, f_run=f_run,
                       passes=passes)
        self.cache, self.progress, self.batch_size = cache, progress, batch_size
        self.context = machine_context(target, threads, timing)
        self.target = self.context.target
        self.settings = RunSettings(threads, repeat, min_repeat_ms, timing, passes)
        self._measurer = LocalMeasurer(self.target, self.settings, builders=builders, build_timeout=build_timeout,
                                       run_timeout=run_timeout, f_build=f_build, f_run=f_run, overlap=overlap)

    def measure(self, tasks: Sequence[Task]) -> list[CostRecord]:
        """Records of ``tasks`` in order: cached ones looked up, the rest measured (and cached) now."""
        lookup = look_up(self.cache, self.context, tasks)
        tracker = ProgressTracker(len(lookup.missing), len(lookup.records), self.progress)
        if lookup.missing:
            self._measurer.start()  # imports in the background during the first builds
        for batch in self._measurer.measure_batches(self._batches(list(lookup.missing.items()))):
            for key, record in batch:
                put_or_set_aside(self.cache, self.context, key, record, batch)  # locked: the batch's rest timed too
                lookup.records[key] = record
                tracker.finished(record.ok)
        return lookup.result()

    def spent(self) -> dict[str, float]:
        return dict(self._measurer.seconds)

    def time_again(self, tasks: Sequence[Task]) -> list[CostRecord]:
        """``tasks`` built and timed now as ``measure`` times them, the cache neither read nor written."""
        self._measurer.start()
        records: dict[str, CostRecord] = {}
        for batch in self._measurer.measure_batches(self._batches([(task.key, task) for task in tasks])):
            records.update(batch)
        return [records[task.key] for task in tasks]

    def _batches(self, pending: list[tuple[str, Task]]) -> list[list[tuple[str, Task]]]:
        return [pending[start : start + self.batch_size] for start in range(0, len(pending), self.batch_size)]

    def close(self) -> None:
        """Stop the worker processes, delete the build directory and close the cache (its write-ahead log folded
        back into the file and removed)."""
        self._measurer.close()
        self.cache.close()


@dataclass
class Lookup:
    """Tasks looked up in a cost cache: each task's key in order (None for a free task), the records the cache holds
    (a provider adds the ones it measures) and the tasks it lacks, by key."""

    keys: list[str | None]
    records: dict[str, CostRecord]
    missing: dict[str, Task]

    def result(self) -> list[CostRecord]:
        """A record per task, in order (``FREE`` for a free one), once every missing task has its record."""
        return [FREE if key is None else self.records[key] for key in self.keys]


def look_up(cache: CostCache, context: Context, tasks: Sequence[Task]) -> Lookup:
    """What ``cache`` holds of ``tasks`` under ``context``, and what it lacks."""
    keys = [None if task.free else task.key for task in tasks]
    records = cache.get_many(context, [key for key in keys if key is not None])
    missing = {key: task for key, task in zip(keys, tasks) if key is not None and key not in records}
    return Lookup(keys, records, missing)


class ProgressTracker:
    """Counts finished measurements and reports ``Progress`` to ``callback``; ``nodes`` gives the cluster nodes'
    counts of each event (none on one machine)."""

    def __init__(self, total: int, hits: int, callback: Callable[[Progress], None] | None,
                 nodes: Callable[[], tuple[NodeCount, ...]] = tuple) -> None:
        self.total, self.hits, self.callback, self.nodes = total, hits, callback, nodes
        self.done = self.failures = 0
        self.started = time.monotonic()
        self.report()

    def finished(self, ok: bool) -> None:
        self.done += 1
        self.failures += not ok
        self.report()

    def report(self) -> None:
        if self.callback is None:
            return
        elapsed = time.monotonic() - self.started
        if self.done == self.total:
            eta = 0.0
        else:
            eta = elapsed / self.done * (self.total - self.done) if self.done else None
        self.callback(Progress(self.done, self.total, self.hits, self.failures, elapsed, eta, self.nodes()))
