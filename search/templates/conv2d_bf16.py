"""bfloat16 2-D convolution (groups 1): bf16 data and weights, fp32 accumulation, for any pair of NCHW, NHWC and
NCHW{c}c layouts; the settings of ``search.precision``'s ``bf16`` knob.

Two stages (``search.templates.bf16``):

- ``pack``: the fp32 input, read in its layout, rounded to bf16 (to nearest, ties to even) into a zero-padded copy
  in blocks of 32 channels (the channels padded to a multiple of 32);
- ``out``: the convolution, one block of 16 output channels of a run of output pixels per call of a C++
  micro-kernel (``search.microkernels``: AMX tiles with knob value ``AMX``, AVX-512 BF16 dot products with ``DOT``),
  the calls run in parallel; each writes its fp32 pixels into a scratch buffer of its own, from which the fused
  epilogue (bias, residual, activation) writes them, still in cache, in the output layout. A stride-1 convolution
  runs the output rows as one run of pixels (``y * padded width + x``; the pixels of the padding columns are
  computed and dropped), in chunks of ``CHUNK``; any other, one output row per call, or ``GROUPS`` of them where a
  row has at most 16 pixels (a tile's rows). ``pack`` may make a convolution of stride 1 (``_packing``): a strided
  1x1 one without padding packs only the pixels it reads; a row of taps that fits one block with the channels (a
  stem's 7 taps of 3 channels, each padded to 4) is folded into the channels, from a zero-padded copy of the input.

The weights are converted once, when packed (``pack_weight``). A prologue the data is read through (a
pre-activation ``relu(data * scale + shift)`` or a gate ``data * gate``, ``search.templates.conv2d``) is applied in
``pack``, to each value before it is rounded; the zero padding stays zero, as it is applied after the prologue.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import tvm
from tvm import te

from search.errors import SearchError
from search.layouts import layout, view_block
from search.precision import STORAGE, bf16_settings
from search.templates.bf16 import (
    BLOCK,
    CHUNK,
    FUNCTIONS,
    LANES,
    ROWS_FUNCTIONS,
    instruction_unit,
    pack_weights,
    packed,
    row_calls,
    schedule_pass,
)
from search.templates.common import finish, padded, relayout_params
from search.templates.workloads import KernelSpec, Knobs

GROUPS = 4  # output rows of at most LANES pixels per call: the AMX micro-kernel's accumulator tiles


def supports(spec: KernelSpec) -> bool:
    """Groups 1."""
    return spec.workload.groups == 1


def knob_space(spec: KernelSpec) -> list[Knobs]:
    """The bf16 settings this host runs (``search.precision.bf16_settings``) where the kernel applies."""
    return bf16_settings() if supports(spec) else []


def _check(spec: KernelSpec) -> None:
    instruction_unit(spec)
    if not supports(spec):
        raise SearchError(f"no bf16 kernel for {spec}: it needs groups 1")


@dataclass(frozen=True)
class _Packing:
    """How ``pack`` lays the input out for the micro-kernel: ``rows`` x ``cols`` pixels of ``channels`` channels
    (before padding to blocks), convolved with ``kernel``, ``strides`` and ``dilation``; ``source(y, x, k)`` is the
    input pixel (row, column, channel) that packed pixel (y, x) holds in channel k, read where all are in range and
    ``k < channels``, zero elsewhere. Taps folded into the channels (``group`` > 0) are packed from a zero-padded copy
    of the input, pixel by pixel with ``group`` channels (``_folded``), tap ``k // group`` and channel ``k % group``
    in channel k."""

    rows: int
    cols: int
    channels: int
    kernel: tuple[int, int]
    strides: tuple[int, int]
    dilation: tuple[int, int]
    source: Callable[..., tuple] | None = None
    group: int = 0


def _packing(spec: KernelSpec) -> _Packing:
    """Direct: the zero-padded input. A 1x1 convolution without padding: only the pixels it reads (then of stride 1).
    A row of taps that fits one block with the channels (``kw x channels <= BLOCK``, as a stem's 3 channels): the taps
    folded into the channels, each packed pixel holding the ``kw`` input pixels its output pixel reads (then a
    ``kh x 1`` convolution of horizontal stride 1), each in a group of channels padded to a power of two where that
    fits (a stem's 7 taps of 3 channels in 7 x 4: the 28 values of a packed pixel lie side by side in the copy)."""
    wl = spec.workload
    _, c, h, w = wl.in_shape
    (kh, kw), (sh, sw), (dh, dw) = wl.kernel, wl.strides, wl.dilation
    top, left, bottom, right = wl.padding
    if (kh, kw) == (1, 1) and not any(wl.padding):
        return _Packing(wl.out_height, wl.out_width, c, (1, 1), (1, 1), (1, 1), lambda y, x, k: (y * sh, x * sw, k))
    if kw > 1 and c * kw <= BLOCK:
        group = 1 << (c - 1).bit_length()
        group = group if kw * group <= BLOCK else c
        return _Packing(h + top + bottom, wl.out_width, group * kw, (kh, 1), (sh, 1), (dh, 1), group=group)
    return _Packing(h + top + bottom, w + left + right, c, (kh, kw), (sh, sw), (dh, dw),
                    lambda y, x, k: (y - top, x - left, k))


def pack_weight(spec: KernelSpec, weight: np.ndarray) -> np.ndarray:
    """OIHW -> ``search.templates.bf16.pack_weights`` (taps folded into the channels: OIHW -> O (W I') H 1, the
    channels I zero-padded to the packing's group I')."""
    _check(spec)
    o, c, kh, kw = weight.shape
    group = _packing(spec).group
    if group:
        grouped = np.zeros((o, group, kh, kw), weight.dtype)
        grouped[:, :c] = weight
        weight = grouped.transpose(0, 3, 1, 2).reshape(o, kw * group, kh, 1)
    return pack_weights(weight)


def _folded(spec: KernelSpec, packing: _Packing, read: Callable[..., tvm.tirx.PrimExpr]) -> te.Tensor:
    """The packed input of folded taps: first ``fold``, the input rounded to bf16 with its zero padding, ``group``
    channels per pixel (wide enough for every read of the padded taps); then ``pack``, packed pixel (y, x) holding
    in channel k the fold's pixel (y, x * stride + k // group * dilation), channel k % group (zero for k past the
    taps)."""
    wl = spec.workload
    n, c, h, w = wl.in_shape
    kw, sw, dw, group = wl.kernel[1], wl.strides[1], wl.dilation[1], packing.group
    top, left, bottom, right = wl.padding
    width = max(w + left + right, (packing.cols - 1) * sw + (BLOCK - 1) // group * dw + 1)  # k up to BLOCK - 1

    def fold(nn, yy, xx, cc):
        y, x = yy - top, xx - left
        inside = tvm.tirx.all(y >= 0, y < h, x >= 0, x < w, cc < c)
        y, x = (tvm.tirx.min(tvm.tirx.max(value, 0), extent - 1) for value, extent in ((y, h), (x, w)))
        return read(nn, y, x, tvm.tirx.min(cc, c - 1)), inside

    folded = packed((n, h + top + bottom, width, group), fold, "fold")
    zero = tvm.tirx.const(0, STORAGE)
    return te.compute((n, 1, packing.rows, packing.cols, BLOCK), lambda nn, _, y, x, k: tvm.tirx.if_then_else(
        k < kw * group, folded[nn, y, x * sw + k // group * dw, k % group], zero), name="pack")


def build(spec: KernelSpec, target: tvm.target.Target) -> tvm.tirx.PrimFunc:
    _check(spec)
    wl = spec.workload
    n, c, h, w = wl.in_shape
    packing = _packing(spec)
    rows, cols, (kh, kw), (sh, sw), (dh, dw) = (packing.rows, packing.cols, packing.kernel, packing.strides,
                                                packing.dilation)
    ib = view_block(spec.in_layout, c)
    blocks, out_blocks = padded(packing.channels, BLOCK) // BLOCK, padded(wl.out_channels, LANES) // LANES
    oh, ow = wl.out_height, wl.out_width
    flat = (sh, sw) == (1, 1)  # output row y, column x at y * cols + x: its pixels in one run per call
    data = te.placeholder((n, c // ib, h, w, ib), wl.dtype, name="data")
    weight = te.placeholder((out_blocks, blocks, kh, kw, BLOCK // 2, LANES, 2), STORAGE, name="weight")
    read, prologue = _prologue(spec, data, ib)

    def pack(nn, cb, hh, ww, ci):
        y, x, channel = packing.source(hh, ww, cb * BLOCK + ci)
        inside = tvm.tirx.all(y >= 0, y < h, x >= 0, x < w, cb * BLOCK + ci < packing.channels)
        y, x = (tvm.tirx.min(tvm.tirx.max(value, 0), extent - 1) for value, extent in ((y, h), (x, w)))
        return read(nn, y, x, tvm.tirx.min(channel, c - 1)), inside

    packed_data = (_folded(spec, packing, read) if packing.group else
                   packed((n, blocks, rows, cols, BLOCK), pack, "pack"))
    weights = blocks * kh * kw * BLOCK * LANES
    if flat:  # one run of the (oh - 1) * cols + ow pixels per block of output channels, in chunks
        run = (oh - 1) * cols + ow  # the columns past ow are computed and dropped
        chunks, pixels = -(-run // CHUNK), CHUNK
        calls, runs = n * out_blocks * chunks, ()

        # a thread's calls cycle through the smaller operand: all the weights once per chunk of the input (a chunk's
        # calls, one per block of output channels, follow each other) where they are smaller than an image's input,
        # else the whole input once per block (a block's calls follow each other)
        inner = out_blocks * weights < blocks * rows * cols * BLOCK

        def split(call):  # (image, chunk, block of output channels)
            if inner:
                return call // out_blocks // chunks, call // out_blocks % chunks, call % out_blocks
            return call // chunks // out_blocks, call % chunks, call // chunks % out_blocks

        def offsets(call):
            image, chunk, ob = split(call)
            return (image * blocks * rows * cols + chunk * CHUNK) * BLOCK, ob * weights

        def width(call):
            return tvm.tirx.min(CHUNK, run - split(call)[1] * CHUNK)

        def block(call):
            return split(call)[2]

        def place(call, pixel, channel):
            image, chunk, _ = split(call)
            at = chunk * CHUNK + pixel
            return (at % cols < ow) if cols > ow else None, (image, channel, at // cols, at % cols)
    else:  # whole output rows per call: one, or up to GROUPS of at most LANES pixels (one tile each)
        per = GROUPS if ow <= LANES else 1
        steps = -(-oh // per)
        runs = (sh * cols * BLOCK, ow) if per > 1 else ()  # the rows micro-kernel's run step and width
        calls, pixels = n * out_blocks * steps, per * ow

        def offsets(call):
            image, y = call // (out_blocks * steps), call % steps * per
            return (image * blocks * rows + y * sh) * cols * BLOCK, block(call) * weights

        def width(call):
            return tvm.tirx.min(per, oh - call % steps * per) * ow if oh % per else per * ow

        def block(call):
            return call // steps % out_blocks

        def place(call, pixel, channel):
            return None, (call // (out_blocks * steps), channel, call % steps * per + pixel // ow, pixel % ow)

    out, extra = row_calls(packed_data, weight, spec, spec.out_layout, wl.out_shape, calls, offsets,
                           lambda call: (blocks, cols * BLOCK, rows * cols * BLOCK, kh, kw, sw, dh, dw, *runs,
                                         width(call)), pixels, block, place,
                           functions=ROWS_FUNCTIONS if runs else FUNCTIONS)
    bias, residual = extra[: int(spec.epilogue.bias)], extra[int(spec.epilogue.bias):]
    sch = tvm.s_tir.Schedule(te.create_prim_func([data, weight, *bias, *prologue, *residual, out]))
    relayout_params(sch, [("fold" if packing.group else "pack", "read", 0, spec.in_layout, ib)])
    if packing.group:
        schedule_pass(sch, "fold", 3)
    schedule_pass(sch, "pack", 3)
    return finish(sch)


def _prologue(spec: KernelSpec, data: te.Tensor, ib: int) -> tuple[Callable[..., tvm.tirx.PrimExpr], list[te.Tensor]]:
    """``read(image, y, x, channel)``, the input value the convolution sees (through the spec's pre-activation
    ``relu(data * scale + shift)`` or gate ``data * gate``, if it has one), and the prologue's parameters: ``scale``
    and ``shift`` (C,), or the gate, one value per image and channel stored in the input layout."""
    n, c = spec.workload.in_shape[:2]

    def value(nn, y, x, channel):
        return data[nn, channel // ib, y, x, channel % ib]

    if spec.epilogue.prologue:
        scale, shift = (te.placeholder((c,), data.dtype, name=name) for name in ("scale", "shift"))
        zero = tvm.tirx.const(0, data.dtype)
        return (lambda nn, y, x, channel: te.max(value(nn, y, x, channel) * scale[channel] + shift[channel], zero),
                [scale, shift])
    if spec.epilogue.gate:
        stored = layout(spec.in_layout)
        gate = te.placeholder(stored.physical_shape((n, c, 1, 1)), data.dtype, name="gate")
        at = stored.stored_coordinates()
        return lambda nn, y, x, channel: value(nn, y, x, channel) * gate[tuple(at(nn, channel, 0, 0))], [gate]
    return value, []
