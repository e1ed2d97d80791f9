"""Costs calibrated on the network itself: in-network times of tasks, read off profiles of exported plans.

A profile (``search.profile``) times every call of an exported network. ``network_times`` attributes the calls that
compute exactly one task, a node's kernel or the layout transform of an edge, to that task; a transform the VM turned
into a reshape took 0 ms. ``store_network_times`` keeps them in the cost cache under the measurement context with timing
``network`` (``NETWORK``), beside the isolated timings and never mixed with them.

``CalibratedCosts`` then prices a task by its in-network time where one is known, and otherwise by its isolated time
scaled by the median ratio of in-network to isolated time of the tasks of the same kind (conv2d, dense, layout
transform, ...) that have both, in the tasks it is asked to price. ``unpriced_ms`` is what a profiled plan spends
outside the problem's terms (fixed operators, the work fused around layout nodes and followers, the VM's own calls).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from cost_models.cache import Context, CostRecord
from cost_models.measure import CostProvider, MeasuredCosts
from cost_models.tasks import FREE, KernelTask, Task, TransformTask
from search.candidates import Candidate, kernel_spec
from search.graph import OpGraph
from search.kinds import KernelKind, get_kind
from search.profile import Profile

NETWORK = "network"
"""The timing of records read off in-network profiles (not a method ``MeasuredCosts`` can measure with)."""


def task_kind(task: Task) -> str:
    """The kind a task's calibration factor is shared by: its kernel kind's name, or ``layout_transform``."""
    return task.spec.workload.kind if isinstance(task, KernelTask) else "layout_transform"


def network_times(graph: OpGraph, choices: Mapping[str, Candidate], profile: Profile) -> dict[Task, float]:
    """In-network milliseconds of the tasks a profiled plan (``choices``: node -> candidate) ran alone in a call:
    node kernels and transforms (the mean where one task ran in several calls)."""
    times: dict[Task, list[float]] = defaultdict(list)
    for call in profile.calls:
        if len(call.computes) != 1:
            continue
        (origin,) = call.computes
        if origin.is_transform:
            task: Task = TransformTask(origin.shape, origin.src, origin.dst)
        elif origin.op in choices and isinstance(get_kind(graph.op(origin.op).kind), KernelKind):
            task = KernelTask(kernel_spec(graph.op(origin.op), choices[origin.op]))
        else:
            continue
        times[task].append(call.ms)
    return {task: sum(values) / len(values) for task, values in times.items()}


def priced_ms(graph: OpGraph, profile: Profile) -> float:
    """The profiled time of the calls the problem prices (one kernel of a node or one transform each)."""
    tunable = {op.name for op in graph.tunable if isinstance(get_kind(op.kind), KernelKind)}
    return sum(call.ms for call in profile.calls if len(call.computes) == 1
               and (call.computes[0].is_transform or call.computes[0].op in tunable))


def unpriced_ms(graph: OpGraph, profile: Profile) -> float:
    """What a profiled run spent outside the problem's terms: the other calls and the VM's overhead."""
    return profile.calls_ms - priced_ms(graph, profile) + profile.overhead_ms


def network_context(context: Context) -> Context:
    """The context of in-network records taken where ``context``'s isolated timings were."""
    return replace(context, timing=NETWORK)


def store_network_times(measured: MeasuredCosts, times: Mapping[Task, float], runs: int) -> None:
    """Keep in-network times in ``measured``'s cache, under the network context of its measurement context."""
    records = {task.key: CostRecord(float(ms), None, runs) for task, ms in times.items() if not task.free}
    if records:
        measured.cache.put_many(network_context(measured.context), records)


class CalibratedCosts(CostProvider):
    """In-network times where the cache has them, else isolated times (measured as ``measured`` does) scaled by
    their kind's calibration factor (see the module docstring).

    ``stats`` reports how many tasks were priced each way and the factor of each kind.
    """

    def __init__(self, measured: MeasuredCosts) -> None:
        self.measured = measured
        self.stats: dict[str, Any] = {}

    def measure(self, tasks: Sequence[Task]) -> list[CostRecord]:
        tasks = list(tasks)
        isolated = self.measured.measure(tasks)
        keys = [task.key for task in tasks if not task.free]
        network = self.measured.cache.get_many(network_context(self.measured.context), keys)
        ratios: dict[str, list[float]] = defaultdict(list)
        for task, record in zip(tasks, isolated):
            known = network.get(task.key) if not task.free else None
            if known is not None and known.ok and record.ok and record.median_ms > 0:
                ratios[task_kind(task)].append(known.median_ms / record.median_ms)
        factors = {kind: statistics.median(values) for kind, values in ratios.items()}
        out, priced = [], {}
        for task, record in zip(tasks, isolated):
            known = None if task.free else network.get(task.key)
            if task.free:
                out.append(FREE)
                continue
            if known is not None and known.ok:
                out.append(known)
                priced[task.key] = "in_network"
            elif record.ok:
                factor = factors.get(task_kind(task), 1.0)
                spread = None if record.spread_ms is None else record.spread_ms * factor
                out.append(replace(record, median_ms=record.median_ms * factor, spread_ms=spread))
                priced[task.key] = "scaled"
            else:
                out.append(record)
                priced[task.key] = "failed"
        counts = {way: sum(1 for value in priced.values() if value == way) for way in ("in_network", "scaled")}
        self.stats = {"tasks": len(priced), **counts,
                      "factors": {kind: round(value, 4) for kind, value in sorted(factors.items())}}
        return out

    def close(self) -> None:
        self.measured.close()
