"""Batched matmul of two activations ``out[b, i, j] = sum_k a[b, i, k] * w[b, k, j]`` on row-major 3-D tensors.

The columns are split in vectorised blocks of ``n_bn`` (the vector unit's lanes, twice them, or a divisor of them),
the rows in an unrolled register tile of ``reg_m`` and the reduction unrolled by ``k_unroll``; (batch, row tile,
column block) triples run in parallel. Where no block divides the columns (ViT's 197 tokens), ``w`` is first copied
into zero-padded columns; a row tile that does not divide the rows computes the last row again (``row_tiles``); the
write-back drops what padding computed.
"""

from __future__ import annotations

import tvm
from tvm import te

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
    unit,
)
from search.templates.workloads import BatchMatmulWorkload, Epilogue, KernelSpec, Knobs

LAYOUT = "BIJ"  # a plain row-major 3-D tensor: batch, rows, columns


def supported_layouts(workload: BatchMatmulWorkload) -> list[tuple[str, str]]:
    return [(LAYOUT, LAYOUT)]


def _choices(spec: KernelSpec) -> dict[str, list[int]]:
    wl, lanes = spec.workload, unit().lanes
    blocks = [lanes, 2 * lanes] + [lanes // d for d in (2, 4) if lanes % d == 0]
    return {
        "n_bn": [b for b in blocks if wl.n % b == 0] or blocks,
        "reg_m": row_tiles(wl.m),
        "k_unroll": k_unrolls(wl.k),
    }


def knob_space(spec: KernelSpec, size: int | None = None) -> list[Knobs]:
    return knob_product(_choices(spec), size)


def build(spec: KernelSpec, target: tvm.target.Target) -> tvm.tirx.PrimFunc:
    wl = spec.workload
    knobs = resolve_knobs(spec.knobs, _choices(spec))
    rows, columns = padded(wl.m, knobs["reg_m"]), padded(wl.n, knobs["n_bn"])
    a = te.placeholder((wl.batch, wl.m, wl.k), wl.dtype, name="a")
    w = te.placeholder((wl.batch, wl.k, wl.n), wl.dtype, name="w")
    source = w if columns == wl.n else te.compute(
        (wl.batch, wl.k, columns), lambda b, k, j: te.if_then_else(j < wl.n, w[b, k, j], te.const(0, wl.dtype)),
        name="w_pad")
    k = te.reduce_axis((0, wl.k), name="k")
    acc = te.compute((wl.batch, rows, columns),
                     lambda b, i, j: te.sum(a[b, clamped(i, wl.m, rows), k] * source[b, k, j], axis=k),
                     name="batch_matmul")
    out, _ = epilogue_compute(acc, Epilogue(bias=False), wl.n, lambda b, i, j: j,  # the tile's write-back
                              shape=(wl.batch, wl.m, wl.n))
    sch = tvm.s_tir.Schedule(te.create_prim_func([a, w, out]))
    if columns > wl.n:
        sch.parallel(sch.get_loops(sch.get_sblock("w_pad"))[0])
    acc = sch.get_sblock("batch_matmul")
    batch, i, j, k = sch.get_loops(acc)
    blocks, vector = sch.split(j, [None, knobs["n_bn"]])
    schedule_matmul(sch, acc, [batch], i, knobs["reg_m"], blocks, vector, k, knobs["k_unroll"])
    return finish(sch)
