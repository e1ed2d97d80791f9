"""bfloat16 batched matmul of two activations ``out[b, h, i, j] = act(sum_k a[b, h, i, k] * w[b, h, k, j])``: both
operands rounded to bf16 at run time, fp32 accumulation, each tensor in the layout its pair names (as the fp32
template's, ``search.templates.batch_matmul``); the settings of ``search.precision``'s ``bf16`` knob.

The linear layer's micro-kernel (``search.templates.dot``) on every (batch, head): ``pack_a`` rounds ``a``'s rows in
blocks of 32 of the reduction ``(B, H, K' // 32, m, 32)``; ``pack_w`` rounds ``w`` into the micro-kernel's weight
order ``(B, H, N' // 16, K' // 32, 16, 16, 2)`` (a weight packed at run time: ``w`` is an activation); ``acc`` runs one
call per (batch, head), block of 16 columns and chunk of up to ``CHUNK`` rows, in parallel, each followed by the
activation of its rows into the result's layout (``row_calls``).
"""

from __future__ import annotations

import tvm
from tvm import te

from search.layouts import layout
from search.precision import bf16_settings
from search.templates import batch_matmul_layouts as layouts
from search.templates.bf16 import BF16, BLOCK, instruction_unit, packed
from search.templates.common import finish, padded
from search.templates.dot import CHUNK, LANES, row_calls, schedule_pass
from search.templates.workloads import KernelSpec, Knobs


def knob_space(spec: KernelSpec) -> list[Knobs]:
    """The bf16 settings this host runs (``search.precision.bf16_settings``)."""
    return bf16_settings()


def build(spec: KernelSpec, target: tvm.target.Target) -> tvm.tirx.PrimFunc:
    layouts.check_layouts(spec)
    instruction_unit(spec)
    wl = spec.workload
    outer = (wl.batch // wl.heads, wl.heads)
    blocks, columns = padded(wl.k, BLOCK) // BLOCK, padded(wl.n, LANES) // LANES
    chunks = -(-wl.m // CHUNK)
    a_stored, w_stored = (layout(name) for name in layouts.operand_layouts(spec.in_layout))
    a, a_at = layouts.stored_placeholder("a", a_stored, (*outer, wl.m, wl.k), wl.dtype)
    w, w_at = layouts.stored_placeholder("w", w_stored, (*outer, wl.k, wl.n), wl.dtype)

    def pack_a(b, h, kb, i, kc):
        k = kb * BLOCK + kc
        return a_at(b, h, i, tvm.tirx.min(k, wl.k - 1)), k < wl.k

    def pack_w(b, h, jb, kb, pair, jc, e):
        k, j = kb * BLOCK + 2 * pair + e, jb * LANES + jc
        return w_at(b, h, tvm.tirx.min(k, wl.k - 1), tvm.tirx.min(j, wl.n - 1)), tvm.tirx.all(k < wl.k, j < wl.n)

    packed_a = packed((*outer, blocks, wl.m, BLOCK), pack_a, "pack_a")
    packed_w = packed((*outer, columns, blocks, BLOCK // 2, LANES, 2), pack_w, "pack_w")

    def offsets(call):  # one chunk of rows of one block of columns of one (batch, head)
        matrix, column = call // (columns * chunks), call // chunks % columns
        weights = (matrix * columns + column) * blocks * BLOCK * LANES
        return (matrix * blocks * wl.m + call % chunks * CHUNK) * BLOCK, weights

    def scalars(call):
        width = tvm.tirx.min(CHUNK, wl.m - call % chunks * CHUNK)
        return blocks, 0, wl.m * BLOCK, 1, 1, 1, 1, 1, width

    def place(call, row, column):
        matrix = call // (columns * chunks)
        return None, (matrix // wl.heads, matrix % wl.heads, call % chunks * CHUNK + row, column)

    out, _ = row_calls(packed_a, packed_w, spec, layouts.result_layout(spec.out_layout), (*outer, wl.m, wl.n),
                       wl.batch * columns * chunks, offsets, scalars, CHUNK, lambda call: call // chunks % columns,
                       place, BF16, channel_axis=3)
    sch = tvm.s_tir.Schedule(te.create_prim_func([a, w, out]))
    schedule_pass(sch, "pack_a", 3)
    schedule_pass(sch, "pack_w", 4)
    return finish(sch)
