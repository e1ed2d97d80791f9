"""Winograd convolution F(m x m, 3 x 3) for 3x3, stride-1 convolutions: fewer multiplications than the direct one.

The output is computed in m x m tiles (Lavin & Gray, 2016): each (m + 2)-square input tile ``d`` becomes
``V = B^T d B``, the weights ``g`` become ``U = G g G^T`` once when they are packed (``pack_weight``), the products
``M = sum_c U V`` are (m + 2)^2 independent matrix products over the input channels, and ``Y = A^T M A`` is the output
tile. F(2x2) takes 16 multiplications per tile and channel pair where the direct convolution takes 36, F(4x4) 36
where it takes 144. The price is numerical error (larger for larger m; ``export``'s check against the stock build
still applies) and the transforms' memory traffic.

Three stages in one PrimFunc: the input transform ``V`` (blocked as the inputs' channels allow, vectorised over
channels), the products ``M`` (a register tile of ``reg_n`` tiles by a vector block of ``ob`` output channels,
accumulated over input channels, like the matmul templates) and the output transform with the fused epilogue.
Inputs and outputs are the direct template's blocked views: NHWC or NCHW{c}c on both sides (NCHW's channel stride
would make every transformed vector a gather); an NHWC output is computed in blocks of ``oc_bn``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tvm
from tvm import te, topi

from search.bf16_bits import STORAGE
from search.layouts import layout, view_block
from search.templates.common import (
    epilogue_compute,
    finish,
    padded,
    relayout_params,
    resolve_knobs,
    unit,
    vectorize_tile,
    widened,
)
from search.templates.workloads import Conv2DWorkload, KernelSpec, Knobs

TILES = (4, 2)  # output tile sizes m, the default first
KNOB = "winograd"
REG_N = (8, 6, 12, 4)
OC_BLOCKS = (16, 32, 8, 64)

# (B, G, A) of F(m x m, 3 x 3) (Lavin & Gray 2016): V = B^T d B, U = G g G^T, Y = A^T M A
MATRICES = {
    2: (np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], "float64").T,
        np.array([[1, 0, 0], [1 / 2, 1 / 2, 1 / 2], [1 / 2, -1 / 2, 1 / 2], [0, 0, 1]], "float64"),
        np.array([[1, 1, 1, 0], [0, 1, -1, -1]], "float64").T),
    4: (np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
                  [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], "float64").T,
        np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6], [1 / 24, 1 / 12, 1 / 6],
                  [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], "float64"),
        np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]], "float64").T),
}


def applies(workload: Conv2DWorkload) -> bool:
    """Whether Winograd computes ``workload``: 3x3, stride 1, dilation 1, groups 1, input channels in whole
    vectors."""
    wl = workload
    return (wl.kernel == (3, 3) and wl.strides == (1, 1) and wl.dilation == (1, 1) and wl.groups == 1
            and wl.in_channels % unit().lanes == 0)


def supports(spec: KernelSpec) -> bool:
    """Whether the layouts suit Winograd: NHWC or NCHW{c}c on both sides, output blocks dividing the channels; no
    prologue (the direct template's)."""
    if not applies(spec.workload) or spec.epilogue.reads_through:
        return False
    sides = [layout(spec.in_layout), layout(spec.out_layout)]
    return all(side.block() is not None or side.name == "NHWC" for side in sides)


def _choices(spec: KernelSpec) -> dict[str, list[int]]:
    channels = spec.workload.out_channels
    choices = {KNOB: list(TILES)}
    block = layout(spec.out_layout).block()
    if block is None:
        choices["oc_bn"] = [b for b in OC_BLOCKS if channels % b == 0] or [channels]
    ob = choices["oc_bn"][0] if "oc_bn" in choices else block
    vectors = -(-ob // unit().lanes)
    choices["reg_n"] = [r for r in REG_N if r * vectors <= unit().accumulators] or [1]
    return choices


def count_tiles(workload: Conv2DWorkload, m: int) -> int:
    return -(-workload.out_height // m) * -(-workload.out_width // m)


def knob_space(spec: KernelSpec) -> list[Knobs]:
    """One setting per tile size, with the default output block and the first register tile that needs no more
    tiles than there are (``REG_N`` order), else the smallest. The tile sizes whose tiles fill the default register tile
    come first (in ``TILES`` order): a small image (7x7: four 4x4 tiles) puts F(2x2) before F(4x4)."""
    if not supports(spec):
        return []
    choices = _choices(spec)
    space = []
    fills = [m for m in choices[KNOB] if count_tiles(spec.workload, m) >= choices["reg_n"][0]]
    for m in fills + [m for m in choices[KNOB] if m not in fills]:
        tiles = count_tiles(spec.workload, m)
        reg_n = next((r for r in choices["reg_n"] if r <= tiles), min(choices["reg_n"]))
        space.append(tuple(sorted({**{name: values[0] for name, values in choices.items()}, KNOB: m,
                                   "reg_n": reg_n}.items())))
    return space


def is_winograd(knobs: Knobs) -> bool:
    return any(name == KNOB for name, _ in knobs)


def _blocks(spec: KernelSpec) -> tuple[int, int, dict[str, int]]:
    knobs = resolve_knobs(spec.knobs, _choices(spec))
    wl = spec.workload
    ob = knobs["oc_bn"] if "oc_bn" in knobs else view_block(spec.out_layout, wl.out_channels)
    return view_block(spec.in_layout, wl.in_channels), ob, knobs


def pack_weight(spec: KernelSpec, weight: np.ndarray) -> np.ndarray:
    """OIHW -> ``U = G g G^T`` as ``(m + 2, m + 2, O // ob, I, ob)``, computed in float64."""
    _, ob, knobs = _blocks(spec)
    m = knobs[KNOB]
    _, g, _ = MATRICES[m]
    u = np.einsum("ar,ocrs,bs->aboc", g, np.asarray(weight, np.float64), g)
    alpha, _, o, i = u.shape
    return np.ascontiguousarray(u.reshape(alpha, alpha, o // ob, ob, i).transpose(0, 1, 2, 4, 3), spec.workload.dtype)


def _pick(index: tvm.tirx.PrimExpr, values: list) -> tvm.tirx.PrimExpr:
    """``values[index]`` for an index the schedule unrolls: Selects on ``index == i`` that fold once it is constant."""
    value = values[-1]
    for i in range(len(values) - 2, -1, -1):
        value = tvm.tirx.Select(index == i, values[i], value)
    return value


def _combination(terms: list[tuple[float, tvm.tirx.PrimExpr]], dtype: str) -> tvm.tirx.PrimExpr:
    """``sum(coefficient * expr)`` without the zero terms and the multiplications by +-1."""
    total = None
    for coefficient, expr in terms:
        if coefficient == 0:
            continue
        term = expr if abs(coefficient) == 1 else expr * tvm.tirx.const(abs(coefficient), dtype)
        if total is None:
            total = term if coefficient > 0 else -term
        else:
            total = total + term if coefficient > 0 else total - term
    return tvm.tirx.const(0.0, dtype) if total is None else total


def input_rows(spec: KernelSpec, data: te.Tensor, m: int, tile_count: int) -> te.Tensor:
    """``B^T d`` of every tile: "BTd" ``(alpha, alpha, n, tile_count, C)`` from ``data``, the blocked view ``(n,
    C // ib, h, w, ib)`` of the input (bf16 values widened), padded as the tiles need ("data_pad"); tiles past the
    last (a register tile's padding) repeat it."""
    wl, dtype = spec.workload, "float32"
    b, _, _ = MATRICES[m]
    alpha, ib = m + 2, int(data.shape[-1])
    n, c, h, w = wl.in_shape
    rows, columns, tiles = -(-wl.out_height // m), -(-wl.out_width // m), count_tiles(wl, m)
    top, left, _, _ = wl.padding
    pad = topi.nn.pad(data, (0, 0, top, left, 0), (0, 0, rows * m + 2 - h - top, columns * m + 2 - w - left, 0),
                      name="data_pad")

    def element(eps, r2, batch, tile, channel):  # (B^T d)[eps, r2]
        tile = te.min(tile, tiles - 1)
        row, column = tile // columns * m, tile % columns * m

        def value(r1):
            stored = pad[batch, channel // ib, row + r1, column + r2, channel % ib]
            return widened(stored) if stored.dtype == STORAGE else stored

        return _pick(eps, [_combination([(b[r1, e], value(r1)) for r1 in range(alpha)], dtype) for e in range(alpha)])

    return te.compute((alpha, alpha, n, tile_count, c), element, name="BTd")


def transformed(rows_in: te.Tensor, m: int, eps, nu, batch, tile, channel) -> tvm.tirx.PrimExpr:
    """``(B^T d B)[eps, nu]`` of a tile and channel, from its rows ``B^T d`` (``input_rows``)."""
    b, _, _ = MATRICES[m]
    return _pick(nu, [_combination([(b[r2, u], rows_in[eps, r2, batch, tile, channel]) for r2 in range(m + 2)],
                                   "float32") for u in range(m + 2)])


def output_transform(spec: KernelSpec, product: Callable[..., tvm.tirx.PrimExpr], m: int, ob: int, tile_count: int
                     ) -> tuple[te.Tensor, list[te.Tensor]]:
    """The output "out" in blocks of ``ob`` channels (bf16 values rounded), ``A^T M A`` of each tile with the fused
    epilogue, from
    ``product(eps, nu, batch, kb, tile, ko)``, the element of ``M`` of channel ``kb * ob + ko`` (half-transform
    "MA", ``tile_count`` tiles, computed per tile by ``schedule_output``); returns (out, the epilogue's inputs)."""
    wl, dtype = spec.workload, "float32"
    _, _, a = MATRICES[m]
    alpha, n, k = m + 2, wl.batch, wl.out_channels
    rows, columns = -(-wl.out_height // m), -(-wl.out_width // m)
    columns_out = te.compute((alpha, m, n, k // ob, tile_count, ob),  # (M A)[r1, j]
                             lambda r1, j, batch, kb, tile, ko: _pick(j, [_combination(
                                 [(a[r2, jj], product(r1, r2, batch, kb, tile, ko)) for r2 in range(alpha)], dtype)
                                 for jj in range(m)]), name="MA")

    def output_tile(batch, kb, oh, ow, ko):  # (A^T M A)[oh % m, ow % m]
        tile = oh // m * columns + ow // m
        return _pick(oh % m, [_combination([(a[r1, i], columns_out[r1, ow % m, batch, kb, tile, ko])
                                            for r1 in range(alpha)], dtype) for i in range(m)])

    y = te.compute((n, k // ob, rows * m, columns * m, ob), output_tile, name="Y")
    cropped = None if (rows * m, columns * m) == (wl.out_height, wl.out_width) else (n, k // ob, *wl.out_shape[2:], ob)
    return epilogue_compute(y, spec.epilogue, k, lambda nn, kb, hh, ww, ko: kb * ob + ko, cropped,
                            storage=layout(spec.out_layout).dtype)


def relayout(sch: tvm.s_tir.Schedule, spec: KernelSpec, ib: int, ob: int) -> None:
    """The input, the residual and the output re-indexed from their blocked views to the spec's layouts."""
    reads = [("data_pad", "read", 0, spec.in_layout, ib)]
    if spec.epilogue.residual:
        reads.append(("out", "read", 2 if spec.epilogue.bias else 1, spec.out_layout, ob))
    relayout_params(sch, [*reads, ("out", "write", 0, spec.out_layout, ob)])


def build(spec: KernelSpec, target: tvm.target.Target) -> tvm.tirx.PrimFunc:
    ib, ob, knobs = _blocks(spec)
    m, reg_n, wl, dtype = knobs[KNOB], knobs["reg_n"], spec.workload, spec.workload.dtype
    alpha, tile_count = m + 2, padded(count_tiles(spec.workload, m), knobs["reg_n"])
    n, c, h, w = wl.in_shape
    k = wl.out_channels
    data = te.placeholder((n, c // ib, h, w, ib), dtype, name="data")
    weight = te.placeholder((alpha, alpha, k // ob, c, ob), dtype, name="weight")
    rows_in = input_rows(spec, data, m, tile_count)
    v = te.compute((alpha, alpha, n, tile_count, c), lambda *index: transformed(rows_in, m, *index), name="V")
    rc = te.reduce_axis((0, c), name="rc")
    product = te.compute((alpha, alpha, n, k // ob, tile_count, ob),
                         lambda e, u, batch, kb, tile, ko: te.sum(v[e, u, batch, tile, rc] * weight[e, u, kb, rc, ko],
                                                                  axis=rc), name="M")
    out, extra = output_transform(spec, lambda *index: product[index], m, ob, tile_count)
    sch = tvm.s_tir.Schedule(te.create_prim_func([data, weight, *extra, out]))
    relayout(sch, spec, ib, ob)
    _schedule(sch, m, reg_n)
    return finish(sch)


def _schedule(sch: tvm.s_tir.Schedule, m: int, reg_n: int) -> None:
    sch.compute_inline(sch.get_sblock("data_pad"))
    transform = sch.get_sblock("V")
    eps, nu, batch, tile, channel = sch.get_loops(transform)
    outer, lanes = sch.split(channel, [None, unit().lanes])
    sch.reorder(batch, tile, outer, eps, nu, lanes)
    sch.parallel(sch.fuse(batch, tile))
    sch.unroll(eps)
    sch.unroll(nu)
    sch.vectorize(lanes)
    unrolled_at(sch, "BTd", outer)

    product = sch.get_sblock("M")
    eps, nu, batch, kb, tile, ko, rc = sch.get_loops(product)
    tile_outer, tile_inner = sch.split(tile, [None, reg_n])
    sch.reorder(eps, nu, batch, kb, tile_outer, rc, tile_inner, ko)
    sch.parallel(sch.fuse(eps, nu, batch, kb, tile_outer))
    sch.unroll(tile_inner)
    sch.vectorize(ko)
    vectorize_tile(sch, sch.decompose_reduction(product, rc), depth=1)

    schedule_output(sch, m)


def schedule_output(sch: tvm.s_tir.Schedule, m: int) -> None:
    """The output transform (``output_transform``): tile by tile, rows of tiles in parallel, each tile's ``M A``
    computed as it is written, the channel block vectorised."""
    sch.compute_inline(sch.get_sblock("Y"))
    out = sch.get_sblock("out")
    batch, kb, oh, ow, ko = sch.get_loops(out)
    rows, row = sch.split(oh, [None, m])
    columns, column = sch.split(ow, [None, m])
    sch.reorder(batch, kb, rows, columns, row, column, ko)
    sch.parallel(sch.fuse(batch, kb, rows))
    sch.unroll(row)
    sch.unroll(column)
    sch.vectorize(ko)
    unrolled_at(sch, "MA", columns)


def unrolled_at(sch: tvm.s_tir.Schedule, name: str, loop: tvm.s_tir.LoopRV) -> None:
    """Compute the half-transform ``name`` per tile under ``loop``: its loops unrolled, the innermost vectorised."""
    block = sch.get_sblock(name)
    sch.compute_at(block, loop)
    loops = sch.get_loops(block)
    depth = next(i for i, candidate in enumerate(loops) if sch.get(candidate).same_as(sch.get(loop))) + 1
    vectorize_tile(sch, block, depth=depth)
