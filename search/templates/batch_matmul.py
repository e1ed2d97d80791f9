"""Batched matmul of two activations ``out[b, h, i, j] = act(sum_k a[b, h, i, k] * w[b, h, k, j])``, its operands
and its result each stored in a 4-D layout of its own, ``act`` the epilogue's activation if it has one.

Layouts: ``BIJ`` stores everything contiguous in the kernel's order (``NCHW`` of the 4-D view: batch, heads, rows,
columns), as a plain row-major 3-D tensor reshaped. A *strided* pair names the layout of each operand,
``"A+W"`` (e.g. ``NHCW+NWCH``: attention's queries and keys read token-major, where their heads were split), and of
the result (``NHCW``: written token-major, ready for the heads to merge); the kernel reads and writes through them,
so export needs no transpose around it. ``BIJ`` as an operand layout is ``NCHW``.

The columns are split in vectorised blocks of ``n_bn`` (the vector unit's lanes, twice them, or a divisor of them),
the rows in an unrolled register tile of ``reg_m`` and the reduction unrolled by ``k_unroll``; (batch, head, row tile,
column block) run in parallel. Where no block divides the columns (ViT's 197 tokens) or ``w``'s columns are not its
innermost stored axis (keys read token-major), ``w`` is first copied into contiguous zero-padded columns; a row tile
that does not divide the rows computes the last row again (``row_tiles``); the write-back drops what padding computed.
On a host with bf16 (int8) instructions, the last settings compute in bf16 (int8) (knobs ``bf16`` and ``int8``,
``search.precision``), built by ``search.templates.batch_matmul_dot``.
"""

from __future__ import annotations

import tvm
from tvm import te

from search.layouts import layout
from search.templates import batch_matmul_dot, int8
from search.templates.batch_matmul_layouts import (  # noqa: F401 - the kind reads them here
    LAYOUT,
    VIEW,
    check_layouts,
    input_layout,
    operand_layouts,
    output_layout,
    result_layout,
    stored_placeholder,
)
from search.templates.bf16 import is_bf16
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
from search.templates.workloads import BatchMatmulWorkload, KernelSpec, Knobs

ATTENTION_PAIRS = (  # what attention's permutes leave: scores from token-major queries and keys; context from
    ("NHCW+NWCH", LAYOUT),  # token-major values, written head-major or token-major
    ("NCHW+NHCW", LAYOUT),
    ("NCHW+NHCW", "NHCW"),
    (LAYOUT, "NHCW"),
)


def supported_layouts(workload: BatchMatmulWorkload) -> list[tuple[str, str]]:
    return [(LAYOUT, LAYOUT), *(ATTENTION_PAIRS if workload.heads > 1 else ())]


def _choices(spec: KernelSpec) -> dict[str, list[int]]:
    wl, lanes = spec.workload, unit().lanes
    blocks = [lanes, 2 * lanes] + [lanes // d for d in (2, 4) if lanes % d == 0]
    return {
        "n_bn": [b for b in blocks if wl.n % b == 0] or blocks,
        "reg_m": row_tiles(wl.m),
        "k_unroll": k_unrolls(wl.k),
    }


def knob_space(spec: KernelSpec, size: int | None = None) -> list[Knobs]:
    """The fp32 settings (``knob_product`` order), then the bf16 and int8 ones."""
    space = knob_product(_choices(spec), None) + batch_matmul_dot.knob_space(spec)
    return space if size is None else space[: max(size, 0)]


def build(spec: KernelSpec, target: tvm.target.Target) -> tvm.tirx.PrimFunc:
    if is_bf16(spec.knobs) or int8.is_int8(spec.knobs):
        return batch_matmul_dot.build(spec, target)
    check_layouts(spec)
    wl = spec.workload
    knobs = resolve_knobs(spec.knobs, _choices(spec))
    rows, columns = padded(wl.m, knobs["reg_m"]), padded(wl.n, knobs["n_bn"])
    outer = (wl.batch // wl.heads, wl.heads)
    a_stored, w_stored = (layout(name) for name in operand_layouts(spec.in_layout))
    a, a_at = stored_placeholder("a", a_stored, (*outer, wl.m, wl.k), wl.dtype)
    w, w_at = stored_placeholder("w", w_stored, (*outer, wl.k, wl.n), wl.dtype)
    packed = columns > wl.n or w_stored.axes[-1] != ("W", None)  # else w's columns are contiguous and complete
    if packed:
        w_pad = te.compute((*outer, wl.k, columns), lambda b, h, k, j: te.if_then_else(
            j < wl.n, w_at(b, h, k, j), te.const(0, wl.dtype)), name="w_pad")
        w_at = lambda b, h, k, j: w_pad[b, h, k, j]  # noqa: E731
    k = te.reduce_axis((0, wl.k), name="k")
    acc = te.compute((*outer, rows, columns),
                     lambda b, h, i, j: te.sum(a_at(b, h, clamped(i, wl.m, rows), k) * w_at(b, h, k, j), axis=k),
                     name="batch_matmul")
    result = layout(result_layout(spec.out_layout))
    out, _ = epilogue_compute(acc, spec.epilogue, wl.n, lambda *idx: idx[-1],  # the tile's write-back
                              shape=result.physical_shape((*outer, wl.m, wl.n)), source=result.logical_coordinates())
    sch = tvm.s_tir.Schedule(te.create_prim_func([a, w, out]))
    if packed:
        b, h, k, j = sch.get_loops(sch.get_sblock("w_pad"))
        if w_stored.axes[-1] == ("H", None):  # rows innermost (keys token-major): read them in order
            sch.reorder(j, k)
        sch.parallel(sch.fuse(b, h))
    acc = sch.get_sblock("batch_matmul")
    batch, head, i, j, k = sch.get_loops(acc)
    blocks, vector = sch.split(j, [None, knobs["n_bn"]])
    schedule_matmul(sch, acc, [batch, head], i, knobs["reg_m"], blocks, vector, k, knobs["k_unroll"])
    return finish(sch)
