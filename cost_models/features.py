"""Features of measurement tasks for the learned cost model, computed from a task's cache key alone.

A key (``KernelTask.key`` / ``TransformTask.key``, the JSON the cost cache stores) says everything that determines
a timing, so the same function featurises a task about to be priced and a record read back from the cache. Every
task becomes one row of ``len(FEATURE_NAMES)`` floats; features that do not apply to its kind are 0. A kernel's
features come from its kind (``KernelKind.features``; ``search.kinds.features`` for the built-in ones), a layout
transform's from here. Sizes and footprints enter as log2(1 + x) so that trees split them by orders of magnitude.
docs/cost_model.md describes each feature; ``FEATURE_VERSION`` changes whenever a feature changes, so a model trained
on other features is refused.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from cost_models.cache import canonical
from search.kinds import KINDS, KernelKind, LayoutKind, kernel_kind
from search.kinds.features import element_bytes, layout_features, log_size
from search.templates.workloads import Epilogue, KernelSpec

FEATURE_VERSION = 15  # 2: oc_padding, width_padding (the conv template pads channels and width); 3: gelu;
# 4: gelu_tanh; 5: is_batch_matmul; 6: permuted_a, permuted_b, permuted_out; 7: winograd; 8: is_softmax,
# is_layer_norm, lane_partials; 9: prologue; 10: rows_outer; 11: a dense kernel's layouts (row layouts) and
# rows_outer (its loop order); 12: activation_ops (replacing the flags relu, relu6, gelu, gelu_tanh); 13: gate;
# 14: bf16; 15: k_unroll, and a dense or batch_matmul kernel's register tile of rows (reg_n, accumulators, ...)

# the kinds with an is_<kind> feature
FLAGGED_KINDS = ("conv2d", "depthwise_conv2d", "dense", "batch_matmul", "softmax", "layer_norm", "layout_transform")

FEATURE_NAMES = (
    # what the task is
    *(f"is_{kind}" for kind in FLAGGED_KINDS),
    # workload (transforms: the tensor's logical n, c, h, w; rows, features as 1, c, rows, 1)
    "batch", "in_channels", "height", "width", "out_channels", "out_height", "out_width",
    "kernel_h", "kernel_w", "stride_h", "stride_w", "pad_h", "pad_w", "groups",
    "log_flops", "log_bytes", "log_weight_bytes", "arithmetic_intensity",
    # layouts: 1/0 flags and the channel block (0 when unblocked); transforms: source and destination
    "in_nchw", "in_nhwc", "in_block", "out_nchw", "out_nhwc", "out_block",
    "log_in_run", "log_out_run",  # contiguous innermost run of the input / output, in elements
    "permuted_a", "permuted_b", "permuted_out",  # batch_matmul: an operand read / the result written head-split
    # the algorithm: a conv2d's Winograd output tile size (0: direct); its precision (0: fp32, else the bf16 knob)
    "winograd", "bf16",
    # schedule knobs and what they imply
    "ic_block", "oc_block", "reg_n", "unroll_kw", "k_unroll", "rows_outer", "oc_lane_use", "ic_lane_use",
    "accumulators", "accumulator_use", "width_tiles", "oc_padding", "width_padding", "log_parallel_items",
    "parallel_balance", "lane_partials",  # softmax, layer norm: one partial sum per vector lane (1) or one per row (0)
    # tile footprints (bytes, log2)
    "log_register_tile", "log_l1_tile", "log_l2_tile",
    # fused epilogue; a conv2d's prologue (a pre-activation or a gate): 0 none, else 1 + where it is computed (its
    # knob), and whether it is a gate
    "bias", "residual", "activation_ops", "prologue", "gate",
)
INDEX = {name: i for i, name in enumerate(FEATURE_NAMES)}


class FeatureError(ValueError):
    """A key that is not a kernel or layout-transform task of this tessera, or of a kind that gives no features."""


def _tupled(value: Any) -> Any:
    """JSON lists back as tuples (workload fields such as ``kernel`` are tuples)."""
    return tuple(_tupled(v) for v in value) if isinstance(value, list) else value


def kernel_spec_of(key: Mapping[str, Any]) -> KernelSpec:
    """The ``KernelSpec`` a kernel task key describes (its kind's workload type rebuilt from the key)."""
    kind = kernel_kind(key["kind"])
    workload = kind.workload_type(**{name: _tupled(value) for name, value in key["workload"].items()})
    knobs = tuple((str(name), int(value)) for name, value in key.get("knobs", []))
    return KernelSpec(workload, key["in_layout"], key["out_layout"], knobs, Epilogue(**key.get("epilogue", {})))


def _transform(key: Mapping[str, Any], row: dict[str, float]) -> None:
    shape = key["shape"]
    n, c, h, w = shape if len(shape) == 4 else (1, shape[1], shape[0], 1)
    values = n * c * h * w
    moved = values * (element_bytes(key["src"]) + element_bytes(key["dst"]))  # a conversion: bf16 on one side
    row.update(batch=n, in_channels=c, height=h, width=w, out_channels=c, out_height=h, out_width=w,
               log_bytes=log_size(moved), parallel_balance=1.0)
    row.update(layout_features("in", key["src"], c, w))
    row.update(layout_features("out", key["dst"], c, w))


def _chain(key: Mapping[str, Any], row: dict[str, float]) -> None:
    """A chain as the memory pass it is: its output tensor's extents, the bytes its inputs and output move, its
    layout on both sides (no ``is_`` flag of its own)."""
    shapes = [tuple(shape) for shape in key["inputs"]]
    n, _, h, w = shapes[0]
    kind = KINDS.get(key["head"])
    c = kind.output_shape(shapes, key.get("attrs", {}))[1] if isinstance(kind, LayoutKind) else shapes[0][1]
    moved = element_bytes(key["layout"]) * (sum(math.prod(shape) for shape in shapes) + n * c * h * w)
    row.update(batch=n, in_channels=c, height=h, width=w, out_channels=c, out_height=h, out_width=w,
               log_bytes=log_size(moved), parallel_balance=1.0)
    row.update(layout_features("in", key["layout"], c, w))
    row.update(layout_features("out", key["layout"], c, w))


def _kernel(key: Mapping[str, Any], row: dict[str, float]) -> None:
    spec = kernel_spec_of(key)
    try:
        values = kernel_kind(spec.workload.kind).features(spec)
    except NotImplementedError as exc:
        raise FeatureError(str(exc)) from None
    unknown = sorted(set(values) - set(row))
    if unknown:
        raise FeatureError(f"kind {key['kind']} gives unknown features {', '.join(unknown)}")
    row.update(values)


def parse_key(key: str | Mapping[str, Any]) -> dict[str, Any]:
    """A task key as a dict (keys are canonical JSON strings)."""
    if isinstance(key, str):
        try:
            key = json.loads(key)
        except json.JSONDecodeError as exc:
            raise FeatureError(f"not a task key: {key[:80]!r}") from exc
    kind = key.get("kind") if isinstance(key, Mapping) else None
    if kind not in ("layout_transform", "chain") and not isinstance(KINDS.get(kind), KernelKind):
        raise FeatureError(f"not a kernel or layout-transform key: {str(key)[:80]!r}")
    return dict(key)


def feature_row(key: str | Mapping[str, Any]) -> np.ndarray:
    """The feature vector of one task key."""
    return _text_row(key).copy() if isinstance(key, str) else _row(key)


@lru_cache(maxsize=1 << 16)
def _text_row(key: str) -> np.ndarray:
    """``feature_row`` of a key's text, kept: selective measurement asks for the same keys' features every round."""
    return _row(key)


def _row(key: str | Mapping[str, Any]) -> np.ndarray:
    key = parse_key(key)
    row = dict.fromkeys(FEATURE_NAMES, 0.0)
    if f"is_{key['kind']}" in INDEX:
        row[f"is_{key['kind']}"] = 1.0
    try:
        {"layout_transform": _transform, "chain": _chain}.get(key["kind"], _kernel)(key, row)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        if isinstance(exc, FeatureError):
            raise
        raise FeatureError(f"malformed {key['kind']} key ({exc!r}): {canonical(key)[:120]}") from exc
    return np.fromiter((float(row[name]) for name in FEATURE_NAMES), dtype=np.float64, count=len(FEATURE_NAMES))


def feature_matrix(keys: Sequence[str | Mapping[str, Any]]) -> np.ndarray:
    """``(len(keys), len(FEATURE_NAMES))`` features, one row per key."""
    if not keys:
        return np.zeros((0, len(FEATURE_NAMES)))
    return np.stack([_text_row(key) if isinstance(key, str) else _row(key) for key in keys])


def group_key(key: str | Mapping[str, Any]) -> str:
    """What the candidates of one node share: a kernel's kind, workload and epilogue (its layouts and knobs vary),
    or a transform's tensor shape (its layouts vary). Rankings and top-k picks are made within a group."""
    key = parse_key(key)
    if key["kind"] == "layout_transform":
        return canonical({"kind": key["kind"], "shape": key["shape"]})
    if key["kind"] == "chain":
        return canonical({name: value for name, value in key.items() if name != "layout"})
    return canonical({"kind": key["kind"], "workload": key["workload"], "epilogue": key.get("epilogue", {})})
