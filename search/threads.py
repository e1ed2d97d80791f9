"""The TVM runtime's thread count: the one place ``TVM_NUM_THREADS`` is set.

TVM sizes its CPU thread pool once per process, from ``TVM_NUM_THREADS``, when the runtime first runs something
parallel; afterwards ``runtime.config_threadpool`` can only choose between 1 and that many. So the count is set before
TVM first runs (``use_threads``), and child processes are handed it in their environment (``thread_variables``).
"""

from __future__ import annotations

import os

from search.errors import SearchError

MAX_THREADS = 1024
"""The most threads a module is compiled for or an artifact may ask for."""
VARIABLE = "TVM_NUM_THREADS"
PEER_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
"""The thread counts other engines (PyTorch, ONNX Runtime, OpenVINO's OpenMP parts) read."""


def usable_cores() -> int:
    """Cores this process may run on."""
    return len(os.sched_getaffinity(0))


def check_threads(threads: int | None) -> int:
    """``threads`` validated (1 to the usable cores); None means every usable core."""
    cores = usable_cores()
    threads = cores if threads is None else threads
    if not isinstance(threads, int) or isinstance(threads, bool) or not 1 <= threads <= cores:
        raise SearchError(f"threads must be an integer from 1 to the {cores} usable cores, got {threads!r}")
    return threads


def use_threads(threads: int | None) -> int:
    """Validate ``threads`` (None: every usable core) and make it this process's TVM pool size; returns it.

    Takes effect if TVM's pool has not started yet (``runtime_threads`` of a timing says what it ran)."""
    threads = check_threads(threads)
    set_pool_size(threads)
    return threads


def set_pool_size(threads: int) -> None:
    """Make ``threads`` this process's TVM pool size, unchecked (an artifact's recorded count, say)."""
    os.environ[VARIABLE] = str(int(threads))


def reserve_pool(threads: int | None = None) -> None:
    """Unless a count was set, let TVM's pool, when it starts, hold ``threads`` (default: every usable core), so that
    kernels can later be timed with any count up to that (``cost_models.timer.configure_threads``)."""
    os.environ.setdefault(VARIABLE, str(usable_cores() if threads is None else int(threads)))


def thread_variables(threads: int, *, peers: bool = False) -> dict[str, str]:
    """The environment variables that give a child process's TVM runtime ``threads`` threads (with ``peers``, the
    other engines' thread pools too)."""
    names = (VARIABLE, *PEER_VARIABLES) if peers else (VARIABLE,)
    return dict.fromkeys(names, str(threads))
