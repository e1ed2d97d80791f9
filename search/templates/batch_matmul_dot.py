"""Batched matmul of two activations ``out[b, h, i, j] = act(sum_k a[b, h, i, k] * w[b, h, k, j])`` on the dot-product
micro-kernels (``search.templates.dot``), each tensor in the layout its pair names (as the fp32 template's,
``search.templates.batch_matmul``): in bf16 (both operands rounded at run time, fp32 sums: knob ``bf16``) or in int8
(knob ``int8``, ``search.templates.int8``).

The linear layer's micro-kernel on every (batch, head): ``pack_a`` converts ``a``'s rows in blocks of 64 bytes of the
reduction ``(B, H, K' // block, m, block)``; ``pack_w`` converts ``w`` into the micro-kernel's weight order
``(B, H, N' // 16, K' // block, block // group, 16, group)`` (a weight packed at run time: ``w`` is an activation);
``acc`` runs one call per (batch, head), block of 16 columns and chunk of up to ``CHUNK`` rows, in parallel, each
followed by the activation of its rows into the result's layout (``row_calls``).

int8: both operands are activations, each quantised over the range calibration found for it: ``a`` to unsigned bytes
with a zero point, ``w`` to signed bytes, symmetric (``int8.signed_scale``). The kernel's constants are ``scale``
(the two scales' product, per column) and ``quant`` = (1 / a's scale, a's zero, 1 / w's scale); the zero's correction
(``zero x sum_k q_w[k, j]`` of each column of each (batch, head)) is summed from the packed ``w`` at run time
(``zero_correction``) and subtracted from the int32 sums before they are scaled. Arguments: a, scale, quant, w, out.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import te

from search.errors import SearchError
from search.layouts import layout
from search.precision import bf16_settings, int8_settings
from search.templates import batch_matmul_layouts as layouts
from search.templates import int8
from search.templates.bf16 import BF16
from search.templates.common import finish, padded, rounded
from search.templates.dot import CHUNK, LANES, DotProduct, packed, row_calls, schedule_pass
from search.templates.workloads import KernelSpec, Knobs


def knob_space(spec: KernelSpec) -> list[Knobs]:
    """The bf16 settings, then the int8 ones, that this host runs (``search.precision``)."""
    return bf16_settings() + int8_settings()


def _product(spec: KernelSpec) -> DotProduct:
    """The spec's precision; SearchError unless its knobs are one setting of it."""
    product = int8.INT8 if int8.is_int8(spec.knobs) else BF16
    product.unit(spec)
    return product


def pack_int8(spec: KernelSpec, ranges: tuple[int8.Quantisation, float]) -> list[np.ndarray]:
    """An int8 kernel's constant arguments from ``a``'s quantisation and ``w``'s scale: ``scale`` per column, then
    ``quant``."""
    if _product(spec) is not int8.INT8:
        raise SearchError(f"{spec.knobs} is no int8 setting")
    data, w_scale = ranges
    scale = np.full(spec.workload.n, np.float32(data.scale * w_scale), np.float32)
    return [scale, np.array([1 / data.scale, data.zero, 1 / w_scale], np.float32)]


