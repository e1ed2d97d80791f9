"""How an exported library runs its parallel loops: the settings its manifest records and the loader applies.

TVM's thread pool gives each thread one fixed share of every parallel loop, binds its threads to cores and waits for
the last share with ``sched_yield``. Beside one other busy thread that makes a network of many small kernels tens of
times slower (each loop waits for the share whose core is taken, and the yield hands the waiting core away too).
tessera's pool (``runtime_pool.cc``, compiled into every exported library) cuts each loop into ``chunks_per_thread``
chunks per thread that any thread takes while some are left, does not bind threads, and waits by spinning with the
CPU's pause instruction for ``spin_us`` microseconds, then sleeping. A worker that waited to run for over a quarter of
its runnable time in each of the last two windows of 50 ms shares its core with another runnable thread; it then
sleeps at once instead of spinning (unless ``spin_on_shared_cores``), since spinning there spends the share of the
core the system grants it and gets it descheduled when work arrives. When its workers stop pulling their weight over
50 ms of loops (the caller stalled over a quarter of that time waiting for a worker descheduled in the middle of a
chunk, or the workers took under half their share of the chunks), the calling thread runs the loops alone for a
while, doubling while that keeps happening: one thread on a free core beats two fighting over a busy one.
``pool="tvm"`` keeps TVM's pool as TVM sets it up (threads bound to cores).

``apply_runtime`` is what ``Artifact.virtual_machine`` calls: the library's ``__TVMBackendParallelLaunch`` (the
pointer TVM's loader sets to its own pool) is pointed at the library's ``tessera_parallel_launch``.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from search.errors import SearchError
from search.microkernels import link_options
from search.native import object_file

SOURCE = Path(__file__).with_name("runtime_pool.cc")
COMPILE_OPTIONS = ("-O2", "-std=c++17", "-pthread", "-fPIC")
"""How ``SOURCE`` is compiled (once: ``search.native``)."""
POOLS = ("tessera", "tvm")
LAUNCH_POINTER = "__TVMBackendParallelLaunch"
BARRIER_POINTER = "__TVMBackendParallelBarrier"
"""A library that synchronises threads inside a loop needs TVM's pool (chunks there are its threads)."""


@dataclass(frozen=True)
class RuntimeSettings:
    """How the exported library runs its parallel loops (see the module docstring)."""

    pool: Literal["tessera", "tvm"] = "tessera"
    chunks_per_thread: int = 2
    spin_us: int = 100
    spin_on_shared_cores: bool = False

    def __post_init__(self) -> None:
        if self.pool not in POOLS:
            raise SearchError(f"runtime pool must be one of {', '.join(POOLS)}, got {self.pool!r}")
        for name, low, high in (("chunks_per_thread", 1, 64), ("spin_us", 0, 100_000)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise SearchError(f"runtime {name} must be an integer from {low} to {high}, got {value!r}")
        if not isinstance(self.spin_on_shared_cores, bool):
            raise SearchError(f"runtime spin_on_shared_cores must be true or false, got {self.spin_on_shared_cores!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> RuntimeSettings:
        """Settings from a manifest's ``runtime`` (an artifact exported before it had one: TVM's pool)."""
        if data is None:
            return cls(pool="tvm")
        if not isinstance(data, dict) or set(data) - set(cls.__dataclass_fields__):
            raise SearchError(f"runtime settings must be a table of {', '.join(cls.__dataclass_fields__)}, "
                              f"got {data!r}")
        return cls(**data)


DEFAULT_RUNTIME = RuntimeSettings()


def set_tvm_binding(settings: RuntimeSettings) -> None:
    """Beside tessera's pool, keep TVM's (which runs whatever is not the library's) from binding threads to cores
    when it starts (it reads ``TVM_BIND_THREADS``)."""
    if settings.pool == "tessera":
        os.environ.setdefault("TVM_BIND_THREADS", "0")


def apply_runtime(library_path: Path, settings: RuntimeSettings, threads: int) -> str:
    """Make the loaded library ``library_path`` run its parallel loops as ``settings`` say, on ``threads`` threads;
    returns the pool in use: "tessera", or "tvm" when asked for or when the library needs TVM's pool (it has none of
    tessera's, or it synchronises threads inside a loop).

    tessera's pool starts once per library and process: the first call's ``threads`` and settings hold for it."""
    set_tvm_binding(settings)
    library = ctypes.CDLL(str(library_path))  # the handle TVM's loader opened, not a second copy
    configure = getattr(library, "tessera_pool_configure", None)
    if configure is None or _has_symbol(library, BARRIER_POINTER) or not _has_symbol(library, LAUNCH_POINTER):
        return "tvm"
    pointer = ctypes.c_void_p.in_dll(library, LAUNCH_POINTER)
    launch = ctypes.cast(library.tessera_parallel_launch, ctypes.c_void_p).value
    if pointer.value != launch:
        _TVM_LAUNCH[str(library_path)] = pointer.value
    if settings.pool == "tvm":
        pointer.value = _TVM_LAUNCH.get(str(library_path), pointer.value)
        return "tvm"
    configure(ctypes.c_int(threads), ctypes.c_int(settings.chunks_per_thread), ctypes.c_int(settings.spin_us),
              ctypes.c_int(settings.spin_on_shared_cores))
    pointer.value = launch
    return "tessera"


_TVM_LAUNCH: dict[str, int | None] = {}
"""Per library path, the launch TVM's loader set, to go back to."""


@dataclass(frozen=True)
class PoolStatistics:
    """What tessera's pool of a loaded library did since it started: parallel loops launched, loops the caller ran
    alone while the workers were benched, benches, and waits in which a worker slept at once because its core was
    shared."""

    launches: int
    alone: int
    benches: int
    shared_core_waits: int

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def pool_statistics(library_path: Path) -> PoolStatistics | None:
    """The statistics of the library's pool (``library_path``, loaded in this process); None if the library has no
    tessera pool or it has not started."""
    library = ctypes.CDLL(str(library_path))
    read = getattr(library, "tessera_pool_statistics", None)
    if read is None:
        return None
    fields = len(PoolStatistics.__dataclass_fields__)
    counts = (ctypes.c_longlong * fields)()
    if read(counts, ctypes.c_int(fields)) != fields:
        return None
    return PoolStatistics(*counts)


def _has_symbol(library: ctypes.CDLL, name: str) -> bool:
    try:
        ctypes.c_void_p.in_dll(library, name)
    except ValueError:
        return False
    return True


def export_options() -> dict[str, Any]:
    """The keyword arguments of ``export_library`` that link tessera's pool and its micro-kernels
    (``search.microkernels``) into the library."""
    return {"addons": [str(object_file(SOURCE, COMPILE_OPTIONS)), *link_options()["addons"]], "options": ["-pthread"]}
