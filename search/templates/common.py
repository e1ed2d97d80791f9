"""Pieces shared by the templates: knob spaces, the re-indexing of blocked views, the epilogue compute, finishing
touches.

Every conv template computes on *blocked* activations ``(n, C // b, h, w, b)``. A layout is such a view
(``search.layouts.view_block``): ``NCHW{c}c`` with ``b = c``, ``NCHW`` with ``b = 1`` and ``NHWC`` with ``b = C``
(one block); the kernel's parameter buffers are then re-indexed to the physical layout with
``Schedule.transform_layout``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from fractions import Fraction

import tvm
from tvm import te

from search.bf16_bits import STORAGE
from search.errors import SearchError
from search.followers import activation_kind
from search.isa import HOST, VectorUnit
from search.layouts import layout
from search.templates.workloads import Epilogue, Knobs

_unit = HOST


def unit() -> VectorUnit:
    """The vector unit the templates size vectors and register tiles for: the host's unless ``sized_for``."""
    return _unit


@contextmanager
def sized_for(target_unit: VectorUnit) -> Iterator[None]:
    """Size the templates (and the generic schedule) for ``target_unit`` inside the block: kernels compiled for
    another CPU, or the knob spaces of both units tested on one host. Not thread-safe: it sets a module global."""
    global _unit
    saved, _unit = _unit, target_unit
    try:
        yield
    finally:
        _unit = saved


def to_physical(name: str, block: int | None) -> Callable[..., tuple]:
    """Index map from blocked ``(n, cb, h, w, ci)`` coordinates (block ``block``) to layout ``name``'s stored axes;
    ``block`` None: from logical ``(n, c, h, w)`` coordinates."""
    stored = layout(name).stored_coordinates()
    if block is None:
        return stored
    return lambda n, cb, h, w, ci: stored(n, cb * block + ci, h, w)


def relayout_params(sch: tvm.s_tir.Schedule, accesses: Sequence[tuple[str, str, int, str, int | None]]) -> None:
    """Re-index parameter buffers to physical layouts: ``(block, "read"|"write", index, layout, view block)``; a view
    block of None means the buffer is indexed in logical NCHW. A blocked layout viewed in its own block is left as
    is."""
    for block, kind, index, name, view in accesses:
        if layout(name).block() is None or layout(name).block() != view:
            sch.transform_layout(block, (kind, index), to_physical(name, view))


def epilogue_value(epilogue: Epilogue, value: tvm.tirx.PrimExpr, bias: tvm.tirx.PrimExpr | None = None,
                   residual: tvm.tirx.PrimExpr | None = None) -> tvm.tirx.PrimExpr:
    """``act(value + bias + residual)`` (``act(value + bias) + residual`` with ``epilogue.residual_after_activation``)
    of one element, the bias and residual as given (None: the epilogue has none)."""
    if bias is not None:
        value = value + bias
    late = epilogue.residual_after_activation
    if residual is not None and not late:
        value = value + residual
    if epilogue.activation is not None:
        value = activation_kind(epilogue.activation).tir(value, dict(epilogue.activation_attrs))
    return value + residual if residual is not None and late else value


