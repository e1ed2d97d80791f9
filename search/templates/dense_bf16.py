"""bfloat16 dense layer ``out[b, o] = sum_i data[b, i] * weight[o, i]``: bf16 data and weights, fp32 accumulation,
rows stored ``NC`` or ``CN{c}c`` on either side; the settings of ``search.precision``'s ``bf16`` knob.

The convolution's micro-kernel with a 1x1 window (``search.templates.bf16``): ``pack`` rounds the rows to bf16 in
blocks of 32 features ``(I' // 32, rows, 32)``; ``acc`` runs one call per block of 16 output features and chunk of
up to ``CHUNK`` rows, in parallel, into ``(O' // 16, rows, 16)``; ``out`` is the fused epilogue in the output layout.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import te

from search.layouts import layout
from search.precision import STORAGE, bf16_settings
from search.templates.bf16 import BLOCK, CHUNK, LANES, instruction_unit, pack_weights, rounded, row_calls, schedule_pass
from search.templates.common import epilogue_compute, finish, padded
from search.templates.workloads import KernelSpec, Knobs


def knob_space(spec: KernelSpec) -> list[Knobs]:
    """The bf16 settings this host runs (``search.precision.bf16_settings``)."""
    return bf16_settings()


def pack_weight(spec: KernelSpec, weight: np.ndarray) -> np.ndarray:
    """(O, I) -> ``search.templates.bf16.pack_weights`` of the (O, I, 1, 1) window."""
    instruction_unit(spec)
    return pack_weights(weight[:, :, None, None])


def build(spec: KernelSpec, target: tvm.target.Target) -> tvm.tirx.PrimFunc:
    instruction_unit(spec)
    wl = spec.workload
    rows, features = wl.batch, wl.in_features
    blocks, out_blocks = padded(features, BLOCK) // BLOCK, padded(wl.out_features, LANES) // LANES
    chunks = -(-rows // CHUNK)
    data = te.placeholder((rows, features), wl.dtype, name="data")
    weight = te.placeholder((out_blocks, blocks, 1, 1, BLOCK // 2, LANES, 2), STORAGE, name="weight")

    def pack(cb, b, ci):
        feature = cb * BLOCK + ci
        value = rounded(data[b, tvm.tirx.min(feature, features - 1)])
        return tvm.tirx.if_then_else(feature < features, value, tvm.tirx.const(0, STORAGE))

    packed = te.compute((blocks, rows, BLOCK), pack, name="pack")

    def offsets(call):  # one chunk of rows of one block of output features
        block, first = call // chunks, call % chunks * CHUNK
        return first * BLOCK, block * blocks * BLOCK * LANES, (block * rows + first) * LANES

    def scalars(call):
        width = tvm.tirx.min(CHUNK, rows - call % chunks * CHUNK)
        return blocks, 0, rows * BLOCK, 1, 1, 1, 1, 1, width

    acc = row_calls(packed, weight, (out_blocks, rows, LANES), spec, out_blocks * chunks, offsets, scalars)
    out, extra = epilogue_compute(acc, spec.epilogue, wl.out_features, lambda b, k: k, (rows, wl.out_features),
                                  lambda b, k: (k // LANES, b, k % LANES))
    sch = tvm.s_tir.Schedule(te.create_prim_func([data, weight, *extra, out]))
    ob = layout(spec.out_layout).block()
    stored = [("out", "write", 0)] + ([("out", "read", 2 if spec.epilogue.bias else 1)] if spec.epilogue.residual
                                      else [])
    for block, kind, index in stored if ob else []:  # CN{ob}c: (k // ob, b, k % ob)
        sch.transform_layout(block, (kind, index), lambda b, k: (k // ob, b, k % ob))
    ib = layout(spec.in_layout).block()
    if ib is not None:
        sch.transform_layout("pack", ("read", 0), lambda b, i: (i // ib, b, i % ib))
    schedule_pass(sch, "pack", 2)
    schedule_pass(sch, "out", 1)
    return finish(sch)
