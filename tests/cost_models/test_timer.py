"""Kernel timer: real builds and runs of a tiny kernel, thread configuration, random inputs, summary statistics."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tvm

from cost_models.timer import (
    MAX_COLD_REPEATS,
    TimerError,
    Timing,
    argument_shapes,
    compile_kernel,
    configure_threads,
    random_arguments,
    time_kernel,
)
from search.host import make_target
from search.kinds import kernel_kind
from search.templates import Conv2DWorkload, Epilogue, KernelSpec

TARGET = make_target(2)
CORES = len(os.sched_getaffinity(0))


@pytest.fixture(scope="module")
def kernel() -> tvm.tirx.PrimFunc:
    wl = Conv2DWorkload(1, 8, 8, 8, 16, (3, 3), (1, 1), (1, 1, 1, 1))
    spec = KernelSpec(wl, "NCHW8c", "NCHW16c", (), Epilogue(activation="relu"))
    return kernel_kind(spec.workload.kind).build(spec, TARGET)


@pytest.mark.parametrize("threads", sorted({1, min(2, CORES)}))
def test_times_a_primfunc_with_the_requested_threads(kernel, threads):
    timing = time_kernel(kernel, target=TARGET, threads=threads, number=2, repeat=4, min_repeat_ms=1)
    assert timing.threads == threads == tvm.runtime.num_threads()
    assert timing.repeats == 4
    assert 0 < timing.min_ms <= timing.median_ms <= timing.max_ms
    assert 0 <= timing.iqr_ms <= timing.max_ms - timing.min_ms


@pytest.mark.parametrize("method", ["context", "cold"])
def test_flushing_methods_time_one_call_per_repeat(kernel, method):
    timing = time_kernel(kernel, target=TARGET, threads=1, repeat=3, min_repeat_ms=1, method=method)
    assert 3 <= timing.repeats <= MAX_COLD_REPEATS and 0 < timing.min_ms <= timing.median_ms <= timing.max_ms
    with pytest.raises(TimerError, match="unknown timing method 'hot'"):
        time_kernel(kernel, target=TARGET, threads=1, method="hot")


def test_times_a_built_module_given_shapes(kernel):
    shapes = argument_shapes(kernel)
    assert shapes[0] == ((1, 1, 8, 8, 8), "float32") and len(shapes) == 4  # data, weight, bias, out
    lib = compile_kernel(kernel, TARGET)
    assert time_kernel(lib, shapes, threads=1, number=1, repeat=2, min_repeat_ms=0).median_ms > 0
    with pytest.raises(TimerError, match="shapes"):
        time_kernel(lib, threads=1)


def test_rejects_what_it_cannot_do(kernel):
    with pytest.raises(TimerError, match="target"):
        time_kernel(kernel, threads=1)
    with pytest.raises(TimerError, match="threads"):
        configure_threads(0)
    with pytest.raises(TimerError, match="TVM_NUM_THREADS"):
        configure_threads(CORES + 1)


def test_random_arguments_are_random_and_reproducible():
    shapes = [((3, 40), "float32"), ((50,), "float32")]
    first = [t.numpy() for t in random_arguments(shapes, seed=1)]
    again = [t.numpy() for t in random_arguments(shapes, seed=1)]
    other = [t.numpy() for t in random_arguments(shapes, seed=2)]
    assert [a.shape for a in first] == [(3, 40), (50,)]
    for a, b, c in zip(first, again, other):
        assert a.std() > 0.3 and np.all(np.abs(a) <= 1) and np.isfinite(a).all()
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a, c)


def test_summary_statistics():
    timing = Timing.from_samples([4.0, 1.0, 3.0, 2.0, 100.0], threads=2)
    assert (timing.median_ms, timing.min_ms, timing.max_ms, timing.repeats) == (3.0, 1.0, 100.0, 5)
    assert timing.iqr_ms == pytest.approx(2.0)
    assert timing.gflops(6e6) == pytest.approx(2.0)
    single = Timing.from_samples([5.0], threads=1)
    assert single.iqr_ms == 0 and single.median_ms == 5.0
