"""Standard background loads for interference timings: processes started here, always stopped here.

Each load is a set of ``python -c`` processes:

- ``one-core``: one process spinning on the last usable core (pinned there), as a busy application thread would;
- ``memory``: one process copying a 256 MiB array into another without end, streaming through memory (not pinned);
- ``all-cores-niced``: one spinning process per usable core at the lowest priority (nice 19), as a batch job would.

``BackgroundLoad`` starts a load on entry and stops it on exit, whatever ends the block. Its processes are also told
by the kernel to die with the process that started them (Linux ``PR_SET_PDEATHSIG``), so not even ``kill -9`` of the
benchmark leaves one spinning.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from types import TracebackType

SPIN = "while True:\n    pass"
STREAM = ("import numpy as np\nsource = np.ones(32 * 2**20)\ntarget = np.empty_like(source)\n"
          "while True:\n    np.copyto(target, source)")
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class LoadProcess:
    """One process of a load: its code, the cores it may run on (None: any) and its nice increment."""

    code: str
    cores: frozenset[int] | None = None
    nice: int = 0


def load_processes(name: str) -> list[LoadProcess]:
    """The processes of the load ``name`` (``LOADS``) on this machine's usable cores; ValueError for another name."""
    cores = sorted(os.sched_getaffinity(0))
    if name == "quiet":
        return []
    if name == "one-core":
        return [LoadProcess(SPIN, frozenset({cores[-1]}))]
    if name == "memory":
        return [LoadProcess(STREAM)]
    if name == "all-cores-niced":
        return [LoadProcess(SPIN, frozenset({core}), 19) for core in cores]
    raise ValueError(f"unknown load {name!r}; choose from {', '.join(LOADS)}")


LOADS = ("quiet", "one-core", "memory", "all-cores-niced")


def die_with_parent() -> None:
    """In a forked child, before exec: have the kernel kill it when the process that started it ends, however that
    ends (Linux ``PR_SET_PDEATHSIG``)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _child_setup(process: LoadProcess) -> None:
    """In the forked child, before exec: die with the parent, pin, lower the priority."""
    die_with_parent()
    if process.cores is not None:
        os.sched_setaffinity(0, process.cores)
    if process.nice:
        os.nice(process.nice)


class BackgroundLoad:
    """``with BackgroundLoad("one-core") as load:`` runs the load for the block; ``load.pids`` names its processes."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.processes = load_processes(name)
        self.running: list[subprocess.Popen] = []

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.running]

    def __enter__(self) -> BackgroundLoad:
        try:
            for process in self.processes:
                self.running.append(subprocess.Popen(
                    [sys.executable, "-c", process.code], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    preexec_fn=lambda p=process: _child_setup(p)))
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()

    def stop(self) -> None:
        """Kill every process of the load and reap it."""
        for process in self.running:
            if process.poll() is None:
                process.kill()
        for process in self.running:
            process.wait()
        self.running = []
