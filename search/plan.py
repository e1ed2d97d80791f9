"""Plans: the candidate chosen for every tunable node of a model, JSON I/O, validation and the uniform baselines.

A plan file::

    {"model": "resnet18", "args": {"batch": 1, "image_size": 224}, "vector_unit": "avx512",
     "choices": {"conv2d_0": "NCHW>NCHW16c:reg_n=14,unroll_kw=1", "concat_0": "NCHW16c", ...}}

``vector_unit`` names the unit the candidates' knobs were chosen for (``search.isa.UNITS``; a plan tuned on an
AVX-512 host may name register tiles an AVX2 host's templates do not offer). Baselines record it too: their default
knobs depend on the unit. Without it (older or hand-written files) the knobs are read against the host's unit.
A plan with int8 nodes records each one's input range on the calibration inputs, ``"ranges": {"conv2d_3": [0.0,
5.2], ...}`` (``search.activation_ranges``; a batched matmul's two operands' ranges one after the other), from which
its kernels' quantisation is made.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from search.candidates import Candidate, check_candidate, default_knobs
from search.errors import SearchError
from search.graph import OpGraph
from search.in_place import written_inputs
from search.isa import UNITS
from search.kinds import get_kind
from search.kinds.base import VIEW_OF, VIEWS
from search.layouts import BF16, storage_of
from search.op import Op
from search.precision import precision_of
from search.templates.common import unit
from solvers.input_files import InputFileError, read_text
from solvers.problem import write_json_atomic

UNIFORM = {"nchw": "NCHW", "nhwc": "NHWC", "nchw8c": "NCHW8c", "nchw16c": "NCHW16c"}
"""The uniform plans ``baseline_plan`` makes, by name, and their layout."""
BASELINES = ("nchw", "nhwc", "nchw16c")
"""The uniform plans ``tune`` times beside its own."""


@dataclass(frozen=True)
class Plan:
    """Node name -> candidate name, plus the model it was made for (name and load arguments), the vector unit
    its knobs were chosen for ("" when unknown: the host's) and the input range of each int8 node."""

    choices: dict[str, str]
    model: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    vector_unit: str = ""
    ranges: dict[str, list[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.vector_unit and self.vector_unit not in UNITS:
            raise SearchError(f"unknown vector unit {self.vector_unit!r}; known: {', '.join(sorted(UNITS))}")

    def to_dict(self) -> dict[str, Any]:
        unit = {"vector_unit": self.vector_unit} if self.vector_unit else {}
        ranges = {"ranges": dict(self.ranges)} if self.ranges else {}
        return {"model": self.model, "args": dict(self.args), **unit, "choices": dict(self.choices), **ranges}

    @classmethod
    def from_dict(cls, data: Any) -> Plan:
        if not isinstance(data, dict) or not isinstance(data.get("choices"), dict):
            raise SearchError("a plan is a JSON object with a 'choices' object (node -> candidate)")
        choices = data["choices"]
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in choices.items()):
            raise SearchError("plan 'choices' must map node names to candidate strings")
        fields = {"model": "", "args": {}, "vector_unit": "", "ranges": {}}  # each absent or null: its default
        values = {key: default if data.get(key) is None else data[key] for key, default in fields.items()}
        for key, value in values.items():
            if not isinstance(value, type(fields[key])):
                kind = "an object" if key in ("args", "ranges") else "a string"
                raise SearchError(f"plan {key!r} must be {kind}, got {value!r}")
        bad = [node for node, pair in values["ranges"].items() if not (
            isinstance(pair, list) and pair and len(pair) % 2 == 0 and all(isinstance(v, (int, float)) for v in pair))]
        if bad:
            raise SearchError(f"plan 'ranges' maps int8 nodes to [low, high] (of each input quantised); {bad[0]!r} has "
                              f"{values['ranges'][bad[0]]!r}")
        return cls(dict(choices), values["model"], dict(values["args"]), values["vector_unit"],
                   {node: [float(v) for v in pair] for node, pair in values["ranges"].items()})

    def save(self, path: str | Path) -> None:
        write_json_atomic(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> Plan:
        try:
            data = json.loads(read_text(path))
        except InputFileError as exc:
            raise SearchError(str(exc)) from exc
        except UnicodeDecodeError as exc:
            raise SearchError(f"{path}: not UTF-8 text (byte {exc.start}); is it a plan file?") from exc
        except json.JSONDecodeError as exc:
            raise SearchError(f"{path}: not valid JSON ({exc})") from exc
        try:
            return cls.from_dict(data)
        except SearchError as exc:
            raise SearchError(f"{path}: {exc}") from exc

    def candidate(self, node: str) -> Candidate:
        return Candidate.parse(self.choices[node])

    def nodes_in(self, precision: str) -> list[str]:
        """The nodes this plan runs in ``precision`` (``search.precision``), sorted."""
        return sorted(name for name in self.choices if precision_of(self.candidate(name).knobs) == precision)

    @property
    def bf16_nodes(self) -> list[str]:
        return self.nodes_in("bf16")

    @property
    def int8_nodes(self) -> list[str]:
        return self.nodes_in("int8")

    @property
    def bf16_values(self) -> list[str]:
        """The nodes whose output this plan keeps in bf16 values (an output layout of ``bf16`` storage), sorted."""
        return sorted(name for name in self.choices if storage_of(self.candidate(name).out_layout) == BF16)

    @property
    def reduced_nodes(self) -> list[str]:
        """The nodes this plan runs below fp32 (bf16 or int8) or keeps bf16 values in (a concat's), sorted."""
        return sorted({*self.bf16_nodes, *self.int8_nodes, *self.bf16_values})


def validate(plan: Plan, graph: OpGraph) -> dict[str, Candidate]:
    """Check ``plan`` against ``graph`` and return node -> Candidate.

    Raises SearchError for unknown or missing nodes, malformed candidates, layouts whose block does not divide the
    channels, layout pairs without a kernel, knobs outside the template's space, and an in-place node whose
    producers store another layout than its own.
    """
    tunable = {op.name: op for op in graph.tunable}
    unknown = sorted(set(plan.choices) - set(tunable))
    if unknown:
        raise SearchError(f"plan names unknown node(s) {', '.join(unknown)}; the graph's tunable nodes are "
                          f"{', '.join(tunable)}")
    missing = [name for name in tunable if name not in plan.choices]
    if missing:
        raise SearchError(f"plan has no candidate for node(s) {', '.join(missing)}")
    chosen = {}
    for name, op in tunable.items():
        candidate = plan.candidate(name)
        check_candidate(op, candidate)
        chosen[name] = candidate
    for name, candidate in chosen.items():
        if not candidate.in_place:
            continue
        op = tunable[name]
        wrong = [f"{value} ({chosen[value].out_layout})" for value in written_inputs(op)
                 if chosen[value].out_layout != candidate.out_layout]
        if wrong:
            raise SearchError(f"node {name} runs in place in {candidate.out_layout}, so its producers must store that "
                              f"layout; {', '.join(wrong)} do not")
        family = [op.attrs[VIEW_OF]] if VIEW_OF in op.attrs else list(op.attrs.get(VIEWS, ()))
        wrong = [f"{other} ({chosen[other].name})" for other in family if chosen[other] != candidate]
        if wrong:
            raise SearchError(f"node {name} runs in place in {candidate.out_layout}, so the concats sharing its buffer "
                              f"must too ({candidate.name}); {', '.join(wrong)} do not")
    return chosen


def _uniform_candidate(op: Op, layout: str) -> Candidate:
    in_layout, out_layout = get_kind(op.kind).baseline(op, layout)
    return Candidate(in_layout, out_layout, default_knobs(op, in_layout, out_layout))


def baseline_plan(graph: OpGraph, name: str, model: str = "", args: dict[str, Any] | None = None) -> Plan:
    """A uniform plan (``UNIFORM``: ``nchw``, ``nhwc``, ``nchw8c`` or ``nchw16c``), every kernel with its default knobs.
    ``tune`` times the ``BASELINES`` beside its plans.

    Each kind picks its layouts (``OperatorKind.baseline``): where 16 does not divide a tensor's channels, ``nchw16c``
    uses the largest smaller block that does (8, then 4), else NCHW; each side of a conv is chosen on its own channel
    count (a depthwise conv keeps in == out), a concat/add uses the largest block dividing every input, dense runs NC.
    """
    if name not in UNIFORM:
        raise SearchError(f"unknown baseline {name!r}; expected one of {', '.join(UNIFORM)}")
    choices = {op.name: _uniform_candidate(op, UNIFORM[name]).name for op in graph.tunable}
    return Plan(choices, model, dict(args or {}), unit().name)


def check_baselines(names: str | Iterable[str]) -> tuple[str, ...]:
    """``names`` (one name or several) as a tuple of uniform plans' names (``UNIFORM``); SearchError for an unknown or
    repeated one."""
    names = (names,) if isinstance(names, str) else tuple(names)
    unknown = [name for name in names if name not in UNIFORM]
    if unknown:
        raise SearchError(f"unknown baseline {unknown[0]!r}; expected some of {', '.join(UNIFORM)}")
    if len(set(names)) < len(names):
        raise SearchError(f"a baseline is named twice: {', '.join(names)}")
    return names


def plan_from_assignment(assignment: Mapping[str, str], model: str = "", args: Mapping[str, Any] | None = None, *,
                         auxiliary: Iterable[str] = (), graph: OpGraph | None = None) -> Plan:
    """A solver's assignment (node -> candidate name) as a ``Plan``: the names are the plan's choices (less the
    problem's ``auxiliary`` nodes, ``problem.meta["auxiliary"]``), their knobs those of the templates as sized now (the
    host's unit); with ``graph``, the input ranges it holds for the plan's int8 nodes."""
    from search.calibrated import ranges_of

    skip = set(auxiliary)
    plan = Plan({node: name for node, name in assignment.items() if node not in skip}, model, dict(args or {}),
                unit().name)
    return replace(plan, ranges=ranges_of(graph, plan.int8_nodes)) if graph is not None else plan
