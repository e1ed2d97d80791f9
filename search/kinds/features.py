"""Cost-model features shared by the convolution-like kernel kinds (conv2d, depthwise conv2d, dense) and layout
transforms: what a kernel computes and moves, how its template tiles it. TVM-free.

Values go into ``cost_models.features.FEATURE_NAMES`` rows; sizes and footprints enter as log2(1 + x) so that trees
split them by orders of magnitude. docs/cost_model.md describes each feature.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from search.isa import HOST
from search.layouts import BF16, layout, storage_of
from search.templates.workloads import Epilogue, KernelSpec

VECTOR_LANES = HOST.lanes  # as the templates (search.templates.common)
ACCUMULATORS = HOST.accumulators
BYTES = 4  # float32


def log_size(x: float) -> float:
    """log2(1 + x), 0 for negative x."""
    return math.log2(1.0 + max(float(x), 0.0))


def element_bytes(name: str) -> int:
    """The bytes of one value stored in layout ``name``: 2 for bf16 values (``search.layouts``), else 4."""
    return 2 if storage_of(name) == BF16 else BYTES


def layout_features(side: str, name: str, channels: int, width: int) -> dict[str, float]:
    """1/0 flags of NCHW and NHWC, the channel block (0 when unblocked) and the contiguous innermost run (log2) of a
    tensor stored in layout ``name``; ``side`` is ``in`` or ``out``."""
    parsed = layout(name)
    block = parsed.block() or 0
    run = block if block else channels if parsed.axes[-1] == ("C", None) else width
    return {f"{side}_nchw": float(name == "NCHW"), f"{side}_nhwc": float(name == "NHWC"),
            f"{side}_block": float(block), f"log_{side}_run": log_size(run)}


def activation_operations(epilogue: Epilogue) -> int:
    """The arithmetic operations per element of ``epilogue``'s activation (0 without one), counted on its kind's
    ``tir`` form: what it costs, for activation kinds the cost model has not seen."""
    return 0 if epilogue.activation is None else _operations(epilogue.activation, epilogue.activation_attrs)


@functools.cache
def _operations(activation: str, attrs: tuple[tuple[str, float], ...]) -> int:
    import tvm

    from search.followers import activation_kind

    leaves = (tvm.tirx.expr.Var, tvm.tirx.expr.FloatImm, tvm.tirx.expr.IntImm)
    seen: set = set()

    def count(expr) -> int:  # distinct nodes: a value used twice is computed once
        if isinstance(expr, leaves) or expr in seen:
            return 0
        seen.add(expr)
        operands = [getattr(expr, f) for f in ("a", "b", "condition", "true_value", "false_value") if hasattr(expr, f)]
        operands += [expr.value] if isinstance(expr, tvm.tirx.expr.Cast) else []
        return 1 + sum(map(count, [*operands, *getattr(expr, "args", ())]))

    return count(activation_kind(activation).tir(tvm.tirx.expr.Var("x", "float32"), dict(attrs)))


def _lane_use(block: int) -> float:
    return block / (math.ceil(block / VECTOR_LANES) * VECTOR_LANES)


@dataclass(frozen=True)
class Extents:
    """A convolution-shaped kernel's extents (a dense layer is a 1x1 convolution of a 1x1 image)."""

    batch: int
    in_channels: int
    height: int
    width: int
    out_channels: int
    out_height: int
    out_width: int
    kernel: tuple[int, int] = (1, 1)
    strides: tuple[int, int] = (1, 1)
    padding: tuple[int, int] = (0, 0)  # total rows, total columns
    groups: int = 1


def tiled_kernel_features(spec: KernelSpec, e: Extents, ib: int, ob: int, *, depthwise: bool = False,
                          layouts: bool = True, tile: str = "reg_n", tiled: int | None = None) -> dict[str, float]:
    """The features of a kernel of extents ``e`` tiled by the conv-style templates: input-channel block ``ib``,
    output-channel vector block ``ob``, a register tile of ``ob`` by the knob ``tile`` (default ``reg_n``: output
    columns) of the ``tiled`` extent (default: the output width), loops over the reduction unrolled by the knob
    ``k_unroll`` (0: none), fused epilogue."""
    knobs, epilogue = dict(spec.knobs), spec.epilogue
    (kh, kw), (sh, sw) = e.kernel, e.strides
    n, ci, co, oh, ow = e.batch, e.in_channels, e.out_channels, e.out_height, e.out_width
    flops = 2 * n * co * oh * ow * (ci // e.groups) * kh * kw
    weight_bytes = co * (ci // e.groups) * kh * kw * BYTES
    out_bytes = n * co * oh * ow * element_bytes(spec.out_layout)
    moved = (n * ci * e.height * e.width * element_bytes(spec.in_layout) + weight_bytes
             + out_bytes * (2 if epilogue.residual else 1))
    row = dict(batch=n, in_channels=ci, height=e.height, width=e.width, out_channels=co, out_height=oh, out_width=ow,
               kernel_h=kh, kernel_w=kw, stride_h=sh, stride_w=sw, pad_h=e.padding[0], pad_w=e.padding[1],
               groups=e.groups, log_flops=log_size(flops), log_bytes=log_size(moved),
               log_weight_bytes=log_size(weight_bytes), arithmetic_intensity=flops / moved)
    if layouts:
        row.update(layout_features("in", spec.in_layout, ci, e.width))
        row.update(layout_features("out", spec.out_layout, co, ow))
    reg_n, tiled = knobs.get(tile, 1), ow if tiled is None else tiled
    vectors = math.ceil(ob / VECTOR_LANES)
    oc_blocks, width_tiles = math.ceil(co / max(ob, 1)), math.ceil(tiled / reg_n)  # knobs need not divide: padded
    items = n * oc_blocks * oh  # the fused, parallel outer loops
    per_tap = 1 if depthwise else ib
    input_patch = ((reg_n - 1) * sw + kw) * kh * per_tap
    row.update(ic_block=ib, oc_block=ob, reg_n=reg_n, unroll_kw=knobs.get("unroll_kw", -1),
               k_unroll=knobs.get("k_unroll", 0),
               rows_outer=knobs.get("rows", -1),
               oc_lane_use=_lane_use(ob), ic_lane_use=_lane_use(ib), accumulators=reg_n * vectors,
               accumulator_use=reg_n * vectors / ACCUMULATORS, width_tiles=width_tiles,
               oc_padding=oc_blocks * ob / co - 1, width_padding=width_tiles * reg_n / tiled - 1,
               log_parallel_items=log_size(items), parallel_balance=items / (math.ceil(items / 2) * 2),
               log_register_tile=log_size(reg_n * ob * BYTES),
               log_l1_tile=log_size((input_patch + kh * kw * per_tap * ob + reg_n * ob) * BYTES),
               log_l2_tile=log_size(((ci // e.groups) * kh * kw * ob + kh * e.width * ci) * BYTES),
               bias=float(bool(epilogue.bias)), residual=float(bool(epilogue.residual)),
               activation_ops=activation_operations(epilogue))
    return {name: float(value) for name, value in row.items()}
