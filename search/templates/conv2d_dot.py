"""2-D convolution (groups 1) on the dot-product micro-kernels (``search.templates.dot``), for any pair of NCHW, NHWC
and NCHW{c}c layouts: in bfloat16 (bf16 data and weights, fp32 sums: the settings of ``search.precision``'s ``bf16``
knob) or in int8 (unsigned 8-bit data, signed 8-bit weights, int32 sums: knob ``int8``, ``search.templates.int8``).

Two stages:

- ``pack``: the fp32 input, read in its layout, converted (bf16: rounded to nearest even; int8: quantised with the
  kernel's ``quant``) into a padded copy in blocks of 64 bytes of channels (32 bf16 or 64 int8; the channels padded to
  whole blocks), the padding a zero of the input (int8: the quantisation's zero); an input of bf16 values (a layout
  of ``bf16`` storage, ``search.layouts``) is copied as it is (widened to fp32 for a prologue, then rounded);
- ``out``: the convolution, one block of 16 output channels of a run of output pixels per call of a C++ micro-kernel
  (``search.microkernels``: AMX tiles with knob value ``AMX``, AVX-512 dot products with ``DOT``), the calls run in
  parallel; each writes its sums into a scratch buffer of its own, from which the fused epilogue (int8: the sums scaled
  per channel; bias, residual, activation) writes them, still in cache, in the output layout (rounded to bf16 where it
  stores bf16 values; a residual of bf16 values widened). A stride-1 convolution runs the output rows as one run of
  pixels (``y * padded width + x``; the pixels of the padding columns are computed and dropped), in chunks of ``CHUNK``;
  any other, one output row per call, or ``GROUPS`` of them where a row has at most 16 pixels (a tile's rows). ``pack``
  may make a convolution of stride 1 (``_packing``): a strided 1x1 one without padding packs only the pixels it reads; a
  row of taps that fits one block with the channels (a stem's 7 taps of 3 channels, each padded to 4) is folded into the
  channels, from a padded copy of the input.

The weights are converted once, when packed (``pack_weight``; int8: ``pack_int8``, with the kernel's per-channel
scale, bias and ``quant``). A bf16 kernel's prologue (a pre-activation ``relu(data * scale + shift)`` or a gate
``data * gate``, ``search.templates.conv2d``) is applied in ``pack``, to each value before it is rounded; the zero
padding stays zero, as it is applied after the prologue. int8 kernels have no prologue.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import tvm
from tvm import te

from search.bf16_bits import STORAGE
from search.errors import SearchError
from search.layouts import BF16 as BF16_STORED
from search.layouts import layout, storage_of, view_block
from search.precision import bf16_settings, int8_settings
from search.templates import int8
from search.templates.bf16 import BF16, bf16_layout, stores_bf16, to_bf16_bits
from search.templates.common import finish, padded, relayout_params, rounded, widened
from search.templates.dot import CHUNK, LANES, DotProduct, blocked_weights, packed, row_calls, schedule_pass
from search.templates.workloads import KernelSpec, Knobs

GROUPS = 4  # output rows of at most LANES pixels per call: the AMX micro-kernel's accumulator tiles
FP32_SIDE = "NCHW16c"  # the fp32 layout beside a side of bf16 values: the output's blocks of LANES channels


def bf16_values(channels: int) -> str | None:
    """The layout of bf16 values of ``channels`` channels the convolutions read and write (``bf16_layout``):
    ``NCHW32c.bf16`` (a 1x1 convolution reads it as its packed input) or ``NCHW16c.bf16``; None otherwise."""
    return bf16_layout("NCHW", channels)


def stored_pairs(in_channels: int, out_channels: int) -> list[tuple[str, str]]:
    """The layout pairs with bf16 values on one side or both, where this host has bf16 kernels: each side
    ``NCHW16c`` or its layout of bf16 values (``bf16_values``) where it has one, else NCHW (fp32)."""
    if not bf16_settings():
        return []
    sides = [[FP32_SIDE, values] if (values := bf16_values(channels)) else ["NCHW"]
             for channels in (in_channels, out_channels)]
    return [(i, o) for i in sides[0] for o in sides[1] if BF16_STORED in (storage_of(i), storage_of(o))]


def supports(spec: KernelSpec) -> bool:
    """Groups 1 (int8: no prologue and fp32 values in and out)."""
    return spec.workload.groups == 1 and not (int8.is_int8(spec.knobs) and (spec.epilogue.reads_through
                                                                            or stores_bf16(spec)))


def knob_space(spec: KernelSpec) -> list[Knobs]:
    """The bf16 settings, then the int8 ones, that this host runs (``search.precision``) where the kernel applies."""
    return [knobs for knobs in bf16_settings() + int8_settings() if supports(dataclasses.replace(spec, knobs=knobs))]


def _product(spec: KernelSpec) -> DotProduct:
    """The spec's precision; SearchError unless its knobs select one and the kernel applies."""
    product = int8.INT8 if int8.is_int8(spec.knobs) else BF16
    product.unit(spec)
    if not supports(spec):
        raise SearchError(f"no {product.knob} kernel for {spec}: it needs groups 1"
                          + (" and no prologue, fp32 in and out" if product is int8.INT8 else ""))
    return product


