"""Dense (groups == 1) 2-D convolution for every (in, out) pair of NCHW, NHWC and NCHW{c}c layouts.

One compute serves all pairs: ``topi.nn.conv2d_NCHWc`` on blocked views (input block ``ib`` from the input layout,
output block ``ob`` from the output layout, or the ``oc_bn`` knob for NCHW / NHWC outputs), the fused epilogue as its
consumer, and parameter buffers re-indexed to the physical layouts. The schedule is TVM's classic x86 NCHWc one:
an output-width register tile (``reg_n``) of vectorised output-channel blocks, accumulated over input-channel blocks
and the kernel window, written back through the epilogue, the outer loops fused and run in parallel.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import te, topi

from search.layouts import block_size, candidate_layouts
from search.templates.common import (
    MAX_ACCUMULATORS,
    VECTOR_LANES,
    by_closeness,
    divisors,
    epilogue_compute,
    finish,
    knob_product,
    reg_tile_default,
    relayout_params,
    resolve_knobs,
    vectorize_tile,
    view_block,
)
from search.templates.workloads import Conv2DWorkload, KernelSpec, Knobs

OC_BLOCKS = (16, 32, 8, 64, 4)  # oc_bn choices for NCHW / NHWC outputs, best guess first
MAX_REG_N = 32
REG_N_CHOICES = 5


def supported_layouts(workload: Conv2DWorkload) -> list[tuple[str, str]]:
    """Every pair of NCHW, NHWC and NCHW{c}c (c dividing the channels), input-major; none for grouped convs."""
    if workload.groups != 1:
        return []
    ins = candidate_layouts(workload.in_channels)
    outs = candidate_layouts(workload.out_channels)
    return [(i, o) for i in ins for o in outs]


def _vectors(block: int) -> int:
    return -(-block // VECTOR_LANES)


def _choices(spec: KernelSpec) -> dict[str, list[int]]:
    wl = spec.workload
    choices: dict[str, list[int]] = {}
    if block_size(spec.out_layout) is None:
        choices["oc_bn"] = [b for b in OC_BLOCKS if wl.out_channels % b == 0] or [1]
    ob = choices["oc_bn"][0] if "oc_bn" in choices else block_size(spec.out_layout)
    reg_n = by_closeness(divisors(wl.out_width, MAX_REG_N), reg_tile_default(wl.out_width, _vectors(ob)))
    choices["reg_n"] = reg_n[:REG_N_CHOICES]
    if wl.kernel[1] > 1:
        choices["unroll_kw"] = [1, 0]
    return choices


def knob_space(spec: KernelSpec, size: int | None = None) -> list[Knobs]:
    space = knob_product(_choices(spec), None)
    block = block_size(spec.out_layout)
    fits = [k for k in space if dict(k)["reg_n"] * _vectors(dict(k).get("oc_bn", block)) <= MAX_ACCUMULATORS]
    return fits if size is None else fits[: max(size, 0)]


def _blocks(spec: KernelSpec) -> tuple[int, int, dict[str, int]]:
    knobs = resolve_knobs(spec.knobs, _choices(spec))
    wl = spec.workload
    ib = view_block(spec.in_layout, wl.in_channels)
    ob = knobs["oc_bn"] if "oc_bn" in knobs else view_block(spec.out_layout, wl.out_channels)
    return ib, ob, knobs


def pack_weight(spec: KernelSpec, weight: np.ndarray) -> np.ndarray:
    """OIHW -> ``(O // ob, I // ib, kh, kw, ib, ob)``."""
    ib, ob, _ = _blocks(spec)
    o, i, kh, kw = weight.shape
    packed = weight.reshape(o // ob, ob, i // ib, ib, kh, kw).transpose(0, 2, 4, 5, 3, 1)
    return np.ascontiguousarray(packed, dtype=spec.workload.dtype)


def build(spec: KernelSpec, target: tvm.target.Target) -> tvm.tirx.PrimFunc:
    ib, ob, knobs = _blocks(spec)
    wl = spec.workload
    n, c, h, w = wl.in_shape
    kh, kw = wl.kernel
    data = te.placeholder((n, c // ib, h, w, ib), wl.dtype, name="data")
    weight = te.placeholder((wl.out_channels // ob, c // ib, kh, kw, ib, ob), wl.dtype, name="weight")
    with target:
        acc = topi.nn.conv2d_NCHWc(
            data, weight, wl.strides, wl.padding, wl.dilation, f"NCHW{ib}c", f"NCHW{ob}c", wl.dtype
        )
    out, extra = epilogue_compute(acc, spec.epilogue, wl.out_channels, lambda nn, cb, hh, ww, ci: cb * ob + ci)
    sch = tvm.s_tir.Schedule(te.create_prim_func([data, weight, *extra, out]))
    has_pad = any(wl.padding)
    reads = [("data_pad" if has_pad else "conv2d_NCHWc", "read", 0, spec.in_layout, ib)]
    if spec.epilogue.residual:
        reads.append(("out", "read", 2 if spec.epilogue.bias else 1, spec.out_layout, ob))
    relayout_params(sch, [*reads, ("out", "write", 0, spec.out_layout, ob)])
    _schedule(sch, ib, knobs, has_pad, nchw_out=spec.out_layout == "NCHW")
    return finish(sch)


def _schedule(sch: tvm.s_tir.Schedule, ib: int, knobs: dict[str, int], has_pad: bool, nchw_out: bool) -> None:
    conv = sch.get_sblock("conv2d_NCHWc")
    n, occ, oh, ow, ocb, ic, kh, kw = sch.get_loops(conv)
    owo, owi = sch.split(ow, [None, knobs["reg_n"]])
    ico, ici = sch.split(ic, [None, ib])
    sch.reorder(n, occ, oh, owo, ico, kh, kw, ici, owi, ocb)
    out = sch.get_sblock("out")
    sch.reverse_compute_at(out, owo)
    sch.parallel(sch.fuse(n, occ, oh))
    sch.vectorize(ocb)
    sch.unroll(owi)
    if knobs.get("unroll_kw"):
        sch.unroll(kw)
    init = sch.decompose_reduction(conv, ico)
    vectorize_tile(sch, init, depth=2)
    vectorize_tile(sch, out, depth=2, width_last=nchw_out)  # NCHW stores are contiguous along w
    if has_pad:
        sch.compute_inline(sch.get_sblock("data_pad"))
