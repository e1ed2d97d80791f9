"""Costs calibrated on the network itself: in-network times of tasks, read off profiles of exported plans.

A profile (``search.profile``) times every call of an exported network. ``network_times`` attributes the calls that
compute a task of the problem to it: a node's kernel, a layout transform (one the VM turned into a reshape took 0 ms),
or a node's chain (its calls that compute only a layout node's own op or the followers after a node, summed; a
call TVM fused from the chains of several nodes is split among them by the sizes of their values).
TVM fuses the layout transforms on either side of a fixed operator (a reshape, a resize) into the operator's call, often
with the adds and gates around it; such a call's time beyond the same operators' calls without a conversion
(``bare_bases``: in a plan that needs none there) is the transforms' in-network time, split in proportion to the
values' sizes.
``store_network_times`` keeps them in the cost cache under the measurement context with timing
``network`` (``NETWORK``), beside the isolated timings and never mixed with them.

``CalibratedCosts`` then prices a task by its in-network time where one is known, and otherwise by its isolated time
scaled by a calibration factor (``Factors``): the median ratio of in-network to isolated time of the ``NEIGHBOURS``
tasks of the same kind (conv2d, dense, layout transform, chain) that have both, among those a solver's plan ran where
there are enough (``chosen``), in the tasks it is asked to price, whose isolated records were measured nearest in
time to the task's own. A cache holds records of many sittings, and a
shared host's speed differed by 1.3x between two of them (docs/fidelity.md): a factor read off records of
another sitting carries that difference into the price. Factors by kind and
layout (``by_layout``) are the alternative ``benchmarks/fidelity.py`` compares; they predicted no better on the
networks measured (docs/fidelity.md). ``unpriced_ms`` is what a profiled plan spends
outside the problem's terms (fixed operators, the work fused around layout nodes and followers, the VM's own calls).
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from cost_models.cache import Context, CostRecord
from cost_models.measure import CostProvider, MeasuredCosts
from cost_models.pricing import chain_task
from cost_models.tasks import FREE, ChainTask, KernelTask, Task, TransformTask
from search.candidates import Candidate, kernel_spec
from search.graph import OpGraph
from search.kinds import KernelKind, get_kind
from search.profile import CallTime, Profile

NETWORK = "network"
"""The timing of records read off in-network profiles (not a method ``MeasuredCosts`` can measure with)."""

NETWORK_CHOSEN = "network-chosen"
"""The timing of a second copy of the in-network records of tasks a solver's plan ran (not only a uniform baseline):
their ratios price the tasks no profile ran (``Factors``)."""


def task_kind(task: Task) -> str:
    """The kind a task's calibration factor is shared by: its kernel kind's name, ``layout_transform`` or
    ``chain``."""
    if isinstance(task, KernelTask):
        return task.spec.workload.kind
    return "layout_transform" if isinstance(task, TransformTask) else "chain"


MIN_GROUP = 3
"""Profiled tasks of a kind chosen by a solver (or of a kind and layout) that give them their own factor."""


def task_layout(task: Task) -> str | None:
    """The layout a task's calibration factor may depend on: a kernel's input layout, a chain's layout (transforms:
    none)."""
    if isinstance(task, KernelTask):
        return task.spec.in_layout
    return task.layout if isinstance(task, ChainTask) else None


NEIGHBOURS = 9
"""Profiled tasks of a kind, measured nearest in time to a task, whose median ratio is its factor."""


CHOSEN = "{kind} (chosen)"
"""The name of the factor of a kind's tasks that a solver's plan ran (``Factors.fit``'s ``chosen``)."""


@dataclass(frozen=True)
class Factors:
    """Calibration factors (in-network over isolated time, medians) by kind, of a kind's tasks a solver chose (groups
    of at least ``MIN_GROUP``), by (kind, layout), and per kind and its chosen tasks the ratios by when their isolated
    records were measured (``by_time``: sorted (measured_at, ratio) pairs)."""

    by_kind: dict[str, float] = field(default_factory=dict)
    by_layout: dict[tuple[str, str], float] = field(default_factory=dict)
    by_time: dict[str, tuple[tuple[float, float], ...]] = field(default_factory=dict)
    by_chosen: dict[str, float] = field(default_factory=dict)

    @classmethod
    def fit(cls, ratios: Mapping[Task, float], by_layout: bool = False,
            measured_at: Mapping[Task, float] | None = None, chosen: Collection[str] = ()) -> Factors:
        """The factors of tasks whose in-network over isolated time is ``ratios[task]``; with ``by_layout``, a
        (kind, layout) group of at least ``MIN_GROUP`` tasks gets its own; with ``measured_at`` (when each task's
        isolated record was measured, seconds since the epoch; 0: unknown), ``of`` reads a factor off the tasks
        measured nearest in time; ``chosen``: the keys of the tasks a solver's plan ran (not only a uniform baseline),
        whose ratios price every task no profile ran where a kind has ``MIN_GROUP`` of them. A solver picks the
        tasks whose isolated records look cheapest, and in eleven tunes on an AVX2 host the picked kernels ran 8-21%
        further above those records in the network than the baselines' kernels (docs/fidelity.md): the tasks a
        re-solved plan adds are picked the same way, and priced by every profiled task's ratio they flattered it.
        A ratio of 0 is left out: TVM elided that task in the network (a transform that only renames the axes of a
        value, as NCHW16c -> NCHW of a 1x1 map, became a reshape), which says nothing of the tasks that run; two such
        transforms of three once priced every other transform of inception_v3 at 0 (docs/fidelity.md)."""
        kinds: dict[str, list[float]] = defaultdict(list)
        picked: dict[str, list[float]] = defaultdict(list)
        layouts: dict[tuple[str, str], list[float]] = defaultdict(list)
        times: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for task, ratio in ratios.items():
            if ratio <= 0:
                continue
            kind = task_kind(task)
            names = [kind]
            kinds[kind].append(ratio)
            if task.key in chosen:
                picked[kind].append(ratio)
                names.append(CHOSEN.format(kind=kind))
            if by_layout and task_layout(task) is not None:
                layouts[kind, task_layout(task)].append(ratio)
            if measured_at and measured_at.get(task, 0.0) > 0:
                for name in names:
                    times[name].append((measured_at[task], ratio))
        return cls({kind: statistics.median(values) for kind, values in kinds.items()},
                   {group: statistics.median(values) for group, values in layouts.items() if len(values) >= MIN_GROUP},
                   {name: tuple(sorted(pairs)) for name, pairs in times.items()},
                   {kind: statistics.median(values) for kind, values in picked.items() if len(values) >= MIN_GROUP})

    def of(self, task: Task, measured_at: float = 0.0) -> float:
        """``task``'s factor: its kind and layout's; else, given when its isolated record was measured, the median
        of the ``NEIGHBOURS`` measured nearest to then among its kind's chosen tasks (all its kind's tasks where
        fewer than ``MIN_GROUP`` were chosen); else its kind's chosen tasks'; else its kind's; else 1."""
        kind = task_kind(task)
        if (kind, task_layout(task)) in self.by_layout:
            return self.by_layout[kind, task_layout(task)]
        name = CHOSEN.format(kind=kind) if kind in self.by_chosen else kind
        if measured_at > 0 and self.by_time.get(name):
            return statistics.median(_nearest(self.by_time[name], measured_at, NEIGHBOURS))
        return self.by_chosen.get(kind, self.by_kind.get(kind, 1.0))

    def summary(self) -> dict[str, float]:
        """The factors by name (``conv2d``, ``conv2d (chosen)``, ``conv2d NCHW16c``), rounded, for stats and logs."""
        named = {**self.by_kind, **{CHOSEN.format(kind=kind): value for kind, value in self.by_chosen.items()},
                 **{f"{kind} {layout}": value for (kind, layout), value in self.by_layout.items()}}
        return {name: round(value, 4) for name, value in sorted(named.items())}


def _nearest(pairs: Sequence[tuple[float, float]], at: float, count: int) -> list[float]:
    """The values of the ``count`` (time, value) ``pairs`` (sorted by time) nearest to time ``at``."""
    low = high = bisect.bisect_left(pairs, (at, float("-inf")))
    picked: list[float] = []
    while len(picked) < min(count, len(pairs)):
        if low > 0 and (high == len(pairs) or at - pairs[low - 1][0] <= pairs[high][0] - at):
            low -= 1
            picked.append(pairs[low][1])
        else:
            picked.append(pairs[high][1])
            high += 1
    return picked


def bare_bases(profiles: Iterable[Profile]) -> dict[frozenset[str], float]:
    """What each group of operators TVM fused into one call costs with no conversion in it: the median time of the
    profiled calls that compute exactly that group and no layout transform, in any of ``profiles`` (a plan whose
    layouts meet there)."""
    times: dict[frozenset[str], list[float]] = defaultdict(list)
    for profile in profiles:
        for call in profile.calls:
            ops = frozenset(origin.op for origin in call.computes)
            if call.ran and ops and not any(origin.is_transform for origin in call.computes):
                times[ops].append(call.ms)
    return {ops: statistics.median(values) for ops, values in times.items()}


def _fused_transforms(call: CallTime, bases: Mapping[frozenset[str], float]) -> dict[TransformTask, float]:
    """The transforms a call computes with other operators (or with other transforms), priced by what the call takes
    beyond those operators' own time (the ``bases`` of the groups of its operators that other calls ran bare), split
    in proportion to the values' sizes; {} for a call of one transform, or of operators no profile ran bare."""
    transforms = [origin for origin in call.computes if origin.is_transform]
    ops = frozenset(origin.op for origin in call.computes if not origin.is_transform)
    if not transforms or (not ops and len(transforms) < 2):
        return {}
    base, left = 0.0, set(ops)  # the bare calls whose operators it computes (a reshape TVM ran free: no call)
    for group, ms in sorted(bases.items(), key=lambda item: -len(item[0])):
        if group <= left:
            base, left = base + ms, left - group
    if ops and left == ops:
        return {}
    extra = max(call.ms - base, 0.0)
    sizes = [math.prod(origin.shape) for origin in transforms]
    shares: dict[TransformTask, float] = defaultdict(float)
    for origin, size in zip(transforms, sizes):
        shares[TransformTask(origin.shape, origin.src, origin.dst)] += extra * size / sum(sizes)
    return shares


def _chain_shares(graph: OpGraph, ops: Sequence[str], owner: Mapping[str, str], ms: float
                  ) -> dict[str | None, float]:
    """A call's ``ms`` (its operators' part, the fused transforms' taken out) split among the nodes whose chains its
    ``ops`` belong to, and ``None`` for the fixed operators among them (a resize: no task of the problem), in
    proportion to the sizes of the ops' outputs: TVM fuses the elementwise chains of neighbouring nodes, an add, the
    gate after it and the resize between them, into one call."""
    sizes: dict[str | None, float] = defaultdict(float)
    for op in ops:
        sizes[owner.get(op)] += math.prod(graph.op(op).shape) or 1
    total = sum(sizes.values())
    return {node: ms * size / total for node, size in sizes.items()}


def _attributed(graph: OpGraph, choices: Mapping[str, Candidate], profile: Profile,
                bases: Mapping[frozenset[str], float] | None = None) -> tuple[dict[Task, list[float]], list[float]]:
    """The profiled calls that compute a task of the problem, by task, and the part of each call's time (in the
    profile's order) they account for: a node's kernel, a transform, or (several calls summed) a node's chain: a
    layout node's own op and the followers after a node (a call TVM fused from several nodes' chains, and fixed
    operators, split among them: ``_chain_shares``; the share of a node whose chain no task prices, as a dense's
    followers on a 2-D value, is left out as a fixed operator's is).
    With ``bases`` (``bare_bases``), transforms fused into a call of other operators get what the call takes beyond
    those operators' own time, and the operators the rest."""
    owner = {}  # op -> the node whose chain it belongs to
    for op in graph.tunable:
        if not isinstance(get_kind(op.kind), KernelKind):
            owner[op.name] = op.name
        owner.update({follower.name: op.name for follower in graph.followers_of(op.name)})
    tasks: dict[str, ChainTask | None] = {}

    def chain_of(node: str | None) -> ChainTask | None:  # the task pricing a node's chain; None for a fixed op's
        if node not in choices:
            return None
        if node not in tasks:
            tasks[node] = chain_task(graph, node, choices[node])
        return tasks[node]

    times: dict[Task, list[float]] = defaultdict(list)
    chains: dict[str, float] = defaultdict(float)
    priced = []
    for call in profile.calls:
        ops = [origin.op for origin in call.computes if not origin.is_transform]
        kernels = [op for op in ops if op in choices and isinstance(get_kind(graph.op(op).kind), KernelKind)]
        part = 0.0
        if len(call.computes) == 1 and call.computes[0].is_transform:
            origin = call.computes[0]
            times[TransformTask(origin.shape, origin.src, origin.dst)].append(call.ms)
            part = call.ms
        elif len(ops) == 1 and kernels:
            times[KernelTask(kernel_spec(graph.op(ops[0]), choices[ops[0]]))].append(call.ms)
            part = call.ms
        elif not kernels:
            fused = _fused_transforms(call, bases) if bases is not None else {}
            if len(ops) == len(call.computes) or fused:  # else no way to tell the transforms' time from the ops'
                for task, ms in fused.items():
                    times[task].append(ms)
                shares = _chain_shares(graph, ops, owner, call.ms - sum(fused.values())) if ops else {}
                priced_chains = {node: ms for node, ms in shares.items() if chain_of(node) is not None}
                for node, ms in priced_chains.items():
                    chains[node] += ms
                part = sum(fused.values()) + sum(priced_chains.values())
        priced.append(part)
    for node, ms in chains.items():
        times[chain_of(node)].append(ms)
    return times, priced


def network_times(graph: OpGraph, choices: Mapping[str, Candidate], profile: Profile,
                  bases: Mapping[frozenset[str], float] | None = None) -> dict[Task, float]:
    """In-network milliseconds of the problem's tasks a profiled plan (``choices``: node -> candidate) ran: node
    kernels, transforms and chains (the mean where one task ran for several nodes); with ``bases``
    (``bare_bases`` of all the profiles), the transforms fused into calls of other operators too."""
    times, _ = _attributed(graph, choices, profile, bases)
    return {task: sum(values) / len(values) for task, values in times.items()}


def priced_ms(graph: OpGraph, choices: Mapping[str, Candidate], profile: Profile,
              bases: Mapping[frozenset[str], float] | None = None) -> float:
    """The profiled time of the calls the problem prices (kernels, transforms, chains)."""
    return sum(_attributed(graph, choices, profile, bases)[1])


def unpriced_parts(graph: OpGraph, choices: Mapping[str, Candidate], profile: Profile,
                   bases: Mapping[frozenset[str], float] | None = None) -> list[float]:
    """The part of each profiled call's time (in the profile's order) outside the problem's terms."""
    return [call.ms - part for call, part in zip(profile.calls, _attributed(graph, choices, profile, bases)[1])]


def unpriced_ms(graph: OpGraph, choices: Mapping[str, Candidate], profile: Profile,
                bases: Mapping[frozenset[str], float] | None = None) -> float:
    """What a profiled run spent outside the problem's terms: the other calls and the VM's overhead."""
    return profile.calls_ms - priced_ms(graph, choices, profile, bases) + profile.overhead_ms


def network_context(context: Context) -> Context:
    """The context of in-network records taken where ``context``'s isolated timings were."""
    return replace(context, timing=NETWORK)


def chosen_context(context: Context) -> Context:
    """The context of the copies of in-network records of tasks a solver's plan ran."""
    return replace(context, timing=NETWORK_CHOSEN)


def store_network_times(measured: MeasuredCosts, times: Mapping[Task, float], runs: int, chosen: bool = False) -> None:
    """Keep in-network times in ``measured``'s cache, under the network context of its measurement context, and
    with ``chosen`` (the times of a solver's plan) under its chosen context too."""
    records = {task.key: CostRecord(float(ms), None, runs) for task, ms in times.items() if not task.free}
    if records:
        measured.cache.put_many(network_context(measured.context), records)
        if chosen:
            measured.cache.put_many(chosen_context(measured.context), records)


class CalibratedCosts(CostProvider):
    """In-network times where the cache has them, else isolated times (measured as ``measured`` does) scaled by
    their kind's calibration factor, read off the tasks a solver's plan ran where there are enough (see the module
    docstring).

    ``stats`` reports how many tasks were priced each way and the factor of each kind. ``isolated`` prices the
    isolated times (default: ``measured``, which measures what its cache lacks; else a provider wrapping
    ``measured``, closed with it); ``measured``'s cache holds the in-network times.
    """

    def __init__(self, measured: MeasuredCosts, isolated: CostProvider | None = None) -> None:
        self.measured = measured
        self.isolated = measured if isolated is None else isolated
        self.stats: dict[str, Any] = {}

    def measure(self, tasks: Sequence[Task]) -> list[CostRecord]:
        tasks = list(tasks)
        isolated = self.isolated.measure(tasks)
        keys = [task.key for task in tasks if not task.free]
        network = self.measured.cache.get_many(network_context(self.measured.context), keys)
        chosen = self.measured.cache.get_many(chosen_context(self.measured.context), keys)
        ratios = {}
        for task, record in zip(tasks, isolated):
            known = network.get(task.key) if not task.free else None
            if known is not None and known.ok and record.ok and record.median_ms > 0:
                ratios[task] = known.median_ms / record.median_ms
        factors = Factors.fit(ratios, measured_at={task: record.measured_at for task, record in zip(tasks, isolated)},
                              chosen=chosen.keys())
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
                factor = factors.of(task, record.measured_at)
                spread = None if record.spread_ms is None else record.spread_ms * factor
                out.append(replace(record, median_ms=record.median_ms * factor, spread_ms=spread))
                priced[task.key] = "scaled"
            else:
                out.append(record)
                priced[task.key] = "failed"
        counts = {way: sum(1 for value in priced.values() if value == way) for way in ("in_network", "scaled")}
        self.stats = {"tasks": len(priced), **counts,
                      "factors": factors.summary()}
        return out

    def spent(self) -> dict[str, float]:
        return self.measured.spent()

    def close(self) -> None:
        self.isolated.close()
