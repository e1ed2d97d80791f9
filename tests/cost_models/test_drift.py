"""The drift check: cached kernels timed again against their records, the cache untouched."""

from __future__ import annotations

from dataclasses import replace

from cost_models import CostCache
from cost_models.drift import DRIFT_TOLERANCE, MAX_TOLERANCE, SPREADS, Drift, measure_drift
from tests.cost_models.test_measure import conv_task, provider


def test_kernels_timed_again_are_compared_with_their_records(tmp_path):
    path = tmp_path / "c.sqlite"
    fast, slow, unknown = conv_task(), conv_task("NCHW", "NCHW"), conv_task(relu=False)
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
