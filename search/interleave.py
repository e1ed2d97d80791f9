"""Timing several contenders in turns, and the summary of each one's per-round samples.

``interleave`` takes one sample of every contender per round, starting one contender later each round, so that drift
of a shared machine (other processes' load, clock changes) hits all alike, and runs every other round in reverse
order, so that no contender always follows the same one (the one before can slow the next: docs/end_to_end.md);
``latency_summary`` condenses a contender's samples (ms) into the figures summaries and reports read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np


def interleave(measure_by_label: Mapping[str, Callable[[], float]], rounds: int,
               after_round: Callable[[int, dict[str, list[float]]], None] = lambda index, samples: None,
               ) -> dict[str, list[float]]:
    """Per label, the ``rounds`` samples its measure returned; ``after_round(index, samples)`` sees each round's."""
    labels = list(measure_by_label)
    samples: dict[str, list[float]] = {label: [] for label in labels}
    for index in range(rounds):
        shift = index % len(labels)
        turns = labels[shift:] + labels[:shift]
        for label in turns[::-1] if index % 2 else turns:
            samples[label].append(measure_by_label[label]())
        after_round(index, samples)
    return samples


def latency_summary(values_ms: Sequence[float]) -> dict[str, float]:
    """Median, quartiles, interquartile ``spread_ms``, extremes, mean and standard deviation (0 for one sample) and
    number of per-round samples (ms)."""
    p25, median, p75 = (float(v) for v in np.percentile(values_ms, [25, 50, 75]))
    stdev = float(np.std(values_ms, ddof=1)) if len(values_ms) > 1 else 0.0
    return {"median_ms": median, "p25_ms": p25, "p75_ms": p75, "spread_ms": p75 - p25,
            "min_ms": float(min(values_ms)), "max_ms": float(max(values_ms)), "mean_ms": float(np.mean(values_ms)),
            "stdev_ms": stdev, "rounds": len(values_ms)}
