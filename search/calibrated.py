"""The input ranges of a graph's int8-capable operators, recorded in their parameters
(``search.templates.int8.RANGE``): which operators may have them, and the graph with them (``calibrated``) or read
back (``ranges_of``). Found on calibration inputs by ``search.activation_ranges``; a plan stores them."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from search.errors import SearchError
from search.graph import OpGraph
from search.kinds import KernelKind, get_kind
from search.op import Op
from search.templates.int8 import RANGE


def int8_capable(op: Op) -> bool:
    """Whether ``op``'s kind has int8 kernels for it (what a range is collected for)."""
    kind = get_kind(op.kind) if op.role == "tunable" else None
    return isinstance(kind, KernelKind) and bool(kind.int8_capable(op))


def calibrated(graph: OpGraph, ranges: Mapping[str, Sequence[float]]) -> OpGraph:
    """``graph`` with each named operator's input ranges (low, high of each input its int8 kernels quantise, in
    order: ``KernelKind.int8_inputs``) in its parameters; SearchError for a node that is not an int8-capable operator
    of the graph or ranges that are not that many pairs of finite numbers, low <= high."""
    ops = {op.name: op for op in graph.ops}
    for name, values in ranges.items():
        if name not in ops or not int8_capable(ops[name]):
            raise SearchError(f"an input range is given for {name!r}, which is no int8-capable node of the graph")
        count = get_kind(ops[name].kind).int8_inputs
        if not (isinstance(values, Sequence) and len(values) == 2 * count
                and all(isinstance(v, (int, float)) for v in values) and all(np.isfinite(values))
                and all(values[i] <= values[i + 1] for i in range(0, len(values), 2))):
            shape = ", ".join(["low, high"] * count)
            raise SearchError(f"the input range of {name} must be [{shape}], finite, low <= high; got {values!r}")
    updated = tuple(dataclasses.replace(op, params={**op.params, RANGE: np.array(ranges[op.name], np.float64)})
                    if op.name in ranges else op for op in graph.ops)
    return dataclasses.replace(graph, ops=updated)


def ranges_of(graph: OpGraph, nodes: Sequence[str]) -> dict[str, list[float]]:
    """The input ranges recorded for ``nodes`` (those that have one), as a plan stores them."""
    return {name: [float(v) for v in graph.op(name).params[RANGE]] for name in nodes if RANGE in graph.op(name).params}