@dataclass(frozen=True)
class _Packing:
    """How ``pack`` lays the input out for the micro-kernel: ``rows`` x ``cols`` pixels of ``channels`` channels
    (before padding to blocks), convolved with ``kernel``, ``strides`` and ``dilation``; ``source(y, x, k)`` is the
    input pixel (row, column, channel) that packed pixel (y, x) holds in channel k, read where all are in range and
    ``k < channels``, padding elsewhere. Taps folded into the channels (``group`` > 0) are packed from a padded copy
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


def _packing(spec: KernelSpec, block: int) -> _Packing:
    """Direct: the padded input. A 1x1 convolution without padding: only the pixels it reads (then of stride 1).
    A row of taps that fits one ``block`` of channels with the channels (``kw x channels <= block``, as a stem's 3
    channels): the taps folded into the channels, each packed pixel holding the ``kw`` input pixels its output pixel
    reads (then a ``kh x 1`` convolution of horizontal stride 1), each in a group of channels padded to a power of two
    where that fits (a stem's 7 taps of 3 channels in 7 x 4: the 28 values of a packed pixel lie side by side in the
    copy)."""
    wl = spec.workload
    _, c, h, w = wl.in_shape
    (kh, kw), (sh, sw), (dh, dw) = wl.kernel, wl.strides, wl.dilation
    top, left, bottom, right = wl.padding
    if (kh, kw) == (1, 1) and not any(wl.padding):
        return _Packing(wl.out_height, wl.out_width, c, (1, 1), (1, 1), (1, 1), lambda y, x, k: (y * sh, x * sw, k))
    if kw > 1 and c * kw <= block:
        group = 1 << (c - 1).bit_length()
        group = group if kw * group <= block else c
        return _Packing(h + top + bottom, wl.out_width, group * kw, (kh, 1), (sh, 1), (dh, 1), group=group)
    return _Packing(h + top + bottom, w + left + right, c, (kh, kw), (sh, sw), (dh, dw),
                    lambda y, x, k: (y - top, x - left, k))


def _blocked(spec: KernelSpec, product: DotProduct, weight: np.ndarray) -> np.ndarray:
    """OIHW -> ``search.templates.dot.blocked_weights`` (taps folded into the channels: OIHW -> O (W I') H 1, the
    channels I zero-padded to the packing's group I'), the dtype kept."""
    o, c, kh, kw = weight.shape
    group = _packing(spec, product.block).group
    if group:
        grouped = np.zeros((o, group, kh, kw), weight.dtype)
        grouped[:, :c] = weight
        weight = grouped.transpose(0, 3, 1, 2).reshape(o, kw * group, kh, 1)
    return blocked_weights(weight, product)


def pack_weight(spec: KernelSpec, weight: np.ndarray) -> np.ndarray:
    """A bf16 kernel's weights: OIHW fp32 -> its blocks (``_blocked``) as bf16 bits."""
    if _product(spec) is not BF16:
        raise SearchError(f"{spec.knobs} is no bf16 setting: an int8 kernel's constants come from pack_int8")
    return to_bf16_bits(_blocked(spec, BF16, np.asarray(weight, np.float32)))


def pack_int8(spec: KernelSpec, weight: np.ndarray, bias: np.ndarray | None, data: int8.Quantisation
              ) -> list[np.ndarray]:
    """An int8 kernel's constant arguments from the OIHW fp32 weights, the bias (None: none) and the quantisation of
    its input: the int8 weights in their blocks, then ``scale``, ``bias`` and ``quant`` (``search.templates.int8``)."""
    if _product(spec) is not int8.INT8:
        raise SearchError(f"{spec.knobs} is no int8 setting")
    q, weight_scale = int8.quantised_weights(weight)
    return [_blocked(spec, int8.INT8, q), *int8.constants(q, weight_scale, bias, data)]


def _folded(spec: KernelSpec, packing: _Packing, read: Callable[..., tvm.tirx.PrimExpr], block: int,
            convert: Callable[[tvm.tirx.PrimExpr], tvm.tirx.PrimExpr], zero: tvm.tirx.PrimExpr) -> te.Tensor:
    """The packed input of folded taps: first ``fold``, the input converted with its padding, ``group`` channels per
    pixel (wide enough for every read of the padded taps); then ``pack``, packed pixel (y, x) holding in channel k the
    fold's pixel (y, x * stride + k // group * dilation), channel k % group (padding for k past the taps)."""
    wl = spec.workload
    n, c, h, w = wl.in_shape
    kw, sw, dw, group = wl.kernel[1], wl.strides[1], wl.dilation[1], packing.group
    top, left, bottom, right = wl.padding
    width = max(w + left + right, (packing.cols - 1) * sw + (block - 1) // group * dw + 1)  # k up to block - 1

    def fold(nn, yy, xx, cc):
        y, x = yy - top, xx - left
        inside = tvm.tirx.all(y >= 0, y < h, x >= 0, x < w, cc < c)
        y, x = (tvm.tirx.min(tvm.tirx.max(value, 0), extent - 1) for value, extent in ((y, h), (x, w)))
        return read(nn, y, x, tvm.tirx.min(cc, c - 1)), inside

    folded = packed((n, h + top + bottom, width, group), fold, "fold", convert, zero)
    return te.compute((n, 1, packing.rows, packing.cols, block), lambda nn, _, y, x, k: tvm.tirx.if_then_else(
        k < kw * group, folded[nn, y, x * sw + k // group * dw, k % group], zero), name="pack")


def build(spec: KernelSpec, target: tvm.target.Target) -> tvm.tirx.PrimFunc:
    """The kernel's PrimFunc: arguments data, weight, (int8: scale, bias, quant; bf16: the bias where the epilogue
    has one, the prologue's), the residual where it adds one, out."""
    product = _product(spec)
    if product is int8.INT8:  # the correction of the data's zero is part of the bias, which every int8 kernel has
        spec = dataclasses.replace(spec, epilogue=dataclasses.replace(spec.epilogue, bias=True))
    wl = spec.workload
    n, c, h, w = wl.in_shape
    block = product.block
    packing = _packing(spec, block)
    rows, cols, (kh, kw), (sh, sw), (dh, dw) = (packing.rows, packing.cols, packing.kernel, packing.strides,
                                                packing.dilation)
    ib = view_block(spec.in_layout, c)
    blocks, out_blocks = padded(packing.channels, block) // block, padded(wl.out_channels, LANES) // LANES
    oh, ow = wl.out_height, wl.out_width
    flat = (sh, sw) == (1, 1)  # output row y, column x at y * cols + x: its pixels in one run per call
    data = te.placeholder((n, c // ib, h, w, ib), layout(spec.in_layout).dtype, name="data")
    weight = te.placeholder((out_blocks, blocks, kh, kw, block // product.group, LANES, product.group),
                            product.weight, name="weight")
    if product is int8.INT8:
        quant = te.placeholder((2,), "float32", name="quant")
        convert, zero, read, prologue = (lambda value: int8.quantised(value, quant), quant[1].astype("uint8"),
                                         _prologue(spec, data, ib)[0], [quant])
    else:
        read, prologue = _prologue(spec, data, ib)
        as_is = data.dtype == STORAGE and not spec.epilogue.reads_through  # bf16 values in: packed unchanged
        convert, zero = (lambda bits: bits) if as_is else rounded, tvm.tirx.const(0, STORAGE)
        read = (lambda nn, y, x, channel: data[nn, channel // ib, y, x, channel % ib]) if as_is else read

    def pack(nn, cb, hh, ww, ci):
        y, x, channel = packing.source(hh, ww, cb * block + ci)
        inside = tvm.tirx.all(y >= 0, y < h, x >= 0, x < w, cb * block + ci < packing.channels)
        y, x = (tvm.tirx.min(tvm.tirx.max(value, 0), extent - 1) for value, extent in ((y, h), (x, w)))
        return read(nn, y, x, tvm.tirx.min(channel, c - 1)), inside

    if _reads_as_packed(spec, packing, block):  # bf16 values already in the packed blocks: no pack pass
        packed_data = data
    else:
        packed_data = (_folded(spec, packing, read, block, convert, zero) if packing.group else
                       packed((n, blocks, rows, cols, block), pack, "pack", convert, zero))
    weights = blocks * kh * kw * block * LANES
    if flat:  # one run of the (oh - 1) * cols + ow pixels per block of output channels, in chunks
        run = (oh - 1) * cols + ow  # the columns past ow are computed and dropped
        chunks, pixels = -(-run // CHUNK), CHUNK
        calls, runs = n * out_blocks * chunks, ()

        # a thread's calls cycle through the smaller operand: all the weights once per chunk of the input (a chunk's
        # calls, one per block of output channels, follow each other) where they are smaller than an image's input,
        # else the whole input once per block (a block's calls follow each other)
        inner = out_blocks * weights < blocks * rows * cols * block

        def split(call):  # (image, chunk, block of output channels)
            if inner:
                return call // out_blocks // chunks, call // out_blocks % chunks, call % out_blocks
            return call // chunks // out_blocks, call % chunks, call // chunks % out_blocks

        def offsets(call):
            image, chunk, ob = split(call)
            return (image * blocks * rows * cols + chunk * CHUNK) * block, ob * weights

        def width(call):
            return tvm.tirx.min(CHUNK, run - split(call)[1] * CHUNK)

        def out_block(call):
            return split(call)[2]

        def place(call, pixel, channel):
            image, chunk, _ = split(call)
            at = chunk * CHUNK + pixel
            return (at % cols < ow) if cols > ow else None, (image, channel, at // cols, at % cols)
    else:  # whole output rows per call: one, or up to GROUPS of at most LANES pixels (one tile each)
        per = GROUPS if ow <= LANES else 1
        steps = -(-oh // per)
        runs = (sh * cols * block, ow) if per > 1 else ()  # the rows micro-kernel's run step and width
        calls, pixels = n * out_blocks * steps, per * ow

        def offsets(call):
            image, y = call // (out_blocks * steps), call % steps * per
            return (image * blocks * rows + y * sh) * cols * block, out_block(call) * weights

        def width(call):
            return tvm.tirx.min(per, oh - call % steps * per) * ow if oh % per else per * ow

        def out_block(call):
            return call // steps % out_blocks

        def place(call, pixel, channel):
            return None, (call // (out_blocks * steps), channel, call % steps * per + pixel // ow, pixel % ow)

    out, extra = row_calls(packed_data, weight, spec, spec.out_layout, wl.out_shape, calls, offsets,
                           lambda call: (blocks, cols * block, rows * cols * block, kh, kw, sw, dh, dw, *runs,
                                         width(call)), pixels, out_block, place, product, rows=bool(runs))
    constant = extra[: int(product.scaled) + int(spec.epilogue.bias)]
    residual = extra[len(constant):]
    sch = tvm.s_tir.Schedule(te.create_prim_func([data, weight, *constant, *prologue, *residual, out]))
    if packed_data is data:
        return finish(sch)
    relayout_params(sch, [("fold" if packing.group else "pack", "read", 0, spec.in_layout, ib)])
    if packing.group:
        schedule_pass(sch, "fold", 3)
    schedule_pass(sch, "pack", 3)
    return finish(sch)


def _reads_as_packed(spec: KernelSpec, packing: _Packing, block: int) -> bool:
    """Whether the input is stored as ``pack`` would lay it out: bf16 values in blocks of ``block`` channels, read
    without prologue, padding or stride (a 1x1 convolution of stride 1 without padding)."""
    stored = layout(spec.in_layout)
    wl = spec.workload
    return (stored.storage == BF16_STORED and stored.block() == block and not spec.epilogue.reads_through
            and (packing.rows, packing.cols, packing.kernel, packing.strides) == (wl.height, wl.width, (1, 1), (1, 1))
            and not packing.group)


def _prologue(spec: KernelSpec, data: te.Tensor, ib: int) -> tuple[Callable[..., tvm.tirx.PrimExpr], list[te.Tensor]]:
    """``read(image, y, x, channel)``, the input value the convolution sees (through the spec's pre-activation
    ``relu(data * scale + shift)`` or gate ``data * gate``, if it has one), and the prologue's parameters: ``scale``
    and ``shift`` (C,), or the gate, one value per image and channel stored in the input layout."""
    n, c = spec.workload.in_shape[:2]

    def value(nn, y, x, channel):
        stored = data[nn, channel // ib, y, x, channel % ib]
        return widened(stored) if data.dtype == STORAGE else stored

    if spec.epilogue.prologue:
        scale, shift = (te.placeholder((c,), "float32", name=name) for name in ("scale", "shift"))
        zero = tvm.tirx.const(0, "float32")
        return (lambda nn, y, x, channel: te.max(value(nn, y, x, channel) * scale[channel] + shift[channel], zero),
                [scale, shift])
    if spec.epilogue.gate:
        stored = layout(spec.in_layout)
        gate = te.placeholder(stored.physical_shape((n, c, 1, 1)), stored.dtype, name="gate")
        at = stored.stored_coordinates()

        def gated(nn, y, x, channel):
            factor = gate[tuple(at(nn, channel, 0, 0))]
            return value(nn, y, x, channel) * (widened(factor) if stored.storage == BF16_STORED else factor)

        return gated, [gate]
    return value, []
