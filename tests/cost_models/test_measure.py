"""Measured costs: cache keying, transform costs, failure isolation in worker processes, resume after SIGKILL.

Real TVM builds and timings of tiny kernels in real worker processes; faults come from ``tests.cost_models.faulty``.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import tempfile
import time

import psutil
import pytest

from cost_models import CostCache, KernelTask, MeasuredCosts, MeasureError, TransformTask
from cost_models.cache import DEFAULT_TIMING
from cost_models.measure import LocalMeasurer
from cost_models.timer import MAX_COLD_REPEATS
from cost_models.workers import PASSES, RunSettings
from search.errors import SearchError
from search.host import make_target
from search.templates import Conv2DWorkload, Epilogue, KernelSpec
from tests.cost_models import faulty, traced
from tests.quick_costs import QUICK

THREADS = min(2, len(os.sched_getaffinity(0)))
TARGET = make_target(THREADS)
CONV = Conv2DWorkload(1, 8, 8, 8, 16, (3, 3), (1, 1), (1, 1, 1, 1))


def conv_task(in_layout: str = "NCHW8c", out_layout: str = "NCHW16c", knobs=(), relu: bool = True) -> KernelTask:
    return KernelTask(KernelSpec(CONV, in_layout, out_layout, knobs, Epilogue(activation="relu" if relu else None)))


def provider(path, events: list | None = None, **options) -> MeasuredCosts:
    progress = events.append if events is not None else None
    options = {"target": TARGET, "threads": THREADS, "progress": progress, **QUICK, **options}
    return MeasuredCosts(CostCache(path), **options)


def test_keys_depend_on_the_workload_only():
    assert conv_task().key == conv_task().key and conv_task() == conv_task()  # two nodes, one measurement
    others = [conv_task("NCHW"), conv_task(out_layout="NCHW8c"), conv_task(knobs=(("reg_n", 4),)), conv_task(relu=0)]
    assert len({conv_task().key, *(task.key for task in others)}) == 5
    transform = TransformTask([1, 16, 8, 8], "NCHW", "NCHW16c")
    assert transform.shape == (1, 16, 8, 8) and transform == TransformTask((1, 16, 8, 8), "NCHW", "NCHW16c")
    assert transform.key != TransformTask((1, 16, 8, 8), "NCHW16c", "NCHW").key
    assert TransformTask((1, 16, 8, 8), "NHWC", "NHWC").free and not transform.free
    with pytest.raises(SearchError, match="divisible"):
        TransformTask((1, 12, 8, 8), "NCHW", "NCHW8c")
    with pytest.raises(SearchError, match="NCHW or NC shape"):
        TransformTask((1, 16, 8), "NCHW", "NHWC")
    with pytest.raises(SearchError, match="holds 4-D tensors"):
        TransformTask((1, 16), "NCHW", "NHWC")


def test_rejects_settings_that_cannot_measure(tmp_path):
    with pytest.raises(MeasureError, match="threads"):
        provider(tmp_path / "c.sqlite", threads=len(os.sched_getaffinity(0)) + 1)
    with pytest.raises(MeasureError, match="cannot import"):
        provider(tmp_path / "c.sqlite", f_build="no_such_module.build")
    with pytest.raises(MeasureError, match="builders"):
        provider(tmp_path / "c.sqlite", builders=0)


def test_shared_workloads_are_measured_once_and_cached(tmp_path):
    events = []
    cache_path = tmp_path / "c.sqlite"
    relayout = TransformTask((1, 16, 8, 8), "NCHW16c", "NHWC")
    identity = TransformTask((1, 16, 8, 8), "NCHW8c", "NCHW8c")
    tasks = [conv_task(), relayout, conv_task(), identity]  # the conv on two "nodes"
    with provider(cache_path, events, builders=1) as costs:
        records = costs.measure(tasks)
        assert (events[0].total, events[0].hits, events[-1].done, events[-1].failures) == (2, 0, 2, 0)
        assert [e.done for e in events] == [0, 1, 2] and events[-1].eta == 0
        assert len(CostCache(cache_path)) == 2
        kernel, transform, again, free = records
        assert kernel == again and kernel.ok and kernel.median_ms > 0
        per_pass = costs.settings.per_pass()  # context timing: one call per repeat, a pass's share of them
        assert per_pass.repeat <= kernel.repeats <= per_pass.max_repeats == MAX_COLD_REPEATS // PASSES
        assert 0 <= kernel.spread_ms < kernel.median_ms
        assert transform.ok and transform.median_ms > 0  # different layouts cost time
        assert free.ok and free.median_ms == 0  # identical layouts cost nothing, unmeasured

        events.clear()
        assert costs.measure(tasks) == records  # everything from the cache
        assert [(e.total, e.hits, e.done) for e in events] == [(0, 2, 0)]


def test_records_of_different_timing_methods_never_mix(tmp_path):
    cache_path = tmp_path / "c.sqlite"
    with provider(cache_path) as default:
        (first,) = default.measure([conv_task()])
        assert default.context.timing == DEFAULT_TIMING == "context"
    with provider(cache_path, timing="warm") as warm:
        (second,) = warm.measure([conv_task()])  # measured again, under its own context
        assert warm.context.timing == "warm" and second.ok and second.repeats == warm.settings.per_pass().repeat
    assert len(CostCache(cache_path)) == 2
    with provider(cache_path) as default:
        assert default.measure([conv_task()]) == [first]
    with pytest.raises(MeasureError, match="unknown timing method 'hot'"):
        provider(cache_path, timing="hot")


def test_crashes_and_hangs_are_recorded_and_the_search_goes_on(tmp_path):
    events = []
    good = [conv_task(), TransformTask((1, 8, 3, 3), "NCHW", "NCHW8c"), TransformTask((1, 8, 3, 13), "NCHW", "NHWC")]
    faults = {
        faulty.task(faulty.SEGFAULT): ["build process crashed", "SIGSEGV"],
        faulty.task(faulty.ABORT): ["build process crashed", "SIGABRT", "LLVM ERROR: injected fatal error"],
        faulty.task(faulty.HANG): ["build timed out after 12 s"],
        faulty.task(faulty.RAISE): ["build failed", "ValueError: injected build error"],
        faulty.task(faulty.RUN_SEGFAULT): ["run process crashed", "SIGSEGV"],
    }
    tasks = [good[0], *faults, *good[1:]]
    options = {"f_build": "tests.cost_models.faulty.build", "f_run": "tests.cost_models.faulty.run"}
    with provider(tmp_path / "c.sqlite", events, build_timeout=12, batch_size=4, **options) as costs:
        records = dict(zip(tasks, costs.measure(tasks)))
        for task, reasons in faults.items():
            assert not records[task].ok
            for reason in reasons:
                assert reason in records[task].error
        assert all(records[task].ok and records[task].median_ms > 0 for task in good)
        assert (events[-1].done, events[-1].total, events[-1].failures) == (len(tasks), len(tasks), len(faults))

        cached = CostCache(tmp_path / "c.sqlite").get_many(costs.context, [task.key for task in faults])
        assert all(not record.ok for record in cached.values()) and len(cached) == len(faults)
        events.clear()
        assert costs.measure(list(faults)) == [records[task] for task in faults]  # forbidden, not retried
        assert events[-1].total == 0

        def interrupt(progress):  # e.g. Ctrl-C while a build is in flight
            if progress.done:
                raise KeyboardInterrupt

        later = [conv_task(out_layout="NHWC"), faulty.task(faulty.RAISE, width=2)]
        costs.progress = interrupt
        with pytest.raises(KeyboardInterrupt):
            costs.measure(later)
        costs.progress = events.append
        events.clear()
        conv, raised = costs.measure(later)  # the replaced workers serve on
        assert conv.ok and "injected build error" in raised.error
        assert (events[0].hits, events[0].total) == (1, 1)


def test_a_task_keeps_its_fastest_pass_so_a_slow_window_in_one_pass_is_left_out(tmp_path):
    tasks = [faulty.task(faulty.SLOW_FIRST), faulty.task(faulty.SLOW_SECOND)]  # a pass reported 10 ms slower
    options = {"f_build": "tests.cost_models.faulty.build", "f_run": "tests.cost_models.faulty.run", "repeat": 4}
    with provider(tmp_path / "two.sqlite", **options) as costs:
        records = costs.measure(tasks)
    assert all(record.ok and record.median_ms < 10 for record in records)  # the tiny transform takes microseconds
    with provider(tmp_path / "one.sqlite", passes=1, **options) as costs:
        slow, fast = costs.measure(tasks)
    assert slow.median_ms > 10 and fast.median_ms < 10
    with pytest.raises(MeasureError, match="passes must be >= 1"):
        provider(tmp_path / "none.sqlite", passes=0)


def _measure_in_child(path: str, tasks: list[TransformTask], scratch: str) -> None:
    tempfile.tempdir = scratch  # the build directory the SIGKILL leaves behind goes with the test's
    with provider(path, builders=1, batch_size=2) as costs:
        costs.measure(tasks)


def test_resume_after_sigkill_remeasures_nothing_cached_and_removes_the_killed_build_folder(tmp_path, monkeypatch):
    path = str(tmp_path / "c.sqlite")
    tasks = [TransformTask((1, 8, 4, width), "NCHW", "NCHW8c") for width in range(1, 15)]
    child = multiprocessing.get_context("spawn").Process(target=_measure_in_child, args=(path, tasks, str(tmp_path)))
    child.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not os.path.exists(path) or len(CostCache(path)) < 3):
        time.sleep(0.05)
    workers = psutil.Process(child.pid).children(recursive=True)
    os.kill(child.pid, signal.SIGKILL)
    child.join()
    cached = len(CostCache(path))
    assert 3 <= cached < len(tasks)
    assert workers and psutil.wait_procs(workers, timeout=15)[1] == []  # orphaned workers exit on their own
    assert len(list(tmp_path.glob(f"tessera-measure-{child.pid}-*"))) == 1  # the killed measurer's build folder

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    events = []
    with provider(path, events, builders=1) as costs:
        records = costs.measure(tasks)
        assert not list(tmp_path.glob(f"tessera-measure-{child.pid}-*"))  # the next measurer removed it
        assert len(list(tmp_path.glob(f"tessera-measure-{os.getpid()}-*"))) == 1  # its own lives until it closes
    assert (events[0].hits, events[0].total) == (cached, len(tasks) - cached)
    assert all(record.ok for record in records) and len(CostCache(path)) == len(tasks)


def test_chains_are_measured_through_the_vm_and_cached_like_kernels(tmp_path):
    from cost_models.tasks import ChainTask

    bn = (("channel_scale", ()), ("channel_shift", ()), ("relu", ()))
    concat = ChainTask("concat", ((1, 16, 8, 8), (1, 32, 8, 8)), bn, "NCHW8c")
    pooled = ChainTask("output", ((1, 16, 8, 8),), (("max_pool2d", (("ceil_mode", False), ("dilation", (1, 1)),
                                                                      ("padding", (0, 0, 0, 0)), ("pool_size", (2, 2)),
                                                                      ("strides", (2, 2)))),), "NHWC")
    copy = ChainTask("copy", ((1, 16, 8, 8), (1, 48, 8, 8)), bn, "NCHW8c")  # an in-place concat's copy
    assert len({concat.key, pooled.key, copy.key, ChainTask("concat", concat.inputs, bn, "NCHW16c").key}) == 4
    with pytest.raises(SearchError, match="divisible by 32"):
        ChainTask("concat", concat.inputs, bn, "NCHW32c")
    events = []
    with provider(tmp_path / "c.sqlite", events) as costs:
        first = costs.measure([concat, pooled, copy])
        assert all(record.ok and record.median_ms > 0 for record in first)
        events.clear()
        assert costs.measure([copy, pooled, concat]) == first[::-1] and events[-1].total == 0  # from the cache


def test_a_batch_the_cache_stays_locked_for_is_set_aside_for_an_import(tmp_path, monkeypatch, capsys):
    import sqlite3

    import cost_models.cache
    from cost_models.cache import CacheLockedError
    from experiments.cli import main

    path = tmp_path / "c.sqlite"
    tasks = [TransformTask((1, 8, 3, 3), "NCHW", "NCHW8c"), TransformTask((1, 8, 3, 13), "NCHW", "NHWC"), conv_task()]
    monkeypatch.setattr(cost_models.cache, "LOCK_SECONDS", 0.2)
    holder = sqlite3.connect(path, isolation_level=None)

    def another_writer(progress) -> None:  # takes the lock once the cache was found writable, before anything is stored
        if not holder.in_transaction:
            holder.execute("BEGIN IMMEDIATE")

    with provider(path, progress=another_writer, batch_size=2) as costs, pytest.raises(CacheLockedError) as caught:
        costs.measure(tasks)
    holder.execute("ROLLBACK")
    holder.close()
    (aside,) = tmp_path.glob("c.sqlite.*.pending.jsonl")
    assert f"what was measured last is in {aside} (tessera cache import {aside} --cache {path} adds it)" in str(
        caught.value)
    assert len(aside.read_text().splitlines()) == 2 and len(CostCache(path)) == 0
    assert main(["cache", "import", str(aside), "--cache", str(path)]) == 0
    assert "2 records read, 2 added" in capsys.readouterr().out
    events = []
    with provider(path, events) as costs:  # the import kept them: only the third is measured now
        assert all(record.ok for record in costs.measure(tasks))
    assert events[0].total == 1 and len(CostCache(path)) == 3


def test_with_a_core_beside_the_timing_threads_the_next_batch_builds_there_while_one_is_timed(tmp_path, monkeypatch):
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs a core beside the timing thread")
    tasks = [TransformTask((1, 8, 4, width), "NCHW", "NCHW8c") for width in range(1, 9)]
    options = {"f_build": "tests.cost_models.traced.build", "f_run": "tests.cost_models.traced.run",
               "threads": 1, "batch_size": 2}
    for overlap in (True, False):
        trace = tmp_path / f"overlap-{overlap}.jsonl"
        monkeypatch.setenv(traced.VARIABLE, str(trace))
        with provider(tmp_path / f"overlap-{overlap}.sqlite", overlap=overlap, **options) as costs:
            assert all(record.ok for record in costs.measure(tasks))
            spent = costs.spent()
        builds, runs = traced.jobs(trace, "build"), traced.jobs(trace, "run")
        assert len(builds) == len(tasks) and len(runs) == PASSES * len(tasks)
        assert traced.overlapping(builds, runs) == overlap
        if overlap:
            assert all(job["cores"] == cores[:1] for job in runs)
            assert all(job["cores"] == cores[1:] for job in builds)
            assert spent["overlapped builds"] > 0 and spent["timings"] > 0
        else:
            assert "overlapped builds" not in spent and spent["builds"] > 0


def test_batches_left_early_leave_the_builders_to_the_next_measurement(tmp_path):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs a core beside the timing thread")
    tasks = [(task.key, task) for task in (TransformTask((1, 8, 4, width), "NCHW", "NCHW8c") for width in range(1, 7))]
    measurer = LocalMeasurer(str(make_target(1)), RunSettings(1, **QUICK), builders=2, build_timeout=120,
                             run_timeout=60)
    try:
        assert measurer.overlap
        batches = measurer.measure_batches([tasks[:2], tasks[2:4]])
        first = dict(next(batches))  # the second batch builds meanwhile
        batches.close()  # left before the second batch is timed
        again = dict(measurer.measure(tasks[4:]))
    finally:
        measurer.close()
    assert set(first) == {key for key, _ in tasks[:2]} and set(again) == {key for key, _ in tasks[4:]}
    assert all(record.ok for record in [*first.values(), *again.values()])
