"""Dense layer ``out[b, o] = sum_i data[b, i] * weight[o, i]``, weights packed (O // ob, I, ob).

The rows are stored ``NC`` (row-major) or ``CN{c}c`` (feature blocks outermost), on either side: a blocked output's
block is the kernel's feature block ``oc_bn``, so each register tile it writes is contiguous; a blocked input is read
through an index map. The output features are split in vectorised blocks of ``oc_bn``, the batch in an unrolled
register tile of ``reg_b`` rows and the reduction unrolled by ``k_unroll``; (batch tile, feature block) pairs run in
parallel, feature blocks outermost (knob ``rows`` 0: each block's weights stay in cache while every row tile passes)
or row tiles outermost (``rows`` 1: each row tile streams every block's weights). ``reg_b`` need not divide the rows
(``row_tiles``): the tiles past the last row compute it again and the write-back drops them. On a host with bf16
or int8 dot-product instructions, the last settings compute in bf16 (knob ``bf16``) or int8 (knob ``int8``,
``search.precision``), built by ``search.templates.dense_dot``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import tvm
from tvm import te

from search.layouts import layout, row_layouts
from search.templates import dense_dot
from search.templates.bf16 import is_bf16, stores_bf16
from search.templates.common import (
    clamped,
    epilogue_compute,
    finish,
    k_unrolls,
    knob_product,
    padded,
    resolve_knobs,
    row_tiles,
    schedule_matmul,
)
from search.templates.int8 import is_int8
from search.templates.workloads import DenseWorkload, KernelSpec, Knobs

OC_BLOCKS = (16, 32, 8, 64, 4)


def supported_layouts(workload: DenseWorkload) -> list[tuple[str, str]]:
    """``NC`` in and out first; where there are several rows, every pair of ``NC`` and the ``CN{c}c`` whose block
    divides the features on its side (an output block also one of ``OC_BLOCKS``), then the pairs whose bf16 kernels
    read or write bf16 values (``search.templates.dense_dot.stored_pairs``)."""
    if workload.batch == 1:  # one row: every row layout is the same memory
        return [("NC", "NC")]
    ins = [name for name in row_layouts() if workload.in_features % (layout(name).block() or 1) == 0]
    outs = [name for name in row_layouts() if layout(name).block() in (None, *OC_BLOCKS)
            and workload.out_features % (layout(name).block() or 1) == 0]
    wl = workload
    return [(i, o) for i in ins for o in outs] + dense_dot.stored_pairs(wl.batch, wl.in_features, wl.out_features)


def _choices(spec: KernelSpec) -> dict[str, list[int]]:
    wl = spec.workload
    out_block = layout(spec.out_layout).block()
    return {
        "oc_bn": [out_block] if out_block else [b for b in OC_BLOCKS if wl.out_features % b == 0] or [1],
        "reg_b": row_tiles(wl.batch),
        "k_unroll": k_unrolls(wl.in_features),
        "rows": [0, 1] if wl.batch > 1 else [0],  # one row: one row tile, both orders the same loops
    }


def knob_space(spec: KernelSpec, size: int | None = None) -> list[Knobs]:
    """The fp32 settings (``knob_product`` order), then the bf16 and int8 ones; on bf16 values the bf16 ones
    alone."""
    if stores_bf16(spec):
        return dense_dot.knob_space(spec)[:size]
    space = knob_product(_choices(spec), None) + dense_dot.knob_space(spec)
    return space if size is None else space[: max(size, 0)]


def _resolved(spec: KernelSpec) -> KernelSpec:
    """``spec``, with the first bf16 setting where it reads or writes bf16 values and has no knobs (its default)."""
    if spec.knobs or not stores_bf16(spec):
        return spec
    return replace(spec, knobs=dense_dot.knob_space(spec)[0])


def pack_weight(spec: KernelSpec, weight: np.ndarray) -> np.ndarray:
    """(O, I) -> ``(O // ob, I, ob)`` (a bf16 or int8 setting: ``search.templates.dense_dot``'s)."""
    spec = _resolved(spec)
    if is_bf16(spec.knobs) or is_int8(spec.knobs):
        return dense_dot.pack_weight(spec, weight)
    ob = resolve_knobs(spec.knobs, _choices(spec))["oc_bn"]
    o, i = weight.shape
    return np.ascontiguousarray(weight.reshape(o // ob, ob, i).transpose(0, 2, 1), dtype=spec.workload.dtype)


def build(spec: KernelSpec, target: tvm.target.Target) -> tvm.tirx.PrimFunc:
    spec = _resolved(spec)
    if is_bf16(spec.knobs) or is_int8(spec.knobs):
        return dense_dot.build(spec, target)
    wl = spec.workload
    knobs = resolve_knobs(spec.knobs, _choices(spec))
    ob, rows = knobs["oc_bn"], padded(wl.batch, knobs["reg_b"])
    data = te.placeholder((wl.batch, wl.in_features), wl.dtype, name="data")
    weight = te.placeholder((wl.out_features // ob, wl.in_features, ob), wl.dtype, name="weight")
    k = te.reduce_axis((0, wl.in_features), name="k")
    acc = te.compute(
        (rows, wl.out_features // ob, ob),
        lambda b, oc, oi: te.sum(data[clamped(b, wl.batch, rows), k] * weight[oc, k, oi], axis=k),
        name="dense",
    )
    out, extra = epilogue_compute(acc, spec.epilogue, wl.out_features, lambda b, oc, oi: oc * ob + oi,
                                  shape=(wl.batch, wl.out_features // ob, ob))
    sch = tvm.s_tir.Schedule(te.create_prim_func([data, weight, *extra, out]))
    stored = [("out", "write", 0)]
    if spec.epilogue.residual:
        stored.append(("out", "read", 2 if spec.epilogue.bias else 1))
    blocked_out = layout(spec.out_layout).block() is not None  # CN{ob}c: (oc, b, oi)
    for block, kind, index in stored:
        sch.transform_layout(block, (kind, index),
                             (lambda b, oc, oi: (oc, b, oi)) if blocked_out else (lambda b, oc, oi: (b, oc * ob + oi)))
    ib = layout(spec.in_layout).block()
    if ib is not None:
        sch.transform_layout("dense", ("read", 0), lambda b, i: (i // ib, b, i % ib))
    acc = sch.get_sblock("dense")
    b, oc, oi, k = sch.get_loops(acc)
    schedule_matmul(sch, acc, [], b, knobs["reg_b"], oc, oi, k, knobs["k_unroll"], columns_outer=not knobs["rows"])
    return finish(sch)
