"""The drift check: cached kernels timed again against their records, the cache untouched."""

from __future__ import annotations

from dataclasses import replace

from cost_models import CostCache, KernelTask
from cost_models.drift import DRIFT_TOLERANCE, MAX_TOLERANCE, SPREADS, Drift, measure_drift
from tests.cost_models.test_measure import CONV, conv_task, provider


def wider_conv_task() -> KernelTask:
    """A kernel of another workload than ``conv_task``'s (twice the output channels)."""
    spec = conv_task().spec
    return KernelTask(replace(spec, workload=replace(CONV, out_channels=2 * CONV.out_channels)))


def test_kernels_timed_again_are_compared_with_their_records(tmp_path):
    path = tmp_path / "c.sqlite"
    fast, slow, unknown = conv_task(), wider_conv_task(), conv_task(relu=False)
    with provider(path, builders=1) as costs:
        costs.measure([fast, slow])
        cache, context = CostCache(path), costs.context
        records = cache.get_many(context, [fast.key, slow.key])
        # the records say fast ran in a nanosecond, which no kernel does, and slow 10x slower than it ran: µs kernels
        # timed again in another moment differed by 2.7x, and a record taken beside another test's threads was 400x
        # what the kernel took later (clean-clone runs), so no ratio to the kernel's own record is safe
        cache.put_many(context, {fast.key: replace(records[fast.key], median_ms=1e-6),
                                 slow.key: replace(records[slow.key], median_ms=records[slow.key].median_ms * 10)})
        before = {key: cache.get(context, key) for key in (fast.key, slow.key)}

        one = measure_drift(costs, [fast, slow, unknown, fast], probes=1)  # the longest record: slow's
        # compared with the record as it stands; whether now is below it depends on the moment (a kernel of a few
        # µs timed 660x its record beside another test's threads in a clean-clone run), so only the pairing is checked
        assert list(one.times) == [slow.key] and one.times[slow.key][0] == before[slow.key].median_ms
        assert one.ratio == one.times[slow.key][1] / one.times[slow.key][0]
        both = measure_drift(costs, [fast, slow, unknown])  # unknown has no record: not timed
        assert set(both.times) == {fast.key, slow.key}
        then, now = both.times[fast.key]
        assert then == before[fast.key].median_ms and now / then > 2.5
        assert Drift({fast.key: (then, now)}, now / then).disturbed
        assert {key: cache.get(context, key) for key in before} == before and cache.get(context, unknown.key) is None
    assert not Drift({}, 1.0).disturbed


def test_the_tolerance_widens_to_the_kernels_recorded_spread_up_to_a_limit(tmp_path):
    """A kernel whose recorded repeats spread by 40% of its median is judged by a wider tolerance than 10%, but not
    one that would let a slow window through."""
    path = tmp_path / "c.sqlite"
    task = conv_task()
    with provider(path, builders=1) as costs:
        (record,) = costs.measure([task])
        quiet = measure_drift(costs, [task])
        spread = record.spread_ms / record.median_ms
        assert quiet.tolerance == max(DRIFT_TOLERANCE, min(MAX_TOLERANCE, SPREADS * spread))
        CostCache(path).put_many(costs.context, {task.key: replace(record, spread_ms=0.4 * record.median_ms)})
        noisy = measure_drift(costs, [task])
        assert noisy.tolerance == MAX_TOLERANCE > DRIFT_TOLERANCE
        assert not Drift(noisy.times, 1.15, noisy.tolerance).disturbed
        assert Drift(noisy.times, 1.25, noisy.tolerance).disturbed


def test_one_workload_is_probed_once_by_its_longest_task(tmp_path):
    """Knob settings or epilogues of one workload time together; the probes are the longest task of each of the
    workloads recorded longest."""
    path = tmp_path / "c.sqlite"
    a, b, other = conv_task(), conv_task("NCHW", "NCHW"), wider_conv_task()
    with provider(path, builders=1) as costs:
        costs.measure([a, b, other])
        cache = CostCache(path)
        records = cache.get_many(costs.context, [a.key, b.key, other.key])
        ms = {a.key: 3.0, b.key: 2.0, other.key: 1.0}  # a and b, one workload, recorded longest
        cache.put_many(costs.context, {key: replace(records[key], median_ms=value) for key, value in ms.items()})
        assert set(measure_drift(costs, [a, b, other], probes=2).times) == {a.key, other.key}
        assert set(measure_drift(costs, [b, other], probes=1).times) == {b.key}
