"""A measured cost source with a short timing loop, for tests whose tiny networks' records are used, not judged."""

from __future__ import annotations

from dataclasses import dataclass

from cost_models.cache import CostCache
from cost_models.measure import MeasuredCosts
from cost_models.sources import MeasuredSource

QUICK = {"repeat": 3, "min_repeat_ms": 5}
"""``MeasuredCosts``'s timing loop for tiny workloads (its defaults: 5 repeats of at least 50 ms)."""


@dataclass(frozen=True)
class QuickMeasured(MeasuredSource):
    """Every task measured for real (built and timed like ``measured``), with the ``QUICK`` timing loop."""

    def open(self, cache, target, threads, progress, cluster=None):
        return MeasuredCosts(CostCache(cache), target=target, threads=threads, timing=self.timing, progress=progress,
                             **QUICK)
