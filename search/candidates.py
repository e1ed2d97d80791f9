"""The candidate space of every tunable node: (in_layout, out_layout, knobs), named by stable strings.

Names: ``"NCHW8c>NCHW16c:reg_n=14,unroll_kw=1"`` for conv/dense kernels (``"NC>NC:..."`` for dense; no ``:`` part
means the template's default knobs) and just the layout, ``"NCHW8c"``, for concat/add nodes
(``"NCHW8c>NCHW8c:in_place=1"`` for a concat whose producers write into its output).
"""

from __future__ import annotations

from dataclasses import dataclass

from search.errors import SearchError
from search.graph import OpGraph
from search.kinds import IN_PLACE, KernelKind, get_kind, kernel_kind
from search.layouts import BF16, LayoutError, activation_layout, storage_of
from search.op import Op
from search.precision import INSTRUCTIONS, INT8_INSTRUCTIONS, INT8_KNOB, KNOB, by_precision, precision_of
from search.templates.int8 import RANGE
from search.templates.workloads import KernelSpec, Knobs


@dataclass(frozen=True)
class Candidate:
    """One choice for a node: activation layouts in and out, and template knobs (sorted pairs)."""

    in_layout: str
    out_layout: str
    knobs: Knobs = ()

    @property
    def in_place(self) -> bool:
        """Whether the node's producers write straight into its output (a concat's ``in_place`` setting)."""
        return dict(self.knobs).get(IN_PLACE) == 1

    @property
    def keeps_bf16(self) -> bool:
        """Whether the candidate reads or writes bf16 values (a layout of ``bf16`` storage on a side)."""
        return BF16 in (storage_of(self.in_layout), storage_of(self.out_layout))

    @property
    def precision(self) -> str:
        """The least accurate precision the candidate computes or keeps its values in: its knobs' (``fp32``, ``bf16``
        or ``int8``), or ``bf16`` for a layout kind's on bf16 values."""
        computed = precision_of(self.knobs)
        return BF16 if computed == "fp32" and self.keeps_bf16 else computed

    @property
    def name(self) -> str:
        if self.in_layout == self.out_layout and not self.knobs and self.in_layout != "NC":
            return self.in_layout
        knobs = ",".join(f"{key}={value}" for key, value in self.knobs)
        return f"{self.in_layout}>{self.out_layout}" + (f":{knobs}" if knobs else "")

    @classmethod
    def parse(cls, name: str) -> Candidate:
        """Inverse of ``name``; SearchError for malformed strings."""
        layouts, _, knob_text = name.partition(":")
        in_layout, _, out_layout = layouts.partition(">")
        try:
            pairs = [item.split("=") for item in knob_text.split(",")] if knob_text else []
            knobs = tuple(sorted((key.strip(), int(value)) for key, value in pairs))
        except ValueError as exc:
            raise SearchError(f"malformed candidate {name!r}; expected IN>OUT[:knob=value,...] or LAYOUT") from exc
        if not in_layout:
            raise SearchError(f"malformed candidate {name!r}; expected IN>OUT[:knob=value,...] or LAYOUT")
        return cls(in_layout, out_layout or in_layout, knobs)


def kernel_spec(op: Op, candidate: Candidate) -> KernelSpec:
    """The template spec for running ``op`` as ``candidate`` (SearchError if its kind has no kernel)."""
    return kernel_kind(op.kind).spec(op, candidate.in_layout, candidate.out_layout, candidate.knobs)


def default_knobs(op: Op, in_layout: str, out_layout: str) -> Knobs:
    """The template's default knob setting for ``op`` in the given layouts (``()`` for a kind without a kernel)."""
    kind = get_kind(op.kind)
    if not isinstance(kind, KernelKind):
        return ()
    return kind.knob_space(kind.spec(op, in_layout, out_layout), 1)[0]


