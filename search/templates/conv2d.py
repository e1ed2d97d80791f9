"""Dense (groups == 1) 2-D convolution for every (in, out) pair of NCHW, NHWC and NCHW{c}c layouts.

One compute serves all pairs: ``topi.nn.conv2d_NCHWc`` on blocked views (input block ``ib`` from the input layout,
output block ``ob`` from the output layout, or the ``oc_bn`` knob for NCHW / NHWC outputs), the fused epilogue as its
consumer, and parameter buffers re-indexed to the physical layouts. The schedule is TVM's classic x86 NCHWc one:
an output-width register tile (``reg_n``) of vectorised output-channel blocks, accumulated over input-channel blocks
and the kernel window, written back through the epilogue, the outer loops fused and run in parallel.

Neither knob has to divide its extent: the convolution then computes zero-padded output channels (weights padded
with zeros) or extra output columns (the input padded further right), and the write-back keeps only the real ones.
So a 126-channel NCHW output still fills the vector lanes (``oc_bn=16``: 128 computed), and a 71-wide output gets a
12-wide register tile (72 computed) instead of its only divisor tile, 1.

3x3 stride-1 convolutions also have Winograd settings (knob ``winograd``: the output tile size), built by
``search.templates.winograd``: the algorithm is a choice of the plan like the layouts and the tiles. On a host with
bf16 instructions, the last settings compute in bf16 (knob ``bf16``, ``search.precision``), built by
``search.templates.conv2d_dot`` (with knob ``winograd``: ``search.templates.winograd_dot``).

Knob ``rows`` orders the parallel loops: 0 (the default) runs each output channel block over all rows, its weights
kept in cache; 1 runs each output row over all channel blocks, its input rows kept in cache (large images). A setting
leaves ``rows`` out when it is 0, so that the records of settings from before the knob keep their keys.

A kernel with a prologue (``Epilogue.prologue``: ``relu(data * scale + shift)`` per input channel, DenseNet's
pre-activation BatchNorm-ReLU; or ``Epilogue.gate``: ``data * gate``, squeeze-and-excitation's per-image channel
gate, an activation of shape (N, C, 1, 1) stored in the input layout) applies it where the knob ``prologue`` says:
``PER_ROW`` computes it once per input row the output row reads, just before the row's convolution (the loops run
row-major then: rows in parallel, the output channel blocks inside); ``SEPARATE`` as a pass over the whole input
before the convolution (what running it as its own operator costs, minus the call); ``ON_READ`` inlines it into every
read of the data (recomputed once per output channel block and kernel tap).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np
import tvm
from tvm import te, topi

from search.errors import SearchError
from search.layouts import candidate_layouts, layout, view_block
from search.templates import conv2d_dot, winograd, winograd_dot
from search.templates.bf16 import is_bf16, stores_bf16
from search.templates.common import (
    by_closeness,
    by_padded_work,
    divisors,
    epilogue_compute,
    finish,
    knob_product,
    padded,
    reg_tile_default,
    relayout_params,
    resolve_knobs,
    unit,
    vectorize_tile,
)
from search.templates.int8 import is_int8
from search.templates.workloads import Conv2DWorkload, KernelSpec, Knobs

OC_BLOCKS = (16, 32, 8, 64, 4)  # oc_bn choices for NCHW / NHWC outputs, best guess first
MAX_REG_N = 32
REG_N_CHOICES = 5
MIN_REG_N = 4  # a width whose best divisor tile is shorter gets padded tiles first
MAX_PADDED_REG_N = 14
PER_ROW, SEPARATE, ON_READ = 1, 0, 2  # where a prologue is computed (knob ``prologue``)
PROLOGUES = (PER_ROW, SEPARATE, ON_READ)


def supported_layouts(workload: Conv2DWorkload) -> list[tuple[str, str]]:
    """Every pair of NCHW, NHWC and NCHW{c}c (c dividing the channels), input-major, then the pairs whose bf16
    kernels read or write bf16 values (``search.templates.conv2d_dot.stored_pairs``); none for grouped convs."""
    if workload.groups != 1:
        return []
    ins = candidate_layouts(workload.in_channels)
    outs = candidate_layouts(workload.out_channels)
    return [(i, o) for i in ins for o in outs] + conv2d_dot.stored_pairs(workload.in_channels, workload.out_channels)


def _resolved(spec: KernelSpec) -> KernelSpec:
    """``spec``, with the first bf16 setting where it reads or writes bf16 values and has no knobs (its default)."""
    if spec.knobs or not stores_bf16(spec):
        return spec
    return replace(spec, knobs=conv2d_dot.knob_space(spec)[0])


def _vectors(block: int) -> int:
    return -(-block // unit().lanes)


def _lane_use(channels: int, block: int) -> Fraction:
    """Share of the vector lanes doing real work when ``channels`` are computed in blocks of ``block``."""
    return Fraction(channels, padded(channels, block) // block * _vectors(block) * unit().lanes)


def _oc_blocks(channels: int) -> list[int]:
    """oc_bn choices of an NCHW / NHWC output: the blocks dividing ``channels`` if the first fills the vector lanes,
    otherwise every block by lane use (the channels padded up to a multiple of it), then by padded channels."""
    dividing = [b for b in OC_BLOCKS if channels % b == 0]
    if dividing and _lane_use(channels, dividing[0]) == 1:
        return dividing
    return sorted(OC_BLOCKS, key=lambda b: (-_lane_use(channels, b), padded(channels, b)))


def _reg_tiles(width: int, vectors: int) -> list[int]:
    """reg_n choices: divisors of ``width``, the default tile first and the rest by closeness to it. When the
    default is shorter than MIN_REG_N (a prime-ish width such as 17 or 71), padded tiles come first, ranked by the
    columns they compute plus one column of overhead per tile: ``padded width x (tile + 1) / tile``."""
    default = reg_tile_default(width, vectors)
    tiles = by_closeness(divisors(width, MAX_REG_N), default)
    if default < MIN_REG_N < width:
        fits = [t for t in range(MAX_PADDED_REG_N, MIN_REG_N - 1, -1) if t * vectors <= unit().accumulators]
        tiles = by_padded_work(width, fits) + tiles
    return tiles[:REG_N_CHOICES]


def _choices(spec: KernelSpec) -> dict[str, list[int]]:
    wl = spec.workload
    choices: dict[str, list[int]] = {}
    if layout(spec.out_layout).block() is None:
        choices["oc_bn"] = _oc_blocks(wl.out_channels)
    ob = choices["oc_bn"][0] if "oc_bn" in choices else layout(spec.out_layout).block()
    choices["reg_n"] = _reg_tiles(wl.out_width, _vectors(ob))
    if wl.kernel[1] > 1:
        choices["unroll_kw"] = [1, 0]
    if spec.epilogue.reads_through:
        choices["prologue"] = list(PROLOGUES)
    else:  # a prologue's placement decides the loop order itself
        choices["rows"] = [0, 1]
    return choices


def _without_default_rows(knobs: Knobs) -> Knobs:
    return tuple(item for item in knobs if item != ("rows", 0))


def knob_space(spec: KernelSpec, size: int | None = None) -> list[Knobs]:
    """The direct convolution's settings, the default first; where Winograd applies, its settings second and fourth
    (``search.templates.winograd.knob_space`` order), so that a space of two settings per layout pair already holds
    the algorithm choice; with a prologue, the default's other placements second and third; the bf16 and int8
    settings last, bf16 Winograd's after the direct ones (``search.candidates.node_candidates`` places them by the
    precision searched). Layouts of bf16 values: the bf16 settings alone."""
    if stores_bf16(spec):
        return [*conv2d_dot.knob_space(spec), *winograd_dot.knob_space(spec)][:size]
    space = [_without_default_rows(knobs) for knobs in knob_product(_choices(spec), None)]
    block = layout(spec.out_layout).block()
    fits = [k for k in space if dict(k)["reg_n"] * _vectors(dict(k).get("oc_bn", block)) <= unit().accumulators]
    if spec.epilogue.reads_through:  # every placement right after the default: three settings already hold the choice
        firsts = [next(k for k in fits if dict(k)["prologue"] == where) for where in PROLOGUES]
        fits = firsts + [k for k in fits if k not in firsts]
    fast = winograd.knob_space(spec)
    merged = [*fits[:1], *fast[:1], *fits[1:2], *fast[1:], *fits[2:], *conv2d_dot.knob_space(spec),
              *winograd_dot.knob_space(spec)]
    return merged if size is None else merged[: max(size, 0)]


def _blocks(spec: KernelSpec) -> tuple[int, int, dict[str, int]]:
    knobs = resolve_knobs(spec.knobs, _choices(spec))
    wl = spec.workload
    ib = view_block(spec.in_layout, wl.in_channels)
    ob = knobs["oc_bn"] if "oc_bn" in knobs else view_block(spec.out_layout, wl.out_channels)
    return ib, ob, knobs


def pack_weight(spec: KernelSpec, weight: np.ndarray) -> np.ndarray:
    """OIHW -> ``(O' // ob, I // ib, kh, kw, ib, ob)``, O' the output channels zero-padded to a multiple of ob (a
    Winograd setting: ``search.templates.winograd.pack_weight``; a bf16 one: ``search.templates.conv2d_dot``'s or
    ``search.templates.winograd_dot``'s)."""
    spec = _resolved(spec)
    if winograd_dot.is_bf16_winograd(spec.knobs):
        return winograd_dot.pack_weight(spec, weight)
    if winograd.is_winograd(spec.knobs):
        return winograd.pack_weight(spec, weight)
    if is_bf16(spec.knobs):
        return conv2d_dot.pack_weight(spec, weight)
    ib, ob, _ = _blocks(spec)
    o, i, kh, kw = weight.shape
    zeros = np.pad(weight, ((0, padded(o, ob) - o), (0, 0), (0, 0), (0, 0)))
    packed = zeros.reshape(-1, ob, i // ib, ib, kh, kw).transpose(0, 2, 4, 5, 3, 1)
    return np.ascontiguousarray(packed, dtype=spec.workload.dtype)


def build(spec: KernelSpec, target: tvm.target.Target) -> tvm.tirx.PrimFunc:
    spec = _resolved(spec)
    if winograd_dot.is_bf16_winograd(spec.knobs):
        return winograd_dot.build(spec, target)
    if winograd.is_winograd(spec.knobs):
        if not winograd.supports(spec):
            raise SearchError(f"no Winograd kernel for {spec}")
        return winograd.build(spec, target)
    if is_bf16(spec.knobs) or is_int8(spec.knobs):
        return conv2d_dot.build(spec, target)
    ib, ob, knobs = _blocks(spec)
    wl = spec.workload
    n, c, h, w = wl.in_shape
    kh, kw = wl.kernel
    channels, width = padded(wl.out_channels, ob), padded(wl.out_width, knobs["reg_n"])
    top, left, bottom, right = wl.padding
    padding = (top, left, bottom, right + (width - wl.out_width) * wl.strides[1])  # the extra columns read zeros
    data = te.placeholder((n, c // ib, h, w, ib), wl.dtype, name="data")
    weight = te.placeholder((channels // ob, c // ib, kh, kw, ib, ob), wl.dtype, name="weight")
    if spec.epilogue.gate:
        read, prologue = _gate(data, ib)
    else:
        read, prologue = _prologue(data, ib) if spec.epilogue.prologue else (data, [])
    with target:
        acc = topi.nn.conv2d_NCHWc(read, weight, wl.strides, padding, wl.dilation, f"NCHW{ib}c", f"NCHW{ob}c", wl.dtype)
    # Padded channels cannot be cropped in the blocked view: such an "out" is indexed in logical NCHW instead.
    logical = channels != wl.out_channels
    if logical:
        out, extra = epilogue_compute(acc, spec.epilogue, wl.out_channels, lambda nn, k, hh, ww: k, wl.out_shape,
                                      lambda nn, k, hh, ww: (nn, k // ob, hh, ww, k % ob))
    else:
        cropped = None if width == wl.out_width else (n, channels // ob, wl.out_height, wl.out_width, ob)
        out, extra = epilogue_compute(acc, spec.epilogue, wl.out_channels, lambda nn, cb, hh, ww, ci: cb * ob + ci,
                                      cropped)
    bias, others = extra[: int(spec.epilogue.bias)], extra[int(spec.epilogue.bias):]
    sch = tvm.s_tir.Schedule(te.create_prim_func([data, weight, *bias, *prologue, *others, out]))
    has_pad = any(padding)
    view = None if logical else ob
    reader = "prologue" if prologue else "data_pad" if has_pad else "conv2d_NCHWc"
    reads = [(reader, "read", 0, spec.in_layout, ib)]
    if spec.epilogue.gate:
        reads.append(("prologue", "read", 1, spec.in_layout, ib))
    if spec.epilogue.residual:
        reads.append(("out", "read", 2 if spec.epilogue.bias else 1, spec.out_layout, view))
    relayout_params(sch, [*reads, ("out", "write", 0, spec.out_layout, view)])
    _schedule(sch, ib, knobs, has_pad, nchw_out=spec.out_layout == "NCHW", logical=logical)
    if prologue:
        _schedule_prologue(sch, ib, knobs["prologue"])
    return finish(sch)


def _prologue(data: te.Tensor, ib: int) -> tuple[te.Tensor, list[te.Tensor]]:
    """``relu(data * scale + shift)`` on the blocked view, and its (C,) parameters ``scale`` and ``shift``."""
    channels = data.shape[1] * ib
    scale = te.placeholder((channels,), data.dtype, name="scale")
    shift = te.placeholder((channels,), data.dtype, name="shift")
    zero = tvm.tirx.const(0, data.dtype)
    read = te.compute(data.shape, lambda n, cb, h, w, ci: te.max(
        data[n, cb, h, w, ci] * scale[cb * ib + ci] + shift[cb * ib + ci], zero), name="prologue")
    return read, [scale, shift]


def _gate(data: te.Tensor, ib: int) -> tuple[te.Tensor, list[te.Tensor]]:
    """``data * gate`` on the blocked view, and the gate, an activation of one value per image and channel."""
    n, blocks = data.shape[0], data.shape[1]
    gate = te.placeholder((n, blocks, 1, 1, ib), data.dtype, name="gate")
    read = te.compute(data.shape, lambda n, cb, h, w, ci: data[n, cb, h, w, ci] * gate[n, cb, 0, 0, ci],
                      name="prologue")
    return read, [gate]


def _schedule_prologue(sch: tvm.s_tir.Schedule, ib: int, where: int) -> None:
    block = sch.get_sblock("prologue")
    if where == ON_READ:
        sch.compute_inline(block)
        return
    if where == PER_ROW:
        sch.compute_at(block, sch.get_loops(sch.get_sblock("out"))[0])
        loops = sch.get_loops(block)[1:]  # (cb, h, w, ci) below the parallel rows
    else:
        n, cb, h, w, ci = sch.get_loops(block)
        sch.parallel(sch.fuse(n, cb, h))
        loops = [w, ci]
    loops = [loop for loop in loops if int(sch.get(loop).extent) > 1]
    if loops:  # the innermost: the channel block, or NCHW's width (its block of 1 gone)
        inner = loops[-1]
        if ib > unit().lanes and ib % unit().lanes == 0:
            inner = sch.split(inner, [None, unit().lanes])[1]
        sch.vectorize(inner)


def _schedule(
    sch: tvm.s_tir.Schedule, ib: int, knobs: dict[str, int], has_pad: bool, nchw_out: bool, logical: bool
) -> None:
    conv = sch.get_sblock("conv2d_NCHWc")
    n, occ, oh, ow, ocb, ic, kh, kw = sch.get_loops(conv)
    owo, owi = sch.split(ow, [None, knobs["reg_n"]])
    ico, ici = sch.split(ic, [None, ib])
    rows = knobs.get("prologue") == PER_ROW or knobs.get("rows") == 1  # each row: all its output channel blocks
    sch.reorder(*((n, oh, occ) if rows else (n, occ, oh)), owo, ico, kh, kw, ici, owi, ocb)
    out = sch.get_sblock("out")
    sch.reverse_compute_at(out, owo)  # a cropped write-back gets a predicate
    tile = sch.get_loops(out)[4:]  # below n, occ, oh, owo; a loop of extent 1 is elided
    if logical and len(tile) == 2:  # (channels, width): make it (width, channels) like the blocked view's
        sch.reorder(*reversed(tile))
    sch.parallel(sch.fuse(n, oh) if rows else sch.fuse(n, occ, oh))
    sch.vectorize(ocb)
    sch.unroll(owi)
    if knobs.get("unroll_kw"):
        sch.unroll(kw)
    init = sch.decompose_reduction(conv, ico)
    depth = 3 if rows else 2  # the tiles are below the parallel loop, (the channel blocks,) the width tiles
    vectorize_tile(sch, init, depth=depth)
    vectorize_tile(sch, out, depth=depth, width_last=nchw_out)  # NCHW stores are contiguous along w
    if has_pad:
        sch.compute_inline(sch.get_sblock("data_pad"))
