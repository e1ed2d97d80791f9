"""Depthwise 2-D convolution (groups == channels) from any of NHWC and NCHW{c}c to any of them, or NCHW to NCHW.

Computed on the blocked view ``(n, C // b, h, w, b)`` of the *output* layout (``b`` its block, or for NHWC the
``c_bn`` knob), with weights ``(C // b, kh, kw, b)``; an input in another layout is read through an index map to its
own storage, so the kernel performs the layout conversion on the way instead of a separate transform (a channel
vector of the output is contiguous in every such input: NHWC, or a block a multiple of ``b``, else two or more
contiguous pieces). The channel block is vectorised and the padding read inline; knob ``rows`` runs the output rows
outermost (each row's channel blocks together: NHWC's default, whose pixels interleave the blocks) or the channel
blocks outermost (each block's rows together: the blocked layouts' default). NCHW, whose block is 1, pairs only
with itself: there it vectorises the output-width register tile and pads the input rows each output row needs into a
small buffer first.

On a host with bf16 instructions the kernel also reads or writes bf16 values (``NCHW16c`` or the channels' layout of
bf16 values on each side, ``search.templates.conv2d_dot.stored_pairs``, bf16 values on at least one): its setting is
then the bf16 one, ``(("bf16", unit),)`` (the other knobs at their defaults), its weights are rounded to bf16 when they
are packed, each value read is widened exactly and the sums, in fp32, are rounded as they are written. Computing on
bf16 values is what halves this memory-bound kernel's traffic; the arithmetic stays fp32 multiply-adds.

On a host with int8 dot products, a kernel on fp32 values into a vectorised output layout (not NCHW) also runs in
int8 (knob ``int8``, the AVX-512 VNNI setting of ``search.precision``, the other knobs at their defaults;
``search.templates.int8`` for the quantisation): ``data_pad`` quantises the input once into an unsigned 8-bit copy of
the blocked view, padded with the quantisation's zero (its own parallel pass), the taps' products are summed in int32
from the signed 8-bit weights (per channel, symmetric), and the epilogue scales the sums per channel, the zero's
correction folded into the bias. The kernel's arguments are then data, weight, scale, bias, quant, the residual if
any, and out.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tvm
from tvm import te, topi

from search.bf16_bits import STORAGE, from_bf16_bits, to_bf16_bits
from search.errors import SearchError
from search.layouts import candidate_layouts, layout, view_block
from search.precision import DOT, INT8_KNOB, KNOB, bf16_settings, int8_settings
from search.templates import int8
from search.templates.bf16 import stores_bf16
from search.templates.common import (
    by_closeness,
    divisors,
    epilogue_compute,
    finish,
    knob_product,
    reg_tile_default,
    relayout_params,
    resolve_knobs,
    unit,
    vectorize_tile,
    widened,
)
from search.templates.conv2d_dot import stored_pairs
from search.templates.dot import schedule_pass
from search.templates.workloads import Conv2DWorkload, KernelSpec, Knobs

C_BLOCKS = (16, 32, 8, 64, 4)
REG_N_CHOICES = 5


def supported_layouts(workload: Conv2DWorkload) -> list[tuple[str, str]]:
    """``(NCHW, NCHW)`` and every pair of NHWC and the NCHW{c}c whose block divides the channels, input-major, then
    the pairs with bf16 values on a side (``search.templates.conv2d_dot.stored_pairs``)."""
    vectored = [name for name in candidate_layouts(workload.in_channels) if name != "NCHW"]
    pairs = [("NCHW", "NCHW")] + [(i, o) for i in vectored for o in vectored]
    return pairs + stored_pairs(workload.in_channels, workload.out_channels)


def resolved_knobs(spec: KernelSpec) -> dict[str, int]:
    """``spec``'s knobs with the defaults of those it leaves out, without the precision knobs (``_bf16``,
    ``_int8``)."""
    _bf16(spec)
    _int8(spec)
    return resolve_knobs(tuple(item for item in spec.knobs if item[0] not in (KNOB, INT8_KNOB)), _choices(spec))


def _bf16(spec: KernelSpec) -> bool:
    """Whether the kernel reads or writes bf16 values; SearchError where the bf16 knob and the layouts disagree."""
    stored, knob = stores_bf16(spec), KNOB in dict(spec.knobs)
    if knob and not stored:
        raise SearchError(f"a bf16 depthwise kernel reads or writes bf16 values, got {spec.in_layout} -> "
                          f"{spec.out_layout}")
    if stored and spec.knobs and not knob:
        raise SearchError(f"a depthwise kernel on bf16 values takes the bf16 knob, got {spec.knobs}")
    return stored


def _int8_applies(spec: KernelSpec) -> bool:
    """Whether the kernel may run in int8: fp32 values in and out, a vectorised output layout, no prologue."""
    return not (stores_bf16(spec) or spec.out_layout == "NCHW" or spec.epilogue.reads_through)


def _int8_settings(spec: KernelSpec) -> list[Knobs]:
    """The host's int8 dot-product setting where the kernel may run in int8 (``_int8_applies``)."""
    return [knobs for knobs in int8_settings() if dict(knobs)[INT8_KNOB] == DOT] if _int8_applies(spec) else []


