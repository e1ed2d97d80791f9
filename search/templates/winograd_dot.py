"""Winograd convolution F(m x m, 3 x 3) in bfloat16: the fp32 transforms of ``search.templates.winograd`` around
products on the bf16 dot-product micro-kernels (``search.templates.dot``).

The input transform ``V = B^T d B`` is computed in fp32 and rounded to bf16 into blocks of 32 channels, one
``(tiles, 32)`` matrix per transform point (eps, nu), image and block (the channels padded with zeros to whole
blocks); the weights' ``U = G g G^T`` are computed in float64 when packed and rounded once. Each point's ``M = V U``
is a 1x1 convolution whose pixels are the tiles: one micro-kernel call per point, image, run of ``CHUNK`` tiles and
block of 16 output channels, its fp32 sums written to ``M``; the output transform ``Y = A^T M A`` and the fused
epilogue are the fp32 template's.

The output transform amplifies the rounding of ``V`` and ``U``: on random data (16 to 256 channels) F(2x2) in bf16
is 3.3-4.1e-3 off the float64 reference (the direct bf16 kernel 1.8e-3), F(4x4), whose coefficients reach 8,
4.9-5.6e-2, beyond bf16's tolerance (``search.precision.TOLERANCE``): only F(2x2) holds.

Settings: ``(("bf16", unit), ("winograd", 2))``, one per bf16 unit the host runs, in the layouts the fp32 template
takes (bf16 values in or out too), output channels in whole blocks of 16.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tvm
from tvm import te

from search.bf16_bits import STORAGE, to_bf16_bits
from search.errors import SearchError
from search.layouts import layout, view_block
from search.precision import KNOB as BF16_KNOB
from search.precision import bf16_settings
from search.templates import winograd
from search.templates.bf16 import BF16
from search.templates.common import finish, padded, rounded
from search.templates.dot import CHUNK, LANES, blocked_weights, packed, row_calls
from search.templates.workloads import Epilogue, KernelSpec, Knobs

TILES = (2,)  # the output tile sizes whose error holds in bf16


def supports(spec: KernelSpec) -> bool:
    """Where the fp32 template applies and the output channels fill blocks of 16."""
    return winograd.supports(spec) and spec.workload.out_channels % LANES == 0


def is_bf16_winograd(knobs: Knobs) -> bool:
    return winograd.is_winograd(knobs) and BF16_KNOB in dict(knobs)


def knob_space(spec: KernelSpec) -> list[Knobs]:
    """One setting per bf16 unit of this host (AMX first) and tile size."""
    if not supports(spec):
        return []
    return [tuple(sorted({**dict(unit), winograd.KNOB: m}.items())) for unit in bf16_settings() for m in TILES]


def _setting(spec: KernelSpec) -> tuple[int, int]:
    """(bf16 unit, tile size); SearchError unless the spec's knobs are exactly those and the kernel applies."""
    knobs = dict(spec.knobs)
    if (set(knobs) != {BF16_KNOB, winograd.KNOB} or knobs[BF16_KNOB] not in BF16.functions
            or knobs[winograd.KNOB] not in TILES):
        raise SearchError(f"a bf16 Winograd kernel takes the knobs bf16 (one of {sorted(BF16.functions)}) and "
                          f"winograd (one of {list(TILES)}), got {spec.knobs}")
    if not supports(spec):
        raise SearchError(f"no bf16 Winograd kernel for {spec}: it needs a 3x3 stride-1 convolution in NHWC or "
                          "NCHW{c}c on both sides, input channels in whole vectors, output channels in blocks of 16")
    return knobs[BF16_KNOB], knobs[winograd.KNOB]


def pack_weight(spec: KernelSpec, weight: np.ndarray) -> np.ndarray:
    """OIHW -> ``U = G g G^T`` (float64, then rounded to bf16 bits), for each point (eps, nu) the micro-kernels'
    blocks of a 1x1 convolution: ``(m + 2, m + 2, O // 16, I' // 32, 1, 1, 16, 16, 2)``."""
    _, m = _setting(spec)
    _, g, _ = winograd.MATRICES[m]
    u = np.einsum("ar,ocrs,bs->aboc", g, np.asarray(weight, np.float64), g).astype(np.float32)
    alpha = m + 2
    planes = [blocked_weights(u[eps, nu][:, :, None, None], BF16) for eps in range(alpha) for nu in range(alpha)]
    return to_bf16_bits(np.stack(planes).reshape(alpha, alpha, *planes[0].shape))


