"""The time a plan spends outside the problem's terms, estimated call by call from the profiles of other plans.

Fixed operators (a resize, a pooling, the permutes of a detector's head), the work TVM fuses around them and the VM's
own calls are no task of the problem. What they take depends on the plan: TVM fuses the layout transforms at a fixed
operator's edges into its call, and a pooling runs faster on one layout than on another (six plans of a detector
with trained weights spent 0.57-1.04 ms outside the problem's terms: docs/fidelity.md).

An exported plan lists its calls and what each computes before it runs (``search.profile.listed_calls``).
``UnpricedCalls.of`` reads, from a profiled plan, the part of every call's time outside the problem's terms
(``cost_models.calibration.unpriced_parts``); ``estimate`` prices a plan's calls by the other plans' calls that
compute the same operators and transforms with the operators' inputs stored in the same layouts, else the same
operators in that layout context (other transforms fused in), else the same operators in any context, else each
operator by its share of the calls it ran in (split by the sizes of the operators' outputs): the median over the
plans that have it; plus the median of their VM overheads.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from cost_models.calibration import unpriced_parts
from search.candidates import Candidate
from search.emit import Origin
from search.graph import OpGraph
from search.profile import Profile

Computes = tuple[Origin, ...]
"""What one call of an exported plan computes (``search.profile.CallTime.computes``)."""


@dataclass(frozen=True)
class Call:
    """What a call computes (its operators and layout transforms) and the operators' layout context: per operator,
    the layout each input is stored in under the plan (the chosen layout of the tunable node it comes from, through
    followers; "" for a value in the model's own layout)."""

    computes: frozenset[Origin]
    context: frozenset[tuple[str, tuple[str, ...]]]

    @property
    def operators(self) -> frozenset[str]:
        return frozenset(origin.op for origin in self.computes if not origin.is_transform)

    def keys(self) -> tuple[tuple[str, Hashable], ...]:
        """The keys it is looked up by in ``UnpricedCalls.by_key``, most specific first (see the module docstring)."""
        ops = self.operators
        return (("computes", (self.computes, self.context)), ("operators", (ops, self.context))) \
            + ((("operators, any context", ops),) if ops else ())


def plan_calls(graph: OpGraph, choices: Mapping[str, Candidate], calls: Sequence[Computes]) -> list[Call]:
    """The ``calls`` of the plan ``choices`` (what each computes) with their operators' layout context."""
    def stored(value: str) -> str:
        node = graph.source(value)
        return choices[node].out_layout if node in choices else ""

    def context(computes: Computes) -> frozenset[tuple[str, tuple[str, ...]]]:
        return frozenset((origin.op, tuple(stored(value) for value in graph.op(origin.op).inputs))
                         for origin in computes if not origin.is_transform)

    return [Call(frozenset(computes), context(computes)) for computes in calls]


@dataclass(frozen=True)
class UnpricedCalls:
    """One profiled plan's time outside the problem's terms (ms per run): by each key of its calls (``Call.keys``;
    summed over calls of the same key), by operator, and the VM's own calls."""

    by_key: dict[tuple[str, Hashable], float]
    by_operator: dict[str, float]
    overhead_ms: float

    @property
    def total_ms(self) -> float:
        return sum(ms for (level, _), ms in self.by_key.items() if level == "computes") + self.overhead_ms

    @classmethod
    def of(cls, graph: OpGraph, choices: Mapping[str, Candidate], profile: Profile,
           bases: Mapping[frozenset[str], float] | None = None) -> UnpricedCalls:
        """``profile``'s unpriced time of the plan ``choices`` (``bases``: ``calibration.bare_bases``)."""
        by_key: dict[tuple[str, Hashable], float] = defaultdict(float)
        by_operator: dict[str, float] = defaultdict(float)
        calls = plan_calls(graph, choices, [call.computes for call in profile.calls])
        for call, ms in zip(calls, unpriced_parts(graph, choices, profile, bases)):
            for key in call.keys():
                by_key[key] += ms
            sizes = {op: math.prod(graph.op(op).shape) or 1 for op in call.operators}
            for op, size in sizes.items():
                by_operator[op] += ms * size / sum(sizes.values())
        return cls(dict(by_key), dict(by_operator), profile.overhead_ms)


def estimate(calls: Sequence[Call], others: Sequence[UnpricedCalls]) -> float:
    """The unpriced time (ms) of a plan of ``calls`` (``plan_calls``), priced by the ``others``' (see the module
    docstring); 0 without others."""
    if not others:
        return 0.0
    total = statistics.median(other.overhead_ms for other in others)
    for call in set(calls):  # calls of the same key are summed, as in others
        for key in call.keys():
            same = [other.by_key[key] for other in others if key in other.by_key]
            if same:
                total += statistics.median(same)
                break
        else:
            for op in call.operators:
                seen = [other.by_operator[op] for other in others if op in other.by_operator]
                total += statistics.median(seen) if seen else 0.0
    return total
