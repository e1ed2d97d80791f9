"""Fault injection for the measurement workers: build and run functions that crash, hang or raise for chosen tasks
and otherwise do exactly what the default ones do (``MeasuredCosts(f_build=..., f_run=...)`` takes their dotted paths).

The fault is chosen by the height of a transform task: ``task(SEGFAULT, width)`` is a task whose build segfaults.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

from cost_models.tasks import TransformTask
from cost_models.workers import Artifact, RunSettings, build_artifact, run_artifact

SEGFAULT = 91  # the builder dereferences NULL
ABORT = 92  # the builder prints an LLVM-style fatal error and aborts
HANG = 93  # the builder sleeps past any timeout
RAISE = 94  # the builder raises
RUN_SEGFAULT = 95  # builds fine, the runner dereferences NULL
SLOW_FIRST = 96  # the runner reports its first timing of the task 10 ms slower (a slow window in pass 1)
SLOW_SECOND = 97  # ... its second timing
_RUN_SEGFAULT_DIR = "segfault-when-run"
_timed: dict[str, int] = {}  # the runner's timings so far, by library


def task(fault: int, width: int = 1) -> TransformTask:
    """A tiny transform whose measurement meets ``fault``."""
    return TransformTask((1, 8, fault, width), "NCHW", "NHWC")


def build(task: object, target: str, out_dir: str) -> Artifact:
    fault = task.shape[2] if isinstance(task, TransformTask) else None
    if fault == SEGFAULT:
        ctypes.string_at(0)
    if fault == ABORT:
        print("LLVM ERROR: injected fatal error", file=sys.stderr, flush=True)
        os.abort()
    if fault == HANG:
        time.sleep(3600)
    if fault == RAISE:
        raise ValueError("injected build error")
    if fault == RUN_SEGFAULT:
        out_dir = str(Path(out_dir) / _RUN_SEGFAULT_DIR)
        os.makedirs(out_dir, exist_ok=True)
    return build_artifact(task, target, out_dir)


def run(artifact: Artifact, settings: RunSettings):
    if Path(artifact.path).parent.name == _RUN_SEGFAULT_DIR:
        ctypes.string_at(0)
    timing = run_artifact(artifact, settings)
    _timed[artifact.path] = count = _timed.get(artifact.path, 0) + 1
    slow = {SLOW_FIRST: 1, SLOW_SECOND: 2}.get(artifact.shapes[0][0][2])
    return replace(timing, median_ms=timing.median_ms + 10.0) if count == slow else timing