def epilogue_compute(
    acc: te.Tensor,
    epilogue: Epilogue,
    channels: int,
    channel: Callable[..., tvm.tirx.PrimExpr],
    shape: Sequence[int] | None = None,
    source: Callable[..., tuple] | None = None,
    storage: str = "float32",
    scale: te.Tensor | None = None,
) -> tuple[te.Tensor, list[te.Tensor]]:
    """``act(acc + bias[channel(*idx)] + residual)`` as one compute "out" (``act(acc + bias) + residual`` with
    ``epilogue.residual_after_activation``); returns (out, inputs). ``act`` is the registered activation kind's
    ``tir`` form (``search.followers``), which vectorises. With ``scale`` (fp32 per channel, for integer sums),
    ``acc`` is converted to fp32 and multiplied by ``scale[channel(*idx)]`` first.

    "out" is shaped like ``acc`` unless ``shape`` is given (a cropped write-back of a padded ``acc``), with
    ``source(*idx)`` the ``acc`` element of its index ``idx`` (default: the same index); the residual has out's shape.
    Out and residual hold ``storage``: fp32, or bf16 bits (``search.bf16_bits.STORAGE``: the residual widened, the
    result rounded). Without any epilogue this is a plain copy, which serves as the register tile's write-back.
    """
    dtype = acc.dtype if scale is None else "float32"
    shape = acc.shape if shape is None else shape
    extra: list[te.Tensor] = []
    bias = residual = None
    if epilogue.bias:
        bias = te.placeholder((channels,), dtype, name="bias")
        extra.append(bias)
    if epilogue.residual:
        residual = te.placeholder(shape, storage, name="residual")
        extra.append(residual)

    def body(*idx):
        value = acc[idx] if source is None else acc[source(*idx)]
        if scale is not None:
            value = value.astype("float32") * scale[channel(*idx)]
        added = None if residual is None else widened(residual[idx]) if storage == STORAGE else residual[idx]
        value = epilogue_value(epilogue, value, None if bias is None else bias[channel(*idx)], added)
        return rounded(value) if storage == STORAGE else value

    return te.compute(shape, body, name="out"), extra


def vectorize_tile(sch: tvm.s_tir.Schedule, block: tvm.s_tir.SBlockRV, depth: int, width_last: bool = False) -> None:
    """Vectorise the innermost loop of ``block`` below ``depth`` and unroll the others.

    The loops below ``depth`` are a register tile (width, channels), either possibly elided when its extent is 1;
    ``width_last`` puts the width loop innermost (for layouts contiguous along width).
    """
    loops = sch.get_loops(block)[depth:]
    if width_last and len(loops) == 2:
        sch.reorder(loops[1], loops[0])
        loops = loops[::-1]
    for loop in loops[:-1]:
        sch.unroll(loop)
    if loops:
        sch.vectorize(loops[-1])


def schedule_matmul(sch: tvm.s_tir.Schedule, acc: tvm.s_tir.SBlockRV, outer: Sequence, row, row_tile: int,
                    columns, vector, k, k_unroll: int, columns_outer: bool = False) -> None:
    """The matmul templates' schedule of reduction block ``acc`` and its write-back "out": rows split in unrolled
    register tiles of ``row_tile``, the reduction ``k`` unrolled by ``k_unroll``, the ``vector`` loop (a column block)
    vectorised innermost; the ``outer`` loops, row tiles and ``columns`` (the column blocks) fused and run in
    parallel, each writing its tile back at once. ``columns_outer``: column blocks outside the row tiles, so that a
    block's weights stay in cache while every row tile passes (else each row tile streams every block's)."""
    row_outer, row_inner = sch.split(row, [None, row_tile])
    k_outer, k_inner = sch.split(k, [None, k_unroll])
    tiles = (columns, row_outer) if columns_outer else (row_outer, columns)
    sch.reorder(*outer, *tiles, k_outer, k_inner, row_inner, vector)
    out = sch.get_sblock("out")
    sch.reverse_compute_at(out, tiles[-1])
    sch.parallel(sch.fuse(*outer, *tiles))
    sch.unroll(k_inner)
    sch.unroll(row_inner)
    sch.vectorize(vector)
    init = sch.decompose_reduction(acc, k_outer)
    vectorize_tile(sch, init, depth=1)
    vectorize_tile(sch, out, depth=1)


def finish(sch: tvm.s_tir.Schedule) -> tvm.tirx.PrimFunc:
    """The scheduled PrimFunc, marked scheduled and without a global symbol."""
    func = sch.mod["main"].with_attr("tir.is_scheduled", True)
    return func.without_attr("global_symbol")


def divisors(n: int, limit: int) -> list[int]:
    """Divisors of ``n`` up to ``limit``, ascending."""
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def by_closeness(values: Sequence[int], default: int) -> list[int]:
    """``values`` with ``default`` first and the rest by distance to it (ties: smaller first)."""
    return sorted(values, key=lambda v: (v != default, abs(v - default), v))


