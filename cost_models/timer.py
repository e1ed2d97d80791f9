"""Time one kernel on the CPU: build it, fill every argument with random data, warm up, time repeats, summarise.

Three timing methods (``TIMING_METHODS``), which differ in what the caches hold when a call starts:

- ``warm``: repeats of back-to-back calls (each repeat the mean of ``number`` calls lasting ``min_repeat_ms``): every
  argument stays in cache from the previous call, as when a kernel is timed alone;
- ``context``: one call per repeat, every argument but the first (the input activation) flushed from the caches before
  it (TVM's ``cache_flush_cpu_non_first_arg``, which AutoTVM used on x86): weights, bias, residual and output cold, as
  inside a network whose producer has just written the input;
- ``cold``: one call per repeat after evicting the whole last-level cache (twice its size flushed), input included.

Measurements that fill the cost cache use ``context`` unless told otherwise (``cost_models.cache.DEFAULT_TIMING``);
``time_kernel`` called directly defaults to ``warm``, a kernel's throughput as benchmarks quote it.

A single call per repeat needs many repeats for a stable median: as many as fit ``repeat * min_repeat_ms`` of kernel
time, between ``repeat`` and ``MAX_COLD_REPEATS`` (or a given ``max_repeats``).

TVM's CPU thread pool is created once per process, with ``TVM_NUM_THREADS`` workers (1 on this machine when unset),
and ``runtime.config_threadpool`` can only choose between 1 and that many afterwards. ``configure_threads`` therefore
first lets the pool hold every usable core unless a count was set (``search.threads.reserve_pool``), then asks it for
the requested count and checks that it got it. The pool pins its worker threads to cores (a pool of one thread
pins the calling thread itself, and threads it starts later, PyTorch's for one, inherit that).
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tvm

from cost_models.cache import TIMING_METHODS
from search.bf16_bits import STORAGE, to_bf16_bits
from search.threads import reserve_pool

_BIG_CORES = 1  # threading::ThreadGroup::kBig, TVM's default affinity mode
MAX_COLD_REPEATS = 200
LLC_FALLBACK_BYTES = 64 << 20  # when sysfs does not say


def last_level_cache_bytes() -> int:
    """Size of the largest CPU cache the kernel reports for cpu0 (sysfs), else ``LLC_FALLBACK_BYTES``."""
    sizes = []
    for entry in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = entry.read_text().strip().upper()
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes, default=LLC_FALLBACK_BYTES)


class TimerError(RuntimeError):
    """The kernel cannot be timed as asked (missing shapes, thread count the pool cannot provide)."""


@dataclass(frozen=True)
class Timing:
    """Per-call times of ``repeats`` repeats (each the mean of several calls), in milliseconds."""

    median_ms: float
    iqr_ms: float  # 75th minus 25th percentile of the repeats
    min_ms: float
    max_ms: float
    repeats: int
    threads: int

    @classmethod
    def from_samples(cls, samples_ms: Sequence[float], threads: int) -> Timing:
        ordered = sorted(samples_ms)
        if len(ordered) > 1:
            q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
        else:
            q1 = q3 = ordered[0]
        return cls(statistics.median(ordered), q3 - q1, ordered[0], ordered[-1], len(ordered), threads)

    def gflops(self, flops: float) -> float:
        """Throughput at the median time for a kernel doing ``flops`` floating-point operations."""
        return flops / (self.median_ms * 1e6)


def configure_threads(threads: int) -> int:
    """Make TVM's CPU runtime use ``threads`` threads; returns the count it reports using."""
    if threads < 1:
        raise TimerError(f"threads must be >= 1, got {threads}")
    reserve_pool()
    if tvm.runtime.num_threads() != threads:
        # Reconfiguring re-creates and re-pins the pool; timings right after it ran up to 2x slow (one effective
        # thread), so this happens only when the size really changes.
        tvm.get_global_func("runtime.config_threadpool")(_BIG_CORES, threads)
    actual = tvm.runtime.num_threads()
    if actual != threads:
        raise TimerError(
            f"TVM's thread pool runs {actual} threads, not {threads}: the pool is sized when first used, so set "
            f"TVM_NUM_THREADS>={threads} before that (and no more than the {len(os.sched_getaffinity(0))} usable cores)"
        )
    return actual


def build_executable(func: tvm.tirx.PrimFunc, target: tvm.target.Target):
    """Compile a PrimFunc (scheduled or not, with or without a global symbol) as a function named "main"; the result
    can be saved with ``export_library`` or made callable with ``.jit()``."""
    return tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), target=target)


def compile_kernel(func: tvm.tirx.PrimFunc, target: tvm.target.Target) -> tvm.runtime.Module:
    """Build a PrimFunc into a callable module named "main"."""
    return build_executable(func, target).jit()