def _int8(spec: KernelSpec) -> bool:
    """Whether the kernel computes in int8; SearchError for an int8 setting it has no kernel for."""
    if not int8.is_int8(spec.knobs):
        return False
    if dict(spec.knobs) != {INT8_KNOB: DOT} or not _int8_applies(spec):
        raise SearchError(f"an int8 depthwise kernel takes the one knob {INT8_KNOB}={DOT}, fp32 values in, an output "
                          f"layout other than NCHW and no prologue; got {spec.knobs} {spec.in_layout} -> "
                          f"{spec.out_layout} {spec.epilogue}")
    return True


def compute_block(spec: KernelSpec) -> int:
    """The channel block ``b`` of the view the kernel computes on: the output's, or for NHWC the ``c_bn`` knob."""
    knobs = resolved_knobs(spec)
    return knobs["c_bn"] if "c_bn" in knobs else view_block(spec.out_layout, spec.workload.out_channels)


def _choices(spec: KernelSpec) -> dict[str, list[int]]:
    wl = spec.workload
    choices: dict[str, list[int]] = {}
    block = view_block(spec.out_layout, wl.out_channels)
    if spec.out_layout == "NHWC":
        choices["c_bn"] = [b for b in C_BLOCKS if wl.in_channels % b == 0] or [1]
        block = choices["c_bn"][0]
    if spec.out_layout == "NCHW":  # the register tile is the vector
        default = max(divisors(wl.out_width, unit().lanes))
    else:
        default = reg_tile_default(wl.out_width, -(-block // unit().lanes))
    choices["reg_n"] = by_closeness(divisors(wl.out_width, 2 * unit().lanes), default)[:REG_N_CHOICES]
    if spec.out_layout != "NCHW":  # rows outermost: every channel block of a row while its input rows are cached
        choices["rows"] = [1, 0] if "NHWC" in (spec.in_layout, spec.out_layout) else [0, 1]
    if wl.kernel[1] > 1:  # NCHW: ~2x faster without unrolling kw (one noisy 1-thread measurement)
        choices["unroll_kw"] = [0, 1] if spec.in_layout == "NCHW" else [1, 0]
    return choices


def knob_space(spec: KernelSpec, size: int | None = None) -> list[Knobs]:
    """The knob product, then the int8 setting where there is one (``_int8_settings``); on bf16 values the host's
    first bf16 setting alone."""
    if _bf16(spec):
        return bf16_settings()[:1][:size]
    space = knob_product(_choices(spec), None) + _int8_settings(spec)
    return space if size is None else space[: max(size, 0)]


def pack_weight(spec: KernelSpec, weight: np.ndarray) -> np.ndarray:
    """(C, 1, kh, kw) -> ``(C // b, kh, kw, b)``, ``b`` the compute block (on bf16 values: rounded to bf16)."""
    c, _, kh, kw = weight.shape
    b = compute_block(spec)
    packed = np.ascontiguousarray(weight.reshape(c // b, b, kh, kw).transpose(0, 2, 3, 1), dtype=spec.workload.dtype)
    return from_bf16_bits(to_bf16_bits(packed)) if _bf16(spec) else packed


def pack_int8(spec: KernelSpec, weight: np.ndarray, bias: np.ndarray | None, data: int8.Quantisation
              ) -> list[np.ndarray]:
    """An int8 kernel's constant arguments from the (C, 1, kh, kw) fp32 weights, the bias (None: none) and the
    quantisation of its input: the int8 weights ``(C // b, kh, kw, b)``, then ``scale``, ``bias`` and ``quant``."""
    if not _int8(spec):
        raise SearchError(f"{spec.knobs} is no int8 setting")
    q, weight_scale = int8.quantised_weights(weight)
    c, _, kh, kw = q.shape
    b = compute_block(spec)
    return [np.ascontiguousarray(q.reshape(c // b, b, kh, kw).transpose(0, 2, 3, 1)),
            *int8.constants(q, weight_scale, bias, data)]


def build(spec: KernelSpec, target: tvm.target.Target) -> tvm.tirx.PrimFunc:
    if _int8(spec):
        return _build_int8(spec)
    wl = spec.workload
    knobs = resolved_knobs(spec)
    n, c, h, w = wl.in_shape
    b = compute_block(spec)
    (kh, kw), (sh, sw), (dh, dw) = wl.kernel, wl.strides, wl.dilation
    top, left, bottom, right = wl.padding
    data = te.placeholder((n, c // b, h, w, b), layout(spec.in_layout).dtype, name="data")
    weight = te.placeholder((c // b, kh, kw, b), wl.dtype, name="weight")
    padded = topi.nn.pad(data, (0, 0, top, left, 0), (0, 0, bottom, right, 0), name="data_pad")
    rh, rw = te.reduce_axis((0, kh), name="kh"), te.reduce_axis((0, kw), name="kw")

    def read(*index):
        value = padded[index]
        return widened(value) if data.dtype == STORAGE else value

    acc = te.compute(
        (n, c // b, wl.out_height, wl.out_width, b),
        lambda i, cb, oh, ow, ci: te.sum(
            read(i, cb, oh * sh + rh * dh, ow * sw + rw * dw, ci) * weight[cb, rh, rw, ci], axis=[rh, rw]
        ),
        name="depthwise",
    )
    out, extra = epilogue_compute(acc, spec.epilogue, c, lambda i, cb, oh, ow, ci: cb * b + ci,
                                  storage=layout(spec.out_layout).dtype)
    sch = tvm.s_tir.Schedule(te.create_prim_func([data, weight, *extra, out]))
    accesses = [("data_pad", "read", 0, spec.in_layout, b), ("out", "write", 0, spec.out_layout, b)]
    if spec.epilogue.residual:
        accesses.append(("out", "read", 2 if spec.epilogue.bias else 1, spec.out_layout, b))
    relayout_params(sch, accesses)
    piece = view_block(spec.in_layout, c)  # the contiguous run of channels in the input
    _schedule(sch, knobs, vector_width=spec.out_layout != "NCHW", piece=piece if piece < b else None)
    return finish(sch)


def _build_int8(spec: KernelSpec) -> tvm.tirx.PrimFunc:
    """The int8 kernel (see the module's docstring); every int8 kernel has a bias (the zero's correction)."""
    spec = dataclasses.replace(spec, epilogue=dataclasses.replace(spec.epilogue, bias=True))
    wl = spec.workload
    n, c, h, w = wl.in_shape
    b = compute_block(spec)
    (kh, kw), (sh, sw), (dh, dw) = wl.kernel, wl.strides, wl.dilation
    top, left, bottom, right = wl.padding
    data = te.placeholder((n, c // b, h, w, b), "float32", name="data")
    weight = te.placeholder((c // b, kh, kw, b), "int8", name="weight")
    scale, quant = te.placeholder((c,), "float32", name="scale"), te.placeholder((2,), "float32", name="quant")

    def quantised(i, cb, y, x, ci):
        inside = tvm.tirx.all(y >= top, y < top + h, x >= left, x < left + w)
        return tvm.tirx.if_then_else(inside, int8.quantised(data[i, cb, y - top, x - left, ci], quant),
                                     quant[1].astype("uint8"))

    padded = te.compute((n, c // b, h + top + bottom, w + left + right, b), quantised, name="data_pad")
    rh, rw = te.reduce_axis((0, kh), name="kh"), te.reduce_axis((0, kw), name="kw")
    acc = te.compute(
        (n, c // b, wl.out_height, wl.out_width, b),
        lambda i, cb, oh, ow, ci: te.sum(
            padded[i, cb, oh * sh + rh * dh, ow * sw + rw * dw, ci].astype("int32")
            * weight[cb, rh, rw, ci].astype("int32"), axis=[rh, rw]),
        name="depthwise",
    )
    out, (bias, *residual) = epilogue_compute(acc, spec.epilogue, c, lambda i, cb, oh, ow, ci: cb * b + ci,
                                              scale=scale)
    sch = tvm.s_tir.Schedule(te.create_prim_func([data, weight, scale, bias, quant, *residual, out]))
    accesses = [("data_pad", "read", 0, spec.in_layout, b), ("out", "write", 0, spec.out_layout, b)]
    if residual:
        accesses.append(("out", "read", 3, spec.out_layout, b))
    relayout_params(sch, accesses)
    _schedule(sch, resolved_knobs(spec), vector_width=True, piece=None, pad_pass=True)
    return finish(sch)


def _schedule(sch: tvm.s_tir.Schedule, knobs: dict[str, int], vector_width: bool, piece: int | None,
              pad_pass: bool = False) -> None:
    """``piece``: the input's channel block where it is shorter than the compute block; the channel vector is then
    split into runs of that length, each one contiguous load. ``pad_pass``: the padded input is a pass of its own
    over the whole tensor (the int8 kernel's quantised copy)."""
    acc = sch.get_sblock("depthwise")
    n, cb, oh, ow, ci, kh, kw = sch.get_loops(acc)
    owo, owi = sch.split(ow, [None, knobs["reg_n"]])
    tile = (owi, ci) if vector_width else (ci, owi)
    if knobs.get("rows"):
        sch.reorder(n, oh, cb, owo, kh, kw, *tile)
        outer = sch.fuse(n, oh)
    else:
        sch.reorder(n, cb, oh, owo, kh, kw, *tile)
        outer = sch.fuse(n, cb, oh)
    out = sch.get_sblock("out")
    sch.reverse_compute_at(out, owo)
    sch.parallel(outer)
    sch.unroll(tile[0])
    vector = tile[1]
    if piece:
        runs, vector = sch.split(vector, [None, piece])
        sch.unroll(runs)
    sch.vectorize(vector)
    if knobs.get("unroll_kw"):
        sch.unroll(kw)
    init = sch.decompose_reduction(acc, kh)
    vectorize_tile(sch, init, depth=2)
    vectorize_tile(sch, out, depth=2, width_last=not vector_width)
    pad = sch.get_sblock("data_pad")
    if pad_pass:
        schedule_pass(sch, "data_pad", 2)
    elif vector_width:
        sch.compute_inline(pad)
    else:  # padding tests per width lane would break up the vectors: pad the rows an output row needs, once
        sch.compute_at(pad, outer)
        sch.vectorize(sch.get_loops(pad)[-1])