def padded(extent: int, tile: int) -> int:
    """``extent`` rounded up to a multiple of ``tile``."""
    return -(-extent // tile) * tile


def by_padded_work(extent: int, tiles: Sequence[int]) -> list[int]:
    """``tiles`` ranked by the work of covering ``extent`` with them, padding included: padded extent x (tile + 1) /
    tile, one unit of overhead per tile."""
    return sorted(tiles, key=lambda t: Fraction(padded(extent, t) * (t + 1), t))


def clamped(index: tvm.tirx.PrimExpr, extent: int, loop: int) -> tvm.tirx.PrimExpr:
    """``index``, running over ``loop`` values, into an axis of ``extent``: past the end (a loop padded to a multiple
    of its tile), the last element again: no branch, no padded copy; what is computed from it is dropped."""
    return index if loop <= extent else te.min(index, extent - 1)


MIN_ROW_TILE = 4
"""A row count whose best dividing register tile is shorter than this gets padded tiles first."""


def row_tiles(rows: int, limit: int = 8, default: int = 4) -> list[int]:
    """Register tiles of ``rows`` (unrolled rows sharing each loaded vector): divisors up to ``limit``, the largest
    up to ``default`` first. When that is shorter than MIN_ROW_TILE (a prime-ish count such as ViT's 197 tokens),
    tiles from MIN_ROW_TILE to ``limit`` that pad the rows come first (``by_padded_work``); the kernel then computes
    the extra rows from a repeated last row and drops them."""
    tiles = divisors(rows, limit)
    best = max(t for t in tiles if t <= default)
    ordered = by_closeness(tiles, best)
    if best < MIN_ROW_TILE < rows:
        first = by_padded_work(rows, range(MIN_ROW_TILE, limit + 1))
        ordered = first + [t for t in ordered if t not in first]
    return ordered


def k_unrolls(extent: int) -> list[int]:
    """Unroll factors of a reduction of ``extent`` that divide it: 4 (the default where it divides), 1, 8."""
    return [k for k in (4, 1, 8) if extent % k == 0]


def reg_tile_default(width: int, vectors_per_row: int) -> int:
    """Largest divisor of ``width`` up to 14 whose tile fits the accumulator registers."""
    fits = [d for d in divisors(width, 14) if d * vectors_per_row <= unit().accumulators]
    return fits[-1] if fits else 1


def knob_product(choices: Mapping[str, Sequence[int]], size: int | None) -> list[Knobs]:
    """All settings of ``choices`` (each list default first), default setting first, closest-to-default next."""
    names = sorted(choices)
    ranked = itertools.product(*(range(len(choices[name])) for name in names))
    ordered = sorted(ranked, key=lambda ranks: (sum(ranks), ranks))
    space = [tuple((name, int(choices[name][r])) for name, r in zip(names, ranks)) for ranks in ordered]
    return space if size is None else space[: max(size, 0)]


def resolve_knobs(knobs: Knobs, choices: Mapping[str, Sequence[int]]) -> dict[str, int]:
    """Defaults overridden by ``knobs``; raises SearchError for unknown names or values outside the space."""
    values = {name: options[0] for name, options in choices.items()}
    for name, value in knobs:
        if name not in choices:
            raise SearchError(f"unknown knob {name!r}; this template has {sorted(choices)}")
        if value not in choices[name]:
            raise SearchError(f"knob {name}={value} is not one of {list(choices[name])}")
        values[name] = int(value)
    return values


def rounded(value: tvm.tirx.PrimExpr) -> tvm.tirx.PrimExpr:
    """``value`` (fp32) rounded to bf16 (to nearest, ties to even), as its bits (``search.bf16_bits.STORAGE``)."""
    bits = tvm.tirx.reinterpret("uint32", value)
    half, one = tvm.tirx.const(0x7FFF, "uint32"), tvm.tirx.const(1, "uint32")
    return ((bits + half + ((bits >> 16) & one)) >> 16).astype(STORAGE)


def widened(bits: tvm.tirx.PrimExpr) -> tvm.tirx.PrimExpr:
    """The fp32 value of bf16 ``bits`` (``search.bf16_bits.STORAGE``): exact."""
    return tvm.tirx.reinterpret("float32", bits.astype("uint32") << tvm.tirx.const(16, "uint32"))
