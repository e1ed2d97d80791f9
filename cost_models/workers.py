"""Isolated worker processes that build and time candidates, and the default build and run functions they call.

A ``WorkerPool`` runs one function, named by a dotted path (like MetaSchedule's ``f_build`` / ``f_run``), in
``size`` persistent spawned processes: importing TVM takes seconds, so a process serves many jobs. A job that raises
is reported with its exception; a job that kills its process (segfault, abort, LLVM fatal error) or outlives the
timeout is reported with the reason, and the process is replaced, so the caller goes on. A worker's stderr goes to a
log file whose tail joins the reason of a crash (LLVM prints its fatal errors there). Workers ignore SIGINT and exit
when the parent process goes away.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import signal
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from cost_models.cache import DEFAULT_TIMING

STARTUP_TIMEOUT = 300.0  # seconds for a worker to import its function (TVM) on a busy machine
LOG_TAIL = 800  # characters of a crashed worker's stderr kept in the reason
MESSAGE_LIMIT = 2000  # characters of an exception message kept in the reason


class WorkerError(RuntimeError):
    """A worker cannot start (its function does not import, or it dies first): nothing can be measured."""


@dataclass(frozen=True)
class Artifact:
    """A built task: a shared library exporting "main" and the (shape, dtype) of each of its arguments; ``vm``: the
    library is a Relax VM executable whose "main" takes the inputs (else a PrimFunc, its output an argument too)."""

    path: str
    shapes: tuple[tuple[tuple[int, ...], str], ...]
    vm: bool = False


PASSES = 2
"""Passes over a batch in which ``LocalMeasurer`` times every task, keeping each task's fastest pass: the shared
hosts slow down for seconds at a time (x1.3-2, docs/fidelity.md), which inflates one timing but rarely two taken
a batch's length apart."""