def _view_block(spec: KernelSpec) -> int:
    """The output's channel block in the output transform: 16 (one block of ``M``), or the layout's smaller one."""
    block = layout(spec.out_layout).block()
    return LANES if block is None or block >= LANES else block


def build(spec: KernelSpec, target: tvm.target.Target) -> tvm.tirx.PrimFunc:
    """Arguments data, weight, the bias where the epilogue has one, the residual where it adds one, out."""
    unit, m = _setting(spec)
    wl = spec.workload
    n, c, h, w = wl.in_shape
    k, alpha, tiles = wl.out_channels, m + 2, winograd.count_tiles(wl, m)
    ib, block = view_block(spec.in_layout, c), BF16.block
    blocks, out_blocks = padded(c, block) // block, k // LANES
    data = te.placeholder((n, c // ib, h, w, ib), layout(spec.in_layout).dtype, name="data")
    weight = te.placeholder((alpha, alpha, out_blocks, blocks, 1, 1, block // BF16.group, LANES, BF16.group),
                            STORAGE, name="weight")
    rows_in = winograd.input_rows(spec, data, m, tiles)

    def source(eps, nu, batch, cb, tile, ci):
        channel = cb * block + ci
        value = winograd.transformed(rows_in, m, eps, nu, batch, tile, tvm.tirx.min(channel, c - 1))
        return value, channel < c

    v = packed((alpha, alpha, n, blocks, tiles, block), source, "V", rounded, tvm.tirx.const(0, STORAGE))
    planes, chunks, weights = alpha * alpha * n, -(-tiles // CHUNK), blocks * block * LANES
    inner = out_blocks * weights < blocks * tiles * block  # a chunk's calls cycle through the point's weights

    def split(call):  # (point and image, chunk, block of output channels)
        plane, rest = call // (chunks * out_blocks), call % (chunks * out_blocks)
        return (plane, rest // out_blocks, rest % out_blocks) if inner else (plane, rest % chunks, rest // chunks)

    def offsets(call):
        plane, chunk, ob = split(call)
        return (plane * blocks * tiles + chunk * CHUNK) * block, (plane // n * out_blocks + ob) * weights

    def scalars(call):  # blocks, row and block strides, a 1x1 kernel of stride 1, the run's width
        return blocks, tiles * block, tiles * block, 1, 1, 1, 1, 1, tvm.tirx.min(CHUNK, tiles - split(call)[1] * CHUNK)

    def place(call, pixel, channel):
        plane, chunk, _ = split(call)
        return None, (plane, channel, 0, chunk * CHUNK + pixel)

    sums = dataclasses.replace(spec, knobs=((BF16_KNOB, unit),), epilogue=Epilogue(bias=False))
    product, _ = row_calls(v, weight, sums, "NCHW16c", (planes, k, 1, tiles), planes * chunks * out_blocks, offsets,
                           scalars, CHUNK, lambda call: split(call)[2], place, BF16, name="M")
    ob = _view_block(spec)

    def product_at(eps, nu, batch, kb, tile, ko):
        channel = kb * ob + ko
        return product[(eps * alpha + nu) * n + batch, channel // LANES, 0, tile, channel % LANES]

    out, extra = winograd.output_transform(spec, product_at, m, ob, tiles)
    sch = tvm.s_tir.Schedule(te.create_prim_func([data, weight, *extra, out]))
    winograd.relayout(sch, spec, ib, ob)
    _schedule_input(sch, min(ib, block))
    winograd.schedule_output(sch, m)
    return finish(sch)


def _schedule_input(sch: tvm.s_tir.Schedule, run: int) -> None:
    """``V`` tile by tile, tiles in parallel, each block's rows ``B^T d`` computed as it is rounded and written, in
    vectors of the ``run`` channels the input holds contiguously."""
    sch.compute_inline(sch.get_sblock("data_pad"))
    transform = sch.get_sblock("V")
    eps, nu, batch, cb, tile, ci = sch.get_loops(transform)
    sch.reorder(batch, tile, cb, eps, nu, ci)
    sch.parallel(sch.fuse(batch, tile))
    sch.unroll(eps)
    sch.unroll(nu)
    runs, ci = sch.split(ci, [None, run])
    sch.reorder(runs, eps, nu, ci)
    sch.vectorize(ci)
    winograd.unrolled_at(sch, "BTd", runs)
