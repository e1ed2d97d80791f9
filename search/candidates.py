"""The candidate space of every tunable node: (in_layout, out_layout, knobs), named by stable strings.

Names: ``"NCHW8c>NCHW16c:reg_n=14,unroll_kw=1"`` for conv/dense kernels (``"NC>NC:..."`` for dense; no ``:`` part
means the template's default knobs) and just the layout, ``"NCHW8c"``, for concat/add nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

from search.errors import SearchError
from search.graph import KERNEL_KINDS, Op, OpGraph
from search.layouts import LayoutError, candidate_layouts, check_layout
from search.templates import Conv2DWorkload, DenseWorkload, Epilogue, KernelSpec, Knobs, knob_space, supported_layouts


@dataclass(frozen=True)
class Candidate:
    """One choice for a node: activation layouts in and out, and template knobs (sorted pairs)."""

    in_layout: str
    out_layout: str
    knobs: Knobs = ()

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


def workload(op: Op) -> Conv2DWorkload | DenseWorkload:
    """The template workload of a conv2d / depthwise_conv2d / dense op."""
    if op.kind == "dense":
        batch, in_features = op.input_shapes[0]
        return DenseWorkload(batch, in_features, op.shape[1])
    if op.kind not in KERNEL_KINDS:
        raise SearchError(f"{op.name} ({op.kind}) has no kernel template")
    n, c, h, w = op.input_shapes[0]
    a = op.attrs
    return Conv2DWorkload(n, c, h, w, op.shape[1], a["kernel"], a["strides"], a["padding"], a["dilation"], a["groups"])


def kernel_spec(op: Op, candidate: Candidate) -> KernelSpec:
    """The template spec for running ``op`` as ``candidate``."""
    epilogue = Epilogue(op.attrs["bias"], op.attrs["residual"], op.attrs["activation"])
    return KernelSpec(workload(op), candidate.in_layout, candidate.out_layout, candidate.knobs, epilogue)


def _layout_pairs(op: Op) -> list[tuple[str, str]]:
    """(in, out) pairs: the template's among ``candidate_layouts``; for concat/add, layouts fitting every input."""
    if op.kind == "dense":
        return supported_layouts(workload(op))
    if op.kind in KERNEL_KINDS:
        ins, outs = candidate_layouts(op.input_shapes[0][1]), candidate_layouts(op.shape[1])
        return [(i, o) for i, o in supported_layouts(workload(op)) if i in ins and o in outs]
    shared = set.intersection(*(set(candidate_layouts(shape[1])) for shape in op.input_shapes))
    return [(layout, layout) for layout in candidate_layouts(op.shape[1]) if layout in shared]


def node_candidates(op: Op, knobs_per_layout: int | None = None, space_size: int | None = None) -> list[Candidate]:
    """Candidates of tunable ``op``: every supported layout pair x up to ``knobs_per_layout`` knob settings.

    With ``space_size``, keep that many, taking the k-th best knob setting of every layout pair before any (k+1)-th
    (so the default of each pair comes first, in ``candidate_layouts`` order).
    """
    if op.role != "tunable":
        raise SearchError(f"{op.name} ({op.kind}) is not a tunable node")
    per_pair = []
    for in_layout, out_layout in _layout_pairs(op):
        if op.kind in KERNEL_KINDS:
            spec = kernel_spec(op, Candidate(in_layout, out_layout))
            settings = knob_space(spec, knobs_per_layout) or [()]
        else:
            settings = [()]
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
    try:
        if op.kind in KERNEL_KINDS and op.kind != "dense":
            check_layout(candidate.in_layout, op.input_shapes[0][1])
            check_layout(candidate.out_layout, op.shape[1])
        elif op.kind != "dense":
            for shape in op.input_shapes + (op.shape,):
                check_layout(candidate.in_layout, shape[1])
    except LayoutError as exc:
        raise SearchError(f"{where}: {exc}") from exc
    if (candidate.in_layout, candidate.out_layout) not in _layout_pairs(op):
        raise SearchError(f"{where}: no kernel for {candidate.in_layout} -> {candidate.out_layout}; "
                          f"possible: {', '.join(f'{i}>{o}' for i, o in _layout_pairs(op))}")
    if candidate.knobs and op.kind not in KERNEL_KINDS:
        raise SearchError(f"{where}: {op.kind} nodes take no knobs, got {candidate.name!r}")
    if candidate.knobs:
        allowed: dict[str, set[int]] = {}
        for setting in knob_space(kernel_spec(op, Candidate(candidate.in_layout, candidate.out_layout))):
            for key, value in setting:
                allowed.setdefault(key, set()).add(value)
        for key, value in candidate.knobs:
            if value not in allowed.get(key, ()):
                raise SearchError(f"{where}: knob {key}={value} is not in the template's space "
                                  f"{ {k: sorted(v) for k, v in allowed.items()} }")