def argument_shapes(func: tvm.tirx.PrimFunc) -> list[tuple[tuple[int, ...], str]]:
    """(shape, dtype) of each parameter buffer of ``func``."""
    return [(tuple(int(extent) for extent in param.shape), str(param.dtype)) for param in func.params]


def random_arguments(
    shapes: Sequence[tuple[tuple[int, ...], str]], seed: int = 0, device: tvm.runtime.Device | None = None
) -> list[tvm.runtime.Tensor]:
    """Tensors of uniform values in [-1, 1) (bf16 ones, ``search.bf16_bits.STORAGE``, as their bit patterns; 8-bit
    integers over their whole range): never uninitialised memory, whose denormals or NaNs skew timings."""
    rng = np.random.default_rng(seed)
    device = device or tvm.cpu()
    return [tvm.runtime.tensor(_uniform(rng, shape, dtype), device) for shape, dtype in shapes]


def _uniform(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if dtype in ("int8", "uint8"):
        limits = np.iinfo(dtype)
        return rng.integers(limits.min, limits.max, shape, dtype=dtype, endpoint=True)
    values = rng.uniform(-1, 1, shape)
    return to_bf16_bits(values) if dtype == STORAGE else values.astype(dtype)


def time_kernel(
    kernel: tvm.tirx.PrimFunc | tvm.runtime.Module,
    shapes: Sequence[tuple[tuple[int, ...], str]] | None = None,
    *,
    target: tvm.target.Target | None = None,
    threads: int,
    number: int = 10,
    repeat: int = 5,
    min_repeat_ms: int = 50,
    seed: int = 0,
    method: str = "warm",
    max_repeats: int = MAX_COLD_REPEATS,
) -> Timing:
    """Median and spread of the timed repeats of ``kernel`` on random arguments.

    Parameters
    ----------
    kernel
        A PrimFunc (built here for ``target``), an already built module with a "main" function, or a Relax
        ``VirtualMachine`` (its "main" is timed with the VM's own calls; ``shapes`` are its inputs').
    shapes
        (shape, dtype) per argument; read from the PrimFunc's parameters when omitted.
    threads
        TVM runtime threads to run with; recorded in the result.
    number, repeat, min_repeat_ms
        As ``Module.time_evaluator``: each repeat averages ``number`` calls, raised until it lasts ``min_repeat_ms``
        (``warm``); the other methods time one call per repeat, ``repeat`` to ``max_repeats`` of them.
    method : str
        One of ``TIMING_METHODS`` (see the module docstring).
    """
    if method not in TIMING_METHODS:
        raise TimerError(f"unknown timing method {method!r}; choose from {', '.join(TIMING_METHODS)}")
    if isinstance(kernel, tvm.tirx.PrimFunc):
        if target is None:
            raise TimerError("timing a PrimFunc needs a target to build it for")
        shapes = argument_shapes(kernel) if shapes is None else shapes
        kernel = compile_kernel(kernel, target)
    elif shapes is None:
        raise TimerError("timing a built module needs its argument shapes")
    actual = configure_threads(threads)
    device = tvm.cpu()
    args = random_arguments(shapes, seed, device)
    # Warm-up for at least min_repeat_ms, not one call: page in code and data, and let a freshly started thread
    # pool settle (the first calls after it starts can run at one thread's speed).
    warm_up = kernel.time_evaluator("main", device, number=1, repeat=1, min_repeat_ms=max(min_repeat_ms, 20))(*args)
    if method == "warm":
        evaluator = kernel.time_evaluator("main", device, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms)
        samples_ms = [seconds * 1e3 for seconds in evaluator(*args).results]
        return Timing.from_samples(samples_ms, actual)
    per_call_ms = max(warm_up.mean * 1e3, 1e-3)
    repeats = min(max_repeats, max(repeat, math.ceil(repeat * min_repeat_ms / per_call_ms)))
    if method == "context":
        evaluator = kernel.time_evaluator("main", device, number=1, repeat=repeats,
                                          f_preproc="cache_flush_cpu_non_first_arg")
        samples_ms = [seconds * 1e3 for seconds in evaluator(*args).results]
    else:  # cold: evict the last-level cache before each call (untimed)
        once, flush = kernel.time_evaluator("main", device, number=1, repeat=1), _Evictor()
        samples_ms = []
        for _ in range(repeats):
            flush()
            samples_ms.append(float(once(*args).mean) * 1e3)
    return Timing.from_samples(samples_ms, actual)


class _Evictor:
    """Writes a buffer twice the last-level cache's size, so that nothing a kernel touched stays in any cache."""

    def __init__(self) -> None:
        self.buffer = np.zeros(2 * last_level_cache_bytes() // 8)

    def __call__(self) -> None:
        self.buffer += 1.0