def build(spec: KernelSpec, target: tvm.target.Target) -> tvm.tirx.PrimFunc:
    layouts.check_layouts(spec)
    product = _product(spec)
    wl = spec.workload
    outer = (wl.batch // wl.heads, wl.heads)
    block, group = product.block, product.group
    blocks, columns = padded(wl.k, block) // block, padded(wl.n, LANES) // LANES
    chunks = -(-wl.m // CHUNK)
    a_stored, w_stored = (layout(name) for name in layouts.operand_layouts(spec.in_layout))
    a, a_at = layouts.stored_placeholder("a", a_stored, (*outer, wl.m, wl.k), wl.dtype)
    w, w_at = layouts.stored_placeholder("w", w_stored, (*outer, wl.k, wl.n), wl.dtype)
    if product is int8.INT8:
        quant = te.placeholder((3,), "float32", name="quant")
        convert_a, zero_a = (lambda value: int8.quantised(value, quant)), quant[1].astype("uint8")
        convert_w, zero_w = (lambda value: int8.signed_quantised(value, quant[2])), tvm.tirx.const(0, "int8")
    else:
        convert_a = convert_w = rounded
        zero_a = zero_w = tvm.tirx.const(0, product.data)

    def pack_a(b, h, kb, i, kc):
        k = kb * block + kc
        return a_at(b, h, i, tvm.tirx.min(k, wl.k - 1)), k < wl.k

    def pack_w(b, h, jb, kb, kg, jc, e):
        k, j = kb * block + group * kg + e, jb * LANES + jc
        return w_at(b, h, tvm.tirx.min(k, wl.k - 1), tvm.tirx.min(j, wl.n - 1)), tvm.tirx.all(k < wl.k, j < wl.n)

    packed_a = packed((*outer, blocks, wl.m, block), pack_a, "pack_a", convert_a, zero_a)
    packed_w = packed((*outer, columns, blocks, block // group, LANES, group), pack_w, "pack_w", convert_w, zero_w)
    correction = None
    if product is int8.INT8:
        correction = (zero_correction(packed_w, quant), lambda call, column: [call // (columns * chunks), column])

    def offsets(call):  # one chunk of rows of one block of columns of one (batch, head)
        matrix, column = call // (columns * chunks), call // chunks % columns
        weights = (matrix * columns + column) * blocks * block * LANES
        return (matrix * blocks * wl.m + call % chunks * CHUNK) * block, weights

    def scalars(call):
        width = tvm.tirx.min(CHUNK, wl.m - call % chunks * CHUNK)
        return blocks, 0, wl.m * block, 1, 1, 1, 1, 1, width

    def place(call, row, column):
        matrix = call // (columns * chunks)
        return None, (matrix // wl.heads, matrix % wl.heads, call % chunks * CHUNK + row, column)

    out, extra = row_calls(packed_a, packed_w, spec, layouts.result_layout(spec.out_layout), (*outer, wl.m, wl.n),
                           wl.batch * columns * chunks, offsets, scalars, CHUNK, lambda call: call // chunks % columns,
                           place, product, channel_axis=3, offset=correction)
    arguments = [a, w, out] if product is not int8.INT8 else [a, extra[0], quant, w, out]
    sch = tvm.s_tir.Schedule(te.create_prim_func(arguments))
    schedule_pass(sch, "pack_a", 3)
    if product is int8.INT8:
        loops = sch.get_loops(sch.get_sblock("pack_w"))
        sch.parallel(sch.fuse(*loops[:4]))
        if w_stored.axes[-1] == ("W", None):  # w's columns contiguous: read 16 of them at a time
            sch.reorder(loops[-1], loops[-2])
            sch.vectorize(loops[-2])
        else:  # each row of 64 bytes (16 columns x 4) at once
            sch.vectorize(sch.fuse(*loops[-2:]))
        schedule_correction(sch)
    else:
        schedule_pass(sch, "pack_w", 4)
    return finish(sch)


def zero_correction(packed_w: te.Tensor, quant: te.Tensor) -> te.Tensor:
    """The int8 kernel's offset of its sums ``(B x H, N')``, in int32: minus a's zero times the sum of each column of
    the quantised ``w``, read from its packed blocks: ``partial`` sums whole 64-byte rows of (column, group) over the
    blocks (vectorised), ``column_sums`` adds each column's group."""
    outer, (columns, blocks, groups, lanes, group) = packed_w.shape[:2], packed_w.shape[2:]
    heads = int(outer[1])
    kb, kg = te.reduce_axis((0, blocks), "kb"), te.reduce_axis((0, groups), "kg")
    partial = te.compute((*outer, columns, lanes, group), lambda b, h, jb, jc, e: te.sum(
        packed_w[b, h, jb, kb, kg, jc, e].astype("int32"), axis=[kb, kg]), name="partial")
    e = te.reduce_axis((0, group), "e")
    sums = te.compute((*outer, columns * lanes), lambda b, h, j: te.sum(
        partial[b, h, j // lanes, j % lanes, e], axis=e), name="column_sums")
    return te.compute((int(outer[0]) * heads, columns * lanes), lambda matrix, j: -quant[1].astype("int32") * sums[
        matrix // heads, matrix % heads, j], name="correction")


def schedule_correction(sch: tvm.s_tir.Schedule) -> None:
    """``zero_correction``'s stages: per (batch, head) in parallel, ``partial``'s rows of 64 bytes vectorised."""
    partial = sch.get_sblock("partial")
    b, h, jb, jc, e, kb, kg = sch.get_loops(partial)
    sch.reorder(b, h, jb, kb, kg, jc, e)
    sch.parallel(sch.fuse(b, h))
    sch.vectorize(sch.fuse(jc, e))
    init = sch.decompose_reduction(partial, kb)
    sch.vectorize(sch.get_loops(init)[-1])
    sums = sch.get_sblock("column_sums")
    sch.parallel(sch.fuse(*sch.get_loops(sums)[:2]))
    sch.compute_inline(sch.get_sblock("correction"))
