"""bfloat16 2-D convolution (groups 1): bf16 data and weights, fp32 accumulation, for any pair of NCHW, NHWC and
NCHW{c}c layouts; the settings of ``search.precision``'s ``bf16`` knob.

Three stages (``search.templates.bf16``), each over the whole tensor:

- ``pack``: the fp32 input, read in its layout, rounded to bf16 (to nearest, ties to even) into a zero-padded copy
  in blocks of 32 channels (the channels padded to a multiple of 32);
- ``acc``: the convolution, one output row of one block of 16 output channels per call of a C++ micro-kernel
  (``search.microkernels``: AMX tiles with knob value ``AMX``, AVX-512 BF16 dot products with ``DOT``), the rows
  run in parallel; its fp32 result is ``(n, channels // 16, height, width, 16)``;
- ``out``: the fused epilogue (bias, residual, activation) written in the output layout, in fp32.

The weights are converted once, when packed (``pack_weight``). A prologue or gate the data is read through is not
supported (``supports``).
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import te

from search.errors import SearchError
from search.layouts import layout, view_block
from search.precision import STORAGE, bf16_settings
from search.templates.bf16 import BLOCK, CHUNK, LANES, instruction_unit, pack_weights, rounded, row_calls, schedule_pass
from search.templates.common import epilogue_compute, finish, padded, relayout_params
from search.templates.workloads import KernelSpec, Knobs


def supports(spec: KernelSpec) -> bool:
    """Groups 1, no prologue or gate."""
    return spec.workload.groups == 1 and not spec.epilogue.reads_through


def knob_space(spec: KernelSpec) -> list[Knobs]:
    """The bf16 settings this host runs (``search.precision.bf16_settings``) where the kernel applies."""
    return bf16_settings() if supports(spec) else []


def _check(spec: KernelSpec) -> None:
    instruction_unit(spec)
    if not supports(spec):
        raise SearchError(f"no bf16 kernel for {spec}: it needs groups 1 and no prologue or gate")


def pack_weight(spec: KernelSpec, weight: np.ndarray) -> np.ndarray:
    """OIHW -> ``search.templates.bf16.pack_weights``."""
    _check(spec)
    return pack_weights(weight)


def build(spec: KernelSpec, target: tvm.target.Target) -> tvm.tirx.PrimFunc:
    _check(spec)
    wl = spec.workload
    n, c, h, w = wl.in_shape
    kh, kw = wl.kernel
    (sh, sw), (dh, dw) = wl.strides, wl.dilation
    top, left, bottom, right = wl.padding
    ib = view_block(spec.in_layout, c)
    blocks, out_blocks = padded(c, BLOCK) // BLOCK, padded(wl.out_channels, LANES) // LANES
    oh, ow = wl.out_height, wl.out_width
    subsampled = (kh, kw) == (1, 1) and not any(wl.padding)  # pack reads only the pixels the kernel reads
    if subsampled:
        rows, cols, (sh, sw) = oh, ow, (1, 1)
        step_h, step_w = wl.strides
    else:
        rows, cols, step_h, step_w = h + top + bottom, w + left + right, 1, 1
    flat = (sh, sw) == (1, 1)  # output row y, column x at y * cols + x: its pixels in one run per call
    data = te.placeholder((n, c // ib, h, w, ib), wl.dtype, name="data")
    weight = te.placeholder((out_blocks, blocks, kh, kw, BLOCK // 2, LANES, 2), STORAGE, name="weight")

    def pack(nn, cb, hh, ww, ci):
        channel = tvm.tirx.min(cb * BLOCK + ci, c - 1)
        y, x = tvm.tirx.min(tvm.tirx.max(hh - top, 0), h - 1), tvm.tirx.min(tvm.tirx.max(ww - left, 0), w - 1)
        inside = tvm.tirx.all(hh >= top, hh < h + top, ww >= left, ww < w + left, cb * BLOCK + ci < c)
        value = rounded(data[nn, channel // ib, y * step_h, x * step_w, channel % ib])
        return tvm.tirx.if_then_else(inside, value, tvm.tirx.const(0, STORAGE))

    packed = te.compute((n, blocks, rows, cols, BLOCK), pack, name="pack")
    weights = blocks * kh * kw * BLOCK * LANES
    if flat:  # one run of the (oh - 1) * cols + ow pixels per block of output channels, in chunks
        run, acc_cols = (oh - 1) * cols + ow, cols  # the columns past ow are computed and dropped
        chunks = -(-run // CHUNK)
        calls = n * out_blocks * chunks

        def offsets(call):
            matrix, first = call // chunks, call % chunks * CHUNK  # matrix: (image, block of output channels)
            return ((matrix // out_blocks * blocks * rows * cols + first) * BLOCK, matrix % out_blocks * weights,
                    (matrix * oh * cols + first) * LANES)

        def width(call):
            return tvm.tirx.min(CHUNK, run - call % chunks * CHUNK)
    else:  # one output row per call
        acc_cols, calls = ow, n * out_blocks * oh

        def offsets(row):
            image, rest = row // (out_blocks * oh), row % (out_blocks * oh)
            block, y = rest // oh, rest % oh
            return ((image * blocks * rows + y * sh) * cols * BLOCK, block * weights,
                    ((image * out_blocks + block) * oh + y) * ow * LANES)

        def width(row):
            return ow

    acc = row_calls(packed, weight, (n, out_blocks, oh, acc_cols, LANES), spec, calls, offsets,
                    lambda call: (blocks, cols * BLOCK, rows * cols * BLOCK, kh, kw, sw, dh, dw, width(call)))
    logical = padded(wl.out_channels, LANES) != wl.out_channels or layout(spec.out_layout).block() != LANES
    if logical:  # written through the logical NCHW index, then re-indexed to the output layout
        out, extra = epilogue_compute(acc, spec.epilogue, wl.out_channels, lambda nn, k, hh, ww: k, wl.out_shape,
                                      lambda nn, k, hh, ww: (nn, k // LANES, hh, ww, k % LANES))
    else:
        out, extra = epilogue_compute(acc, spec.epilogue, wl.out_channels, lambda nn, cb, hh, ww, ci: cb * LANES + ci,
                                      (n, out_blocks, oh, ow, LANES))
    bias, others = extra[: int(spec.epilogue.bias)], extra[int(spec.epilogue.bias):]
    sch = tvm.s_tir.Schedule(te.create_prim_func([data, weight, *bias, *others, out]))
    view = None if logical else LANES
    accesses = [("pack", "read", 0, spec.in_layout, ib), ("out", "write", 0, spec.out_layout, view)]
    if spec.epilogue.residual:
        accesses.append(("out", "read", 2 if spec.epilogue.bias else 1, spec.out_layout, view))
    relayout_params(sch, accesses)
    schedule_pass(sch, "pack", 3)
    schedule_pass(sch, "out", 3)
    return finish(sch)
