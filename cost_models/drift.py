"""Does the machine run now as it did when the costs were measured? A few cached tasks timed again and compared.

A shared host can slow everything down for minutes (a neighbour's job, a throttled core): timings taken then, and
in-network profiles in particular, describe that window, not the machine. ``measure_drift`` times a few of ``tasks``
again (of each of the workloads recorded longest, its longest task) as the cache's records were timed (same context, the
cache neither read for them nor written) and returns the median ratio of now over then; above ``1 + tolerance`` the
window is ``disturbed``. Kernels of a few microseconds, timed one call per repeat, spread by 10% or more between repeats
and by as much between timings: the tolerance widens to ``SPREADS`` times the probes' relative spread as recorded
(interquartile range over median; the new timing's spread is no guide, a disturbed window widens it) where that is
larger, up to ``MAX_TOLERANCE``, so that noisy records cannot hide the slow windows the check exists for.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cost_models.cache import CostRecord, canonical
from cost_models.features import group_key, parse_key
from cost_models.measure import MeasuredCosts
from cost_models.tasks import Task

DRIFT_TOLERANCE = 0.10
"""How much slower than their records tasks may time before the window counts as disturbed: well above the 1-3%
spread of repeated isolated timings, well below the slow windows met on shared hosts (docs/fidelity.md)."""


@dataclass(frozen=True)
class Drift:
    """Tasks timed again: per task key its cached and current median (ms), the median ratio of now over then
    (``ratio``; 1.0 when nothing could be compared) and the tolerance ``disturbed`` is judged by."""

    times: dict[str, tuple[float, float]]
    ratio: float
    tolerance: float = DRIFT_TOLERANCE

    @property
    def disturbed(self) -> bool:
        return self.ratio > 1.0 + self.tolerance

    def describe(self) -> str:
        return (f"{len(self.times)} cached kernels timed again ran x{self.ratio:.2f} their recorded time "
                f"(tolerance x{1.0 + self.tolerance:.2f})")


PROBES = 3
"""Tasks timed again: of each of the workloads recorded longest, its longest-running task (timings of long tasks are
the least noisy, and tasks of distinct workloads are independent evidence: a network's longest tasks are often one
workload's knob settings or epilogues, whose timings move together)."""

SPREADS = 2.0
"""The tolerance is at least this many times the probes' median relative spread (up to ``MAX_TOLERANCE``)."""

MAX_TOLERANCE = 0.20
"""The widest tolerance: the slow windows met on shared hosts ran kernels x1.25-1.5 their records."""


def workload(key: str) -> str:
    """What a task computes, whatever its layouts, knobs and epilogue: a kernel's kind and workload, else its
    candidates' group (``features.group_key``)."""
    parsed = parse_key(key)
    if "workload" not in parsed:
        return group_key(key)
    return canonical({"kind": parsed["kind"], "workload": parsed["workload"]})


def probe_tasks(tasks: Sequence[Task], records: Mapping[str, CostRecord], probes: int = PROBES) -> list[Task]:
    """Of ``tasks`` with a successful record (``records`` by key), the longest of each of the ``probes`` workloads
    recorded longest, longest first."""
    distinct = list({task.key: task for task in tasks if not task.free}.values())
    longest = sorted((task for task in distinct if task.key in records and records[task.key].ok),
                     key=lambda task: -records[task.key].median_ms)
    known = list({workload(task.key): task for task in reversed(longest)}.values())  # each workload's longest
    return sorted(known, key=lambda task: -records[task.key].median_ms)[:probes]


def compare(then: Mapping[str, CostRecord], now: Mapping[str, CostRecord],
            tolerance: float = DRIFT_TOLERANCE) -> Drift:
    """The drift of the tasks timed ``now`` against their records ``then`` (both by key); see the module
    docstring."""
    times, spreads = {}, []
    for key, record in now.items():
        recorded = then[key]
        if record.ok and recorded.median_ms > 0 and record.median_ms > 0:
            times[key] = (recorded.median_ms, record.median_ms)
            spreads.append((recorded.spread_ms or 0.0) / recorded.median_ms)
    ratio = statistics.median(now_ms / then_ms for then_ms, now_ms in times.values()) if times else 1.0
    widened = min(MAX_TOLERANCE, SPREADS * statistics.median(spreads)) if spreads else 0.0
    return Drift(times, float(ratio), max(tolerance, widened))


def measure_drift(measured: MeasuredCosts, tasks: Sequence[Task], probes: int = PROBES,
                  tolerance: float = DRIFT_TOLERANCE) -> Drift:
    """``tasks``' probes (``probe_tasks``, by ``measured``'s cache) timed again now and compared with their
    records (``compare``)."""
    keys = list(dict.fromkeys(task.key for task in tasks if not task.free))
    cached = measured.cache.get_many(measured.context, keys)
    known = probe_tasks(tasks, cached, probes)
    return compare(cached, {task.key: record for task, record in zip(known, measured.time_again(known))},
                   tolerance)