@dataclass(frozen=True)
class RunSettings:
    """How the runner times an artifact (see ``cost_models.timer.time_kernel``): ``repeat`` repeats in all, spread
    over ``passes`` timings (``per_pass``)."""

    threads: int
    repeat: int = 5
    min_repeat_ms: int = 50
    method: str = DEFAULT_TIMING
    passes: int = PASSES
    max_repeats: int | None = None  # None: the timer's MAX_COLD_REPEATS

    def per_pass(self) -> RunSettings:
        """The settings of one pass: the repeats, their minimum length and the most single-call repeats divided among
        the passes (at least one repeat each), so that the passes together cost what one timing did."""
        from cost_models.timer import MAX_COLD_REPEATS

        most = self.max_repeats or MAX_COLD_REPEATS
        return replace(self, repeat=max(1, self.repeat // self.passes), min_repeat_ms=self.min_repeat_ms // self.passes,
                       max_repeats=max(1, most // self.passes), passes=1)


def build_artifact(task: Any, target: str, out_dir: str) -> Artifact:
    """Default builder: ``task.primfunc`` (or ``task.module``, a Relax module lowered as export lowers it) compiled
    for ``target`` (a Target's JSON string) into a library in ``out_dir``."""
    import tvm

    from cost_models.timer import argument_shapes, build_executable
    from search.microkernels import link_options

    target = tvm.target.Target(target)
    handle, path = tempfile.mkstemp(suffix=".so", dir=out_dir)
    os.close(handle)
    if hasattr(task, "module"):
        from search.lower import lower_and_compile

        module = task.module()
        executable, _ = lower_and_compile(module, {}, target)
        executable.export_library(path, **link_options())
        params = module["main"].params
        return Artifact(path, tuple((tuple(int(d) for d in p.ty.shape.values), str(p.ty.dtype)) for p in params),
                        vm=True)
    func = task.primfunc(target)
    build_executable(func, target).export_library(path, **link_options())
    return Artifact(path, tuple(argument_shapes(func)))


def run_artifact(artifact: Artifact, settings: RunSettings) -> Any:
    """Default runner: the ``Timing`` of the artifact's "main" on random arguments."""
    import tvm

    from cost_models.timer import time_kernel

    module = tvm.runtime.load_module(artifact.path)
    if artifact.vm:
        from tvm import relax

        module = relax.VirtualMachine(module, tvm.cpu())
    limit = {"max_repeats": settings.max_repeats} if settings.max_repeats else {}
    return time_kernel(module, artifact.shapes, threads=settings.threads, repeat=settings.repeat,
                       min_repeat_ms=settings.min_repeat_ms, method=settings.method, **limit)


def resolve(path: str) -> Callable[..., Any]:
    """The function named by a dotted path ``package.module.function``."""
    module, _, name = path.rpartition(".")
    try:
        function = getattr(importlib.import_module(module), name, None) if module else None
    except ImportError as exc:
        raise WorkerError(f"cannot import {path!r}: {exc}") from exc
    if not callable(function):
        raise WorkerError(f"{path!r} does not name a function (expected package.module.function)")
    return function


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:MESSAGE_LIMIT]


def _exit_when_orphaned(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def _serve(conn, function_path: str, environment: dict[str, str], log_path: str, parent: int,
           cores: Sequence[int] | None = None) -> None:
    """Worker main loop: receive argument tuples, reply ("ok", result) or ("error", message); EOF ends it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if cores is not None:
        os.sched_setaffinity(0, cores)
    os.environ.update(environment)
    tempfile.tempdir = None  # taken from the environment's TMPDIR at its next use
    os.dup2(os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 2)
    threading.Thread(target=_exit_when_orphaned, args=(parent,), daemon=True).start()
    try:
        function = resolve(function_path)
    except Exception as exc:  # reported to the parent, which raises WorkerError
        conn.send(("broken", _describe(exc)))
        return
    conn.send(("ready", None))
    while True:
        try:
            args = conn.recv()
        except EOFError:
            return
        os.ftruncate(2, 0)  # the log holds this job's output only
        os.lseek(2, 0, os.SEEK_SET)
        try:
            reply = ("ok", function(*args))
        except Exception as exc:  # the job failed; the worker goes on
            reply = ("error", _describe(exc))
        conn.send(reply)


@dataclass(frozen=True)
class Outcome:
    """What a job gave: its return value, or why it failed."""

    value: Any = None
    error: str | None = None


class _Worker:
    def __init__(self, pool: WorkerPool, log: Path) -> None:
        self.pool, self.log = pool, log
        self.job: int | None = None
        self.start()

    def start(self) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        pool = self.pool
        self.process = context.Process(
            target=_serve,
            args=(child, pool.function, pool.environment, str(self.log), os.getpid(), pool.cores),
            name=f"tessera-{pool.label}",
            daemon=True,
        )
        self.process.start()
        child.close()
        self.ready, self.job, self.deadline = False, None, time.monotonic() + STARTUP_TIMEOUT

    def submit(self, index: int, args: tuple) -> None:
        self.conn.send(args)
        self.job, self.deadline = index, time.monotonic() + self.pool.timeout

    def stop(self, kill: bool) -> None:
        if kill:
            self.process.kill()
        self.conn.close()  # an idle worker sees EOF and exits
        self.process.join(5.0)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()

    def restart(self) -> None:
        self.stop(kill=True)
        self.start()

    def death(self) -> str:
        """Why the (dead) process ended, with the tail of its stderr."""
        self.process.join(5.0)
        code = self.process.exitcode
        how = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit status {code}"
        tail = self.log.read_text(errors="replace").strip()[-LOG_TAIL:] if self.log.exists() else ""
        return f"{how}: {tail}" if tail else how


class WorkerPool:
    """``size`` persistent processes running the function at dotted path ``function``, one job each at a time.

    Parameters
    ----------
    function
        ``package.module.function``; must be importable in a fresh interpreter.
    size
        Number of processes.
    timeout
        Seconds a job may take before its process is killed and the job reported as timed out.
    environment
        Variables set in each process before it imports ``function``'s module or runs anything.
    log_dir
        Where the processes' stderr logs go.
    label
        Names the processes and prefixes failure reasons ("build", "run").
    cores
        The cores the processes may run on (default: the parent's).
    """

    def __init__(
        self, function: str, *, size: int, timeout: float, environment: dict[str, str], log_dir: str, label: str,
        cores: Sequence[int] | None = None,
    ) -> None:
        self.function, self.timeout, self.environment = function, timeout, dict(environment)
        self.cores = None if cores is None else tuple(cores)
        self.log_dir, self.label, self.size = log_dir, label, size
        self.workers: list[_Worker] = []
        self._spawned = 0

    def start(self) -> None:
        """Spawn missing processes (they import in the background); ``map`` does this when needed."""
        while len(self.workers) < self.size:
            self._spawned += 1
            self.workers.append(_Worker(self, Path(self.log_dir) / f"{self.label}-{self._spawned}.log"))

    def map(self, jobs: Sequence[tuple], on_result: Callable[[int, Outcome], None]) -> None:
        """Run ``function(*job)`` for every job, calling ``on_result(index, outcome)`` as each one finishes.

        Returns once every job has finished and every process is ready again (a replacement has imported), so
        nothing keeps running in the background. Raises WorkerError if a process cannot start.
        """
        self.start()
        queue = deque(enumerate(jobs))
        try:
            while queue or any(w.job is not None or not w.ready for w in self.workers):
                for worker in self.workers:
                    if worker.ready and worker.job is None and queue:
                        worker.submit(*queue.popleft())
                waiting = [w.deadline for w in self.workers if w.job is not None or not w.ready]
                ready = wait([w.conn for w in self.workers], max(0.0, min(waiting) - time.monotonic()))
                for worker in self.workers:
                    if worker.conn in ready:
                        self._receive(worker, on_result)
                    elif (worker.job is not None or not worker.ready) and time.monotonic() >= worker.deadline:
                        self._expire(worker, on_result)
        finally:
            for worker in [w for w in self.workers if w.job is not None]:  # interrupted: drop jobs in flight
                worker.stop(kill=True)
                self.workers.remove(worker)

    def _receive(self, worker: _Worker, on_result: Callable[[int, Outcome], None]) -> None:
        try:
            kind, value = worker.conn.recv()
        except (EOFError, OSError):
            reason, index = worker.death(), worker.job
            if not worker.ready:
                raise WorkerError(f"{self.label} worker died while starting ({reason})") from None
            worker.restart()
            if index is not None:
                on_result(index, Outcome(error=f"{self.label} process crashed ({reason})"))
            return
        if kind == "broken":
            raise WorkerError(f"{self.label} worker cannot start: {value}")
        if kind == "ready":
            worker.ready = True
            return
        index, worker.job = worker.job, None
        on_result(index, Outcome(value=value) if kind == "ok" else Outcome(error=f"{self.label} failed: {value}"))

    def _expire(self, worker: _Worker, on_result: Callable[[int, Outcome], None]) -> None:
        if not worker.ready:
            raise WorkerError(f"{self.label} worker did not start within {STARTUP_TIMEOUT:.0f} s")
        index = worker.job
        worker.restart()
        on_result(index, Outcome(error=f"{self.label} timed out after {self.timeout:g} s"))

    def close(self) -> None:
        """Stop every process (idle ones exit on their own, busy ones are killed)."""
        for worker in self.workers:
            worker.stop(kill=worker.job is not None)
        self.workers = []
