"""The tuning space of a graph: which candidates of every tunable node the cost problem holds.

``tuning_space(graph, layouts=..., space_size=...)`` keeps the candidates (``search.candidates.node_candidates``)
whose layouts are among the searched ones, the first ``space_size`` of each kernel node (a layout kind's few
candidates all), and adds the uniform baselines'.
``cost_models.pricing`` prices the space into a ``solvers.Problem``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

from search.candidates import Candidate, node_candidates
from search.errors import SearchError
from search.graph import OpGraph
from search.kinds import LayoutKind, get_kind
from search.layouts import BF16, layout, searchable_layouts, storage_of, stored_as
from search.plan import BASELINES, baseline_plan
from search.precision import REDUCED, check_precision

DEFAULT_LAYOUTS = ("NCHW", "NHWC", "NCHW8c", "NCHW16c", "NCHW32c")
DEFAULT_SPACE_SIZE = 50


def parse_layouts(text: str | Iterable[str]) -> tuple[str, ...]:
    """``"NCHW,NHWC,NCHW16c"`` (or a sequence) -> validated, deduplicated layouts; SearchError if one is unknown."""
    items = text.split(",") if isinstance(text, str) else list(text)
    layouts = tuple(dict.fromkeys(item.strip() for item in items if item.strip()))
    if not layouts:
        raise SearchError("give at least one layout, e.g. NCHW,NHWC,NCHW16c")
    known = searchable_layouts()
    for name in layouts:
        if name not in known:
            raise SearchError(f"unknown layout {name!r}; tessera searches {', '.join(known)}")
    return layouts


def check_space_size(space_size: Any) -> int:
    """``space_size`` if it is a positive integer; SearchError otherwise."""
    if not isinstance(space_size, int) or isinstance(space_size, bool) or space_size < 1:
        raise SearchError(f"space size must be a positive integer (candidates per node), got {space_size!r}")
    return space_size


def _searched(name: str, allowed: set[str]) -> bool:
    """Whether a candidate's side in layout ``name`` is searched: its fp32 twin is ``allowed``, or it is a linear
    layer's bf16 rows (``CN32c.bf16``), searched wherever bf16 is, as ``NC`` rows always are."""
    return stored_as(name, "fp32") in allowed or (storage_of(name) == BF16 and layout(name).logical == "NC")


def _alternating(candidates: list[Candidate]) -> list[Candidate]:
    """``candidates`` keeping bf16 values alternating with the others, each in its order: a short space keeps both."""
    keeping = [c for c in candidates if c.keeps_bf16]
    others = [c for c in candidates if not c.keeps_bf16]
    return [c for couple in itertools.zip_longest(keeping, others) for c in couple if c is not None]


def tuning_space(
    graph: OpGraph,
    *,
    layouts: Sequence[str] = DEFAULT_LAYOUTS,
    space_size: int = DEFAULT_SPACE_SIZE,
    baselines: Sequence[str] = BASELINES,
    precision: str = "fp32",
) -> dict[str, list[Candidate]]:
    """Candidates of every tunable node: ``node_candidates`` whose layouts are in ``layouts`` (a linear layer's rows
    are always searched in ``NC``, in its bf16 rows where bf16 is searched, and in ``CN{c}c`` where ``layouts`` names
    it; a layout-free kind keeps its own), the first ``space_size`` of them (of a layout kind's, all: one per layout
    and variant, in place or copying, and no knob settings to trim), then the candidates of the uniform plans
    ``baselines`` (names of ``search.plan.UNIFORM``; default the ones ``tune`` times) not already there.

    ``precision`` (``search.precision.PRECISIONS``) says which precisions the candidates compute in: ``fp32``, ``bf16``
    or ``int8`` (a node without such a kernel, or an uncalibrated one for int8: fp32), or ``auto``: the first
    ``space_size`` fp32 candidates and the first ``space_size`` of each other precision (so that its space holds the
    fp32 one; the bf16 ones keeping bf16 values alternate with the others, so that a short space holds both); a layout
    of bf16 values (``NCHW16c.bf16``) counts as its fp32 twin in ``layouts``, and a node whose followers run after it
    (on fp32 values) writes none; SearchError for ``bf16`` or ``int8`` on a host without their instructions. The
    baselines (fp32) make every node's domain non-empty and let their predicted costs be read off the problem.
    """
    check_space_size(space_size)
    check_precision(precision)
    allowed = set(parse_layouts(layouts)) | {"NC"}
    baselines = [baseline_plan(graph, name) for name in baselines]
    space = {}
    for op in graph.tunable:
        chosen = []
        limit = None if isinstance(get_kind(op.kind), LayoutKind) else space_size
        followed = bool(graph.followers_of(op.name))  # followers run on fp32 values: the node writes fp32
        for searched in ("fp32", *REDUCED) if precision == "auto" else (precision,):
            ranked = [c for c in node_candidates(op, precision=searched)
                      if not (followed and storage_of(c.out_layout) == BF16)
                      and (op.layout_free or all(_searched(name, allowed) for name in (c.in_layout, c.out_layout)))]
            chosen += (_alternating(ranked) if searched == "bf16" else ranked)[:limit]
        chosen += [plan.candidate(op.name) for plan in baselines]
        space[op.name] = list(dict.fromkeys(chosen))
    return space
