"""Interleaved timing rounds and the latency summary."""

from __future__ import annotations

import pytest

from search.interleave import interleave, latency_summary


def test_each_round_starts_one_contender_later_every_other_one_reversed_and_reports_its_samples():
    order: list[str] = []
    seen: list[int] = []

    def measure(label: str):
        return lambda: order.append(label) or float(len(order))

    samples = interleave({label: measure(label) for label in "abc"}, 4, lambda index, s: seen.append(len(s["a"])))
    assert order == list("abc" "acb" "cab" "cba")  # a follows c, b; b follows a, c; c follows b, a
    assert samples == {"a": [1.0, 4.0, 8.0, 12.0], "b": [2.0, 6.0, 9.0, 11.0], "c": [3.0, 5.0, 7.0, 10.0]}
    assert seen == [1, 2, 3, 4]


def test_the_summary_gives_median_quartiles_spread_extremes_mean_and_deviation():
    summary = latency_summary([4.0, 1.0, 3.0, 2.0, 5.0])
    assert summary == {"median_ms": 3.0, "p25_ms": 2.0, "p75_ms": 4.0, "spread_ms": 2.0, "min_ms": 1.0,
                       "max_ms": 5.0, "mean_ms": 3.0, "stdev_ms": pytest.approx(2.5 ** 0.5), "rounds": 5}
    one = latency_summary([2.5])
    assert one["spread_ms"] == pytest.approx(0.0) and one["stdev_ms"] == 0.0 and one["mean_ms"] == 2.5
