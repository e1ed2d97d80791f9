"""Cost providers: the one interface the problem builder prices tasks through, and ``MeasuredCosts``, which builds
and times every task that the persistent cache does not already hold.

``MeasuredCosts`` looks every task up first, then measures the missing ones in batches: a few builder processes
compile a batch into shared libraries in parallel, then a single runner process times them one after the other, so
no timing ever overlaps another timing or a build. Each result, success or failure, is written to the cache the
moment it is known, so a killed search loses only the measurements in flight and a restart redoes none of the rest.
A failure (exception, crash, timeout) is cached too: the candidate is forbidden and not retried.
"""

from __future__ import annotations

import os
import platform
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import tvm

from cost_models.cache import TIMING_METHODS, Context, CostCache, CostRecord
from cost_models.tasks import FREE, Task
from cost_models.workers import Outcome, RunSettings, WorkerError, WorkerPool, resolve
from search.templates import TEMPLATE_VERSION

DEFAULT_BUILD = "cost_models.workers.build_artifact"
DEFAULT_RUN = "cost_models.workers.run_artifact"


class MeasureError(RuntimeError):
    """The provider is configured so that nothing could be measured (bad thread count, worker settings)."""


@dataclass(frozen=True)
class Progress:
    """Where a ``measure`` call stands: ``done`` of the ``total`` distinct tasks it has to measure are finished,
    ``failures`` of them failed; ``hits`` distinct tasks came from the cache (cached failures included); seconds
    ``elapsed`` and the ``eta`` (None before the first result)."""

    done: int
    total: int
    hits: int
    failures: int
    elapsed: float
    eta: float | None


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

    def close(self) -> None:  # noqa: B027 - a deliberate no-op default, not an abstract method
        """Release processes and files (nothing by default)."""

    def __enter__(self) -> CostProvider:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def cpu_model() -> str:
    """The CPU's "model name" from /proc/cpuinfo (the platform's processor string elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_context(target: tvm.target.Target | str, threads: int, timing: str = "warm") -> Context:
    """The cache context of timings taken here with ``target``, ``threads`` and timing method ``timing``."""
    return Context(str(tvm.target.Target(target)), cpu_model(), threads, tvm.__version__, TEMPLATE_VERSION, timing)


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
    timing
        The timing method, one of ``cost_models.timer.TIMING_METHODS`` (default ``warm``); part of the context.
    progress
        Called with a ``Progress`` after the cache lookup and after every measured task.
    f_build, f_run
        Dotted paths of the build function ``(task, target_json, out_dir) -> Artifact`` and the run function
        ``(artifact, RunSettings) -> Timing`` that the worker processes call.

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
        timing: str = "warm",
        progress: Callable[[Progress], None] | None = None,
        f_build: str = DEFAULT_BUILD,
        f_run: str = DEFAULT_RUN,
    ) -> None:
        cores = len(os.sched_getaffinity(0))
        if not 1 <= threads <= cores:
            raise MeasureError(f"threads must be between 1 and the {cores} usable cores, got {threads}")
        if min(builders, batch_size, repeat) < 1 or min(build_timeout, run_timeout) <= 0 or min_repeat_ms < 0:
            raise MeasureError("builders, batch_size and repeat must be >= 1, timeouts > 0 and min_repeat_ms >= 0")
        if timing not in TIMING_METHODS:
            raise MeasureError(f"unknown timing method {timing!r}; choose from {', '.join(TIMING_METHODS)}")
        try:
            resolve(f_build), resolve(f_run)  # fail here, not in every worker
        except WorkerError as exc:
            raise MeasureError(str(exc)) from exc
        self.cache, self.progress, self.batch_size = cache, progress, batch_size
        self.context = machine_context(target, threads, timing)
        self.target = self.context.target
        self.settings = RunSettings(threads, repeat, min_repeat_ms, timing)
        self._workdir = tempfile.TemporaryDirectory(prefix="tessera-measure-")
        workdir = self._workdir.name
        self._builders = WorkerPool(
            f_build, size=builders, timeout=build_timeout, environment={}, log_dir=workdir, label="build"
        )
        self._runner = WorkerPool(
            f_run, size=1, timeout=run_timeout, environment={"TVM_NUM_THREADS": str(threads)}, log_dir=workdir,
            label="run",
        )

    def measure(self, tasks: Sequence[Task]) -> list[CostRecord]:
        """Records of ``tasks`` in order: cached ones looked up, the rest measured (and cached) now."""
        tasks = list(tasks)
        keys = [None if task.free else task.key for task in tasks]
        records = self.cache.get_many(self.context, [key for key in keys if key is not None])
        missing = {key: task for key, task in zip(keys, tasks) if key is not None and key not in records}
        tracker = _Tracker(len(missing), len(records), self.progress)
        if missing:
            self._runner.start()  # imports in the background during the first builds
        pending = list(missing.items())
        for start in range(0, len(pending), self.batch_size):
            for key, record in self._measure_batch(pending[start : start + self.batch_size], tracker):
                records[key] = record
        return [FREE if key is None else records[key] for key in keys]

    def _measure_batch(self, batch: list[tuple[str, Task]], tracker: _Tracker) -> list[tuple[str, CostRecord]]:
        results: list[tuple[str, CostRecord]] = []
        built: list[tuple[str, object]] = []

        def record(key: str, result: CostRecord) -> None:
            self.cache.put(self.context, key, result)
            results.append((key, result))
            tracker.finished(result.ok)

        def on_built(index: int, outcome: Outcome) -> None:
            key = batch[index][0]
            if outcome.error is None:
                built.append((key, outcome.value))
            else:
                record(key, CostRecord.failed(outcome.error))

        def on_timed(index: int, outcome: Outcome) -> None:
            key, artifact = built[index]
            Path(artifact.path).unlink(missing_ok=True)
            if outcome.error is None:
                timing = outcome.value
                record(key, CostRecord(timing.median_ms, timing.iqr_ms, timing.repeats, measured_at=time.time()))
            else:
                record(key, CostRecord.failed(outcome.error))

        self._builders.map([(task, self.target, self._workdir.name) for _, task in batch], on_built)
        self._runner.map([(artifact, self.settings) for _, artifact in built], on_timed)
        return results

    def close(self) -> None:
        """Stop the worker processes and delete the build directory."""
        self._builders.close()
        self._runner.close()
        self._workdir.cleanup()


class _Tracker:
    """Counts finished measurements and reports ``Progress`` to the callback."""

    def __init__(self, total: int, hits: int, callback: Callable[[Progress], None] | None) -> None:
        self.total, self.hits, self.callback = total, hits, callback
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
        self.callback(Progress(self.done, self.total, self.hits, self.failures, elapsed, eta))