def node_candidates(op: Op, knobs_per_layout: int | None = None, space_size: int | None = None,
                    precision: str = "fp32") -> list[Candidate]:
    """Candidates of tunable ``op``: every supported layout pair x up to ``knobs_per_layout`` knob settings of the
    ``precision`` searched (``search.precision.by_precision``; int8 ones only where ``op`` is calibrated: its
    parameters hold its input's range, ``search.activation_ranges``); a pair with bf16 values on a side
    (``NCHW16c.bf16``) only with bf16 settings, or, for a layout kind, where ``precision`` is ``bf16`` or ``auto``.

    With ``space_size``, keep that many, taking the k-th best knob setting of every layout pair before any (k+1)-th
    (so the default of each pair comes first, in the kind's layout order).
    """
    if op.role != "tunable":
        raise SearchError(f"{op.name} ({op.kind}) is not a tunable node")
    kind = get_kind(op.kind)
    per_pair = []
    for in_layout, out_layout in kind.layout_pairs(op):
        keeps_bf16 = Candidate(in_layout, out_layout).keeps_bf16
        if isinstance(kind, KernelKind):
            space = [knobs for knobs in kind.knob_space(kind.spec(op, in_layout, out_layout))
                     if RANGE in op.params or precision_of(knobs) != "int8"]
            settings = by_precision(space, precision, knobs_per_layout)
            if not settings and keeps_bf16:
                continue  # bf16 values in or out: bf16 kernels only
            settings = settings or [()]
        elif keeps_bf16 and precision not in ("bf16", "auto"):
            continue  # a layout kind on bf16 values: where bf16 may be chosen
        else:
            settings = kind.variants(op, out_layout)
        per_pair.append([Candidate(in_layout, out_layout, knobs) for knobs in settings])
    ranked = [pair[rank] for rank in range(max(map(len, per_pair), default=0)) for pair in per_pair if rank < len(pair)]
    return ranked if space_size is None else ranked[: max(space_size, 1)]


def candidate_space(
    graph: OpGraph, knobs_per_layout: int | None = None, space_size: int | None = None
) -> dict[str, list[Candidate]]:
    """``node_candidates`` of every tunable node, keyed by node name, in topological order."""
    return {op.name: node_candidates(op, knobs_per_layout, space_size) for op in graph.tunable}


def check_candidate(op: Op, candidate: Candidate) -> None:
    """Raise SearchError (naming the node) unless ``op`` can run as ``candidate``."""
    where = f"node {op.name} ({op.kind})"
    kind = get_kind(op.kind)
    try:
        sides = [(candidate.in_layout if side == "in" else candidate.out_layout, shape)
                 for side, shape in zip(op.input_sides, op.input_shapes)]
        for name, shape in [] if op.layout_free else [*sides, (candidate.out_layout, op.shape)]:
            activation_layout(name, shape)  # a layout-free op's layouts name its kernel's view: checked as a pair
    except LayoutError as exc:
        raise SearchError(f"{where}: {exc}") from exc
    pairs = kind.layout_pairs(op)
    if (candidate.in_layout, candidate.out_layout) not in pairs:
        raise SearchError(f"{where}: no kernel for {candidate.in_layout} -> {candidate.out_layout}; "
                          f"possible: {', '.join(f'{i}>{o}' for i, o in pairs)}")
    if not isinstance(kind, KernelKind):
        variants = kind.variants(op, candidate.out_layout)
        if candidate.knobs not in variants:
            allowed = " or ".join(",".join(f"{k}={v}" for k, v in knobs) or "none" for knobs in variants)
            raise SearchError(f"{where}: settings {candidate.name!r} not possible here; allowed: {allowed}")
        return
    if candidate.knobs:
        allowed: dict[str, set[int]] = {}
        for setting in kind.knob_space(kind.spec(op, candidate.in_layout, candidate.out_layout)):
            for key, value in setting:
                allowed.setdefault(key, set()).add(value)
        for key, value in candidate.knobs:
            for knob, precision, flags in ((KNOB, "bf16", INSTRUCTIONS), (INT8_KNOB, "int8", INT8_INSTRUCTIONS)):
                if key == knob and value not in allowed.get(key, ()):
                    raise SearchError(f"{where}: {candidate.name!r} computes in {precision}, which needs "
                                      f"{flags.get(value, 'an instruction set tessera knows')}; this CPU's kernel "
                                      f"offers {sorted(allowed.get(key, ())) or f'no {precision} setting'}")
            if key == INT8_KNOB and RANGE not in op.params:
                raise SearchError(f"{where}: {candidate.name!r} computes in int8, which needs the range of its input "
                                  f"on calibration inputs (--calibration-data; a plan records it under 'ranges')")
            if value not in allowed.get(key, ()):
                raise SearchError(f"{where}: knob {key}={value} is not in the template's space "
                                  f"{ {k: sorted(v) for k, v in allowed.items()} }")
