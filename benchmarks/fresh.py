"""Time a kernel in a process of its own.

Timed one after another in one process, kernels drift: the same bf16 F(2x2) Winograd kernel ran 0.41 ms timed first
and 0.85-0.94 ms after other kernels, an fp32 F(4x4) one 0.42 -> 0.74 ms (AMD EPYC ``znver4``, 2026-12-06; not
explained). A fresh process per timing gives the figures the cost cache's workers measure.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

from cost_models.timer import Timing, time_kernel
from search.host import make_target
from search.kinds import kernel_kind
from search.templates import KernelSpec


def time_fresh(spec: KernelSpec, threads: int, repeat: int, min_repeat_ms: int = 100) -> Timing:
    """``spec``'s kernel built and timed (``time_kernel``, warm) in a new process, one timing at a time."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as fresh:
        return fresh.submit(_time, spec, threads, repeat, min_repeat_ms).result()


def _time(spec: KernelSpec, threads: int, repeat: int, min_repeat_ms: int) -> Timing:
    target = make_target(threads)
    return time_kernel(kernel_kind(spec.workload.kind).build(spec, target), target=target, threads=threads,
                       repeat=repeat, min_repeat_ms=min_repeat_ms)
