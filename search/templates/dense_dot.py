"""Dense layer ``out[b, o] = sum_i data[b, i] * weight[o, i]`` on the dot-product micro-kernels
(``search.templates.dot``), rows stored ``NC`` or ``CN{c}c`` on either side: in bf16 (bf16 data and weights, fp32
sums: knob ``bf16``) or in int8 (unsigned 8-bit data, signed 8-bit weights, int32 sums: knob ``int8``,
``search.templates.int8``).

The convolution's micro-kernel with a 1x1 window: ``pack`` converts the rows (bf16: rounded; int8: quantised with the
kernel's ``quant``) in blocks of 64 bytes of features ``(I' // block, rows, block)``; ``out`` runs one call per block of
16 output features and chunk of up to ``CHUNK`` rows, in parallel, each followed by the fused epilogue of its rows
into the output layout (``row_calls``; int8: the sums scaled per output feature first).

A bf16 layer of several rows also reads or writes bf16 values (``stored_pairs``): ``CN32c.bf16`` is its packed input,
read where it lies with no pack pass (other layouts of bf16 values are copied into the blocks as they are); its
epilogue rounds what it writes. Between two bf16 layers (a transformer's feed-forward pair) the value then crosses
memory once, at half the bytes.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tvm
from tvm import te

from search.bf16_bits import STORAGE
from search.errors import SearchError
from search.layouts import BF16 as BF16_STORED
from search.layouts import layout, storage_of
from search.precision import bf16_settings, int8_settings
from search.templates import int8
from search.templates.bf16 import BF16, bf16_layout, pack_weights, stores_bf16
from search.templates.common import finish, padded, rounded
from search.templates.dot import CHUNK, LANES, DotProduct, blocked_weights, packed, row_calls, schedule_pass
from search.templates.workloads import KernelSpec, Knobs

FP32_SIDE = "NC"  # the fp32 layout beside a side of bf16 values


def stored_pairs(rows: int, in_features: int, out_features: int) -> list[tuple[str, str]]:
    """The layout pairs with bf16 values on one side or both, where this host has bf16 kernels and there are several
    rows: each side ``NC`` or its layout of bf16 rows (``bf16_layout``: ``CN32c.bf16``, the packed input, or
    ``CN16c.bf16``) where it has one."""
    if not bf16_settings() or rows == 1:
        return []
    sides = [[FP32_SIDE, *filter(None, [bf16_layout("CN", features)])] for features in (in_features, out_features)]
    return [(i, o) for i in sides[0] for o in sides[1] if BF16_STORED in (storage_of(i), storage_of(o))]


def knob_space(spec: KernelSpec) -> list[Knobs]:
    """The bf16 settings, then the int8 ones (fp32 values in and out only), that this host runs
    (``search.precision``)."""
    return bf16_settings() + ([] if stores_bf16(spec) else int8_settings())


def _product(spec: KernelSpec) -> DotProduct:
    """The spec's precision; SearchError unless its knobs are one setting of it."""
    product = int8.INT8 if int8.is_int8(spec.knobs) else BF16
    product.unit(spec)
    if product is int8.INT8 and stores_bf16(spec):
        raise SearchError(f"no int8 kernel for {spec}: it reads and writes fp32 values")
    return product


def pack_weight(spec: KernelSpec, weight: np.ndarray) -> np.ndarray:
    """(O, I) -> ``search.templates.bf16.pack_weights`` of the (O, I, 1, 1) window."""
    if _product(spec) is not BF16:
        raise SearchError(f"{spec.knobs} is no bf16 setting: an int8 kernel's constants come from pack_int8")
    return pack_weights(weight[:, :, None, None])


def pack_int8(spec: KernelSpec, weight: np.ndarray, bias: np.ndarray | None, data: int8.Quantisation
              ) -> list[np.ndarray]:
    """An int8 kernel's constant arguments from the (O, I) fp32 weights, the bias (None: none) and the quantisation
    of its input: the int8 weights in their blocks, then ``scale``, ``bias`` and ``quant``."""
    if _product(spec) is not int8.INT8:
        raise SearchError(f"{spec.knobs} is no int8 setting")
    q, weight_scale = int8.quantised_weights(np.asarray(weight)[:, :, None, None])
    return [blocked_weights(q, int8.INT8), *int8.constants(q, weight_scale, bias, data)]


def build(spec: KernelSpec, target: tvm.target.Target) -> tvm.tirx.PrimFunc:
    """The kernel's PrimFunc: arguments data, weight, (int8: scale, bias, quant; bf16: the bias where the epilogue
    has one), the residual where it adds one, out."""
    product = _product(spec)
    if product is int8.INT8:  # the correction of the data's zero is part of the bias, which every int8 kernel has
        spec = dataclasses.replace(spec, epilogue=dataclasses.replace(spec.epilogue, bias=True))
    wl = spec.workload
    rows, features, block = wl.batch, wl.in_features, product.block
    blocks, out_blocks = padded(features, block) // block, padded(wl.out_features, LANES) // LANES
    chunks = -(-rows // CHUNK)
    stored = layout(spec.in_layout)
    as_is = stored.storage == BF16_STORED  # bf16 values in: copied as they are, or read where they lie
    weight = te.placeholder((out_blocks, blocks, 1, 1, block // product.group, LANES, product.group),
                            product.weight, name="weight")
    if product is int8.INT8:
        quant = te.placeholder((2,), "float32", name="quant")
        convert, zero, after = (lambda value: int8.quantised(value, quant)), quant[1].astype("uint8"), [quant]
    else:
        convert, zero, after = (lambda bits: bits) if as_is else rounded, tvm.tirx.const(0, STORAGE), []

    def pack(cb, b, ci):
        feature = cb * block + ci
        return data[b, tvm.tirx.min(feature, features - 1)], feature < features

    if as_is and stored.block() == block:  # CN32c.bf16: the packed input itself
        data = packed_data = te.placeholder((blocks, rows, block), STORAGE, name="data")
    else:
        data = te.placeholder((rows, features), stored.dtype, name="data")
        packed_data = packed((blocks, rows, block), pack, "pack", convert, zero)

    def offsets(call):  # one chunk of rows of one block of output features
        return call % chunks * CHUNK * block, call // chunks * blocks * block * LANES

    def scalars(call):
        width = tvm.tirx.min(CHUNK, rows - call % chunks * CHUNK)
        return blocks, 0, rows * block, 1, 1, 1, 1, 1, width

    out, extra = row_calls(packed_data, weight, spec, spec.out_layout, (rows, wl.out_features), out_blocks * chunks,
                           offsets, scalars, CHUNK, lambda call: call // chunks,
                           lambda call, row, feature: (None, (call % chunks * CHUNK + row, feature)), product)
    constant = extra[: int(product.scaled) + int(spec.epilogue.bias)]
    sch = tvm.s_tir.Schedule(te.create_prim_func([data, weight, *constant, *after, *extra[len(constant):], out]))
    if packed_data is data:
        return finish(sch)
    ib = stored.block()
    if ib is not None:
        sch.transform_layout("pack", ("read", 0), lambda b, i: (i // ib, b, i % ib))
    schedule_pass(sch, "pack", 2)
    return finish(sch)
