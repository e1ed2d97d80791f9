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
  computed and dropped), in chunks of ``CHUNK``; any other, one output row per call. ``pack`` may make a
  convolution of stride 1 (``_packing``): a strided 1x1 one without padding packs only the pixels it reads; a row of
  taps that fits one block with the channels (a stem's 7 x 3) is folded into the channels.

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
    LANES,
    instruction_unit,
    pack_weights,
    packed,
    row_calls,
    schedule_pass,
)
from search.templates.common import finish, padded, relayout_params
from search.templates.workloads import KernelSpec, Knobs


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
    ``k < channels``, zero elsewhere."""

    rows: int
    cols: int
    channels: int
    kernel: tuple[int, int]
    strides: tuple[int, int]
    dilation: tuple[int, int]
    source: Callable[..., tuple]


def _packing(spec: KernelSpec) -> _Packing:
    """Direct: the zero-padded input. A 1x1 convolution without padding: only the pixels it reads (then of stride 1).
    A row of taps that fits one block with the channels (``kw x channels <= BLOCK``, as a stem's 3 channels): the taps
    folded into the channels, each packed pixel holding the ``kw`` input pixels its output pixel reads (then a
    ``kh x 1`` convolution of horizontal stride 1)."""
    wl = spec.workload
    _, c, h, w = wl.in_shape
    (kh, kw), (sh, sw), (dh, dw) = wl.kernel, wl.strides, wl.dilation
    top, left, bottom, right = wl.padding
    if (kh, kw) == (1, 1) and not any(wl.padding):
        return _Packing(wl.out_height, wl.out_width, c, (1, 1), (1, 1), (1, 1), lambda y, x, k: (y * sh, x * sw, k))
    if kw > 1 and c * kw <= BLOCK:
        return _Packing(h + top + bottom, wl.out_width, c * kw, (kh, 1), (sh, 1), (dh, 1),
                        lambda y, x, k: (y - top, x * sw + k // c * dw - left, k % c))
    return _Packing(h + top + bottom, w + left + right, c, (kh, kw), (sh, sw), (dh, dw),
                    lambda y, x, k: (y - top, x - left, k))


def pack_weight(spec: KernelSpec, weight: np.ndarray) -> np.ndarray:
    """OIHW -> ``search.templates.bf16.pack_weights`` (taps folded into the channels: OIHW -> O (W I) H 1)."""
    _check(spec)
    o, c, kh, kw = weight.shape
    if _packing(spec).kernel != (kh, kw):
        weight = weight.transpose(0, 3, 1, 2).reshape(o, kw * c, kh, 1)
    return pack_weights(weight)


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

    packed_data = packed((n, blocks, rows, cols, BLOCK), pack, "pack")
    weights = blocks * kh * kw * BLOCK * LANES
    if flat:  # one run of the (oh - 1) * cols + ow pixels per block of output channels, in chunks
        run = (oh - 1) * cols + ow  # the columns past ow are computed and dropped
        chunks, pixels = -(-run // CHUNK), CHUNK
        calls = n * out_blocks * chunks

        def offsets(call):
            matrix, first = call // chunks, call % chunks * CHUNK  # matrix: (image, block of output channels)
            return (matrix // out_blocks * blocks * rows * cols + first) * BLOCK, matrix % out_blocks * weights

        def width(call):
            return tvm.tirx.min(CHUNK, run - call % chunks * CHUNK)

        def block(call):
            return call // chunks % out_blocks

        def place(call, pixel, channel):
            at = call % chunks * CHUNK + pixel
            return (at % cols < ow) if cols > ow else None, (call // chunks // out_blocks, channel, at // cols,
                                                              at % cols)
    else:  # one output row per call
        calls, pixels = n * out_blocks * oh, ow

        def offsets(row):
            image, y = row // (out_blocks * oh), row % oh
            return (image * blocks * rows + y * sh) * cols * BLOCK, block(row) * weights

        def width(row):
            return ow

        def block(row):
            return row // oh % out_blocks

        def place(row, pixel, channel):
            return None, (row // (out_blocks * oh), channel, row % oh, pixel)

    out, extra = row_calls(packed_data, weight, spec, spec.out_layout, wl.out_shape, calls, offsets,
                                 lambda call: (blocks, cols * BLOCK, rows * cols * BLOCK, kh, kw, sw, dh, dw,
                                               width(call)), pixels, block, place)
    bias, residual = extra[: int(spec.epilogue.bias)], extra[int(spec.epilogue.bias):]
    sch = tvm.s_tir.Schedule(te.create_prim_func([data, weight, *bias, *prologue, *residual, out]))
    relayout_params(sch, [("pack", "read", 0, spec.in_layout, ib)])
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
