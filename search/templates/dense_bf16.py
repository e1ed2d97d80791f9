"""bfloat16 dense layer ``out[b, o] = sum_i data[b, i] * weight[o, i]``: bf16 data and weights, fp32 accumulation,
rows stored ``NC`` or ``CN{c}c`` on either side; the settings of ``search.precision``'s ``bf16`` knob.

The convolution's micro-kernel with a 1x1 window (``search.templates.dot``): ``pack`` rounds the rows to bf16 in
blocks of 32 features ``(I' // 32, rows, 32)``; ``out`` runs one call per block of 16 output features and chunk of
up to ``CHUNK`` rows, in parallel, each followed by the fused epilogue of its rows into the output layout
(``row_calls``).
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import te

from search.layouts import layout
from search.precision import STORAGE, bf16_settings
from search.templates.bf16 import BF16, BLOCK, instruction_unit, pack_weights, packed
from search.templates.common import finish, padded
from search.templates.dot import CHUNK, LANES, row_calls, schedule_pass
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
        return data[b, tvm.tirx.min(feature, features - 1)], feature < features

    packed_data = packed((blocks, rows, BLOCK), pack, "pack")

    def offsets(call):  # one chunk of rows of one block of output features
        return call % chunks * CHUNK * BLOCK, call // chunks * blocks * BLOCK * LANES

    def scalars(call):
        width = tvm.tirx.min(CHUNK, rows - call % chunks * CHUNK)
        return blocks, 0, rows * BLOCK, 1, 1, 1, 1, 1, width

    out, extra = row_calls(packed_data, weight, spec, spec.out_layout, (rows, wl.out_features), out_blocks * chunks,
                           offsets, scalars, CHUNK, lambda call: call // chunks,
                           lambda call, row, feature: (None, (call % chunks * CHUNK + row, feature)), BF16)
    sch = tvm.s_tir.Schedule(te.create_prim_func([data, weight, *extra, out]))
    ib = layout(spec.in_layout).block()
    if ib is not None:
        sch.transform_layout("pack", ("read", 0), lambda b, i: (i // ib, b, i % ib))
    schedule_pass(sch, "pack", 2)
    return finish(sch)
