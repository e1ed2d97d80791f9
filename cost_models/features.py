"""Features of measurement tasks for the learned cost model, computed from a task's cache key alone.

A key (``KernelTask.key`` / ``TransformTask.key``, the JSON the cost cache stores) says everything that determines
a timing, so the same function featurises a task about to be priced and a record read back from the cache. Every
task becomes one row of ``len(FEATURE_NAMES)`` floats; features that do not apply to its kind are 0. Sizes and
footprints enter as log2(1 + x) so that trees split them by orders of magnitude. docs/cost_model.md describes each
feature; ``FEATURE_VERSION`` changes whenever a feature changes, so a model trained on other features is refused.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from cost_models.cache import canonical
from search.isa import HOST

FEATURE_VERSION = 2  # 2: oc_padding, width_padding (the conv template pads channels and width)
VECTOR_LANES = HOST.lanes  # as the templates (search.templates.common)
ACCUMULATORS = HOST.accumulators
BYTES = 4  # float32

KINDS = ("conv2d", "depthwise_conv2d", "dense", "layout_transform")

FEATURE_NAMES = (
    # what the task is
    *(f"is_{kind}" for kind in KINDS),
    # workload (transforms: the tensor's logical n, c, h, w)
    "batch", "in_channels", "height", "width", "out_channels", "out_height", "out_width",
    "kernel_h", "kernel_w", "stride_h", "stride_w", "pad_h", "pad_w", "groups",
    "log_flops", "log_bytes", "log_weight_bytes", "arithmetic_intensity",
    # layouts: 1/0 flags and the channel block (0 when unblocked); transforms: source and destination
    "in_nchw", "in_nhwc", "in_block", "out_nchw", "out_nhwc", "out_block",
    "log_in_run", "log_out_run",  # contiguous innermost run of the input / output, in elements
    # schedule knobs and what they imply
    "ic_block", "oc_block", "reg_n", "unroll_kw", "oc_lane_use", "ic_lane_use", "accumulators", "accumulator_use",
    "width_tiles", "oc_padding", "width_padding", "log_parallel_items", "parallel_balance",
    # tile footprints (bytes, log2)
    "log_register_tile", "log_l1_tile", "log_l2_tile",
    # fused epilogue
    "bias", "residual", "relu", "relu6",
)
INDEX = {name: i for i, name in enumerate(FEATURE_NAMES)}


class FeatureError(ValueError):
    """A key that is not a kernel or layout-transform task of this tessera."""


def _log(x: float) -> float:
    return math.log2(1.0 + max(float(x), 0.0))


def _block(layout: str) -> int:
    if layout in ("NCHW", "NHWC"):
        return 0
    if not (layout.startswith("NCHW") and layout.endswith("c") and layout[4:-1].isdigit()):
        raise FeatureError(f"unknown layout {layout!r}")
    return int(layout[4:-1])


def _layout(row: dict[str, float], side: str, layout: str, channels: int, width: int) -> None:
    block = _block(layout)
    row[f"{side}_nchw"] = float(layout == "NCHW")
    row[f"{side}_nhwc"] = float(layout == "NHWC")
    row[f"{side}_block"] = float(block)
    run = width if layout == "NCHW" else channels if layout == "NHWC" else block
    row[f"log_{side}_run"] = _log(run)


def _view_block(layout: str, channels: int) -> int:
    """The channel block a template reads or writes ``layout`` in: 1 for NCHW, all channels for NHWC."""
    return 1 if layout == "NCHW" else channels if layout == "NHWC" else _block(layout)


def _lane_use(block: int) -> float:
    return block / (math.ceil(block / VECTOR_LANES) * VECTOR_LANES)


def _kernel(key: Mapping[str, Any], row: dict[str, float]) -> None:
    wl, knobs = key["workload"], dict(key.get("knobs", []))
    if key["kind"] == "dense":
        n, ci, co = wl["batch"], wl["in_features"], wl["out_features"]
        h = w = oh = ow = kh = kw = sh = sw = groups = 1
        pad_h = pad_w = 0
    else:
        n, ci, h, w, co = wl["batch"], wl["in_channels"], wl["height"], wl["width"], wl["out_channels"]
        (kh, kw), (sh, sw), (dh, dw), groups = wl["kernel"], wl["strides"], wl["dilation"], wl["groups"]
        top, left, bottom, right = wl["padding"]
        pad_h, pad_w = top + bottom, left + right
        oh = (h + pad_h - ((kh - 1) * dh + 1)) // sh + 1
        ow = (w + pad_w - ((kw - 1) * dw + 1)) // sw + 1
    depthwise = key["kind"] == "depthwise_conv2d"
    epilogue = key.get("epilogue", {})
    flops = 2 * n * co * oh * ow * (ci // groups) * kh * kw
    weight_bytes = co * (ci // groups) * kh * kw * BYTES
    out_bytes = n * co * oh * ow * BYTES
    moved = n * ci * h * w * BYTES + weight_bytes + out_bytes * (2 if epilogue.get("residual") else 1)
    in_layout, out_layout = key.get("in_layout", "NC"), key.get("out_layout", "NC")
    row.update(batch=n, in_channels=ci, height=h, width=w, out_channels=co, out_height=oh, out_width=ow,
               kernel_h=kh, kernel_w=kw, stride_h=sh, stride_w=sw, pad_h=pad_h, pad_w=pad_w, groups=groups,
               log_flops=_log(flops), log_bytes=_log(moved), log_weight_bytes=_log(weight_bytes),
               arithmetic_intensity=flops / moved)
    if key["kind"] != "dense":
        _layout(row, "in", in_layout, ci, w)
        _layout(row, "out", out_layout, co, ow)
    if key["kind"] == "dense":
        ib, ob = ci, knobs.get("oc_bn", 1)
    elif depthwise:
        ib = ob = knobs["c_bn"] if "c_bn" in knobs else _view_block(in_layout, ci)
    else:
        ib = _view_block(in_layout, ci)
        ob = knobs["oc_bn"] if "oc_bn" in knobs else _view_block(out_layout, co)
    reg_n = knobs.get("reg_n", 1)
    vectors = math.ceil(ob / VECTOR_LANES)
    oc_blocks, width_tiles = math.ceil(co / max(ob, 1)), math.ceil(ow / reg_n)  # knobs need not divide: padded
    items = n * oc_blocks * oh  # the fused, parallel outer loops
    input_patch = ((reg_n - 1) * sw + kw) * kh * (1 if depthwise else ib)
    row.update(ic_block=ib, oc_block=ob, reg_n=reg_n, unroll_kw=knobs.get("unroll_kw", -1),
               oc_lane_use=_lane_use(ob), ic_lane_use=_lane_use(ib), accumulators=reg_n * vectors,
               accumulator_use=reg_n * vectors / ACCUMULATORS, width_tiles=width_tiles,
               oc_padding=oc_blocks * ob / co - 1, width_padding=width_tiles * reg_n / ow - 1,
               log_parallel_items=_log(items), parallel_balance=items / (math.ceil(items / 2) * 2),
               log_register_tile=_log(reg_n * ob * BYTES),
               log_l1_tile=_log((input_patch + kh * kw * (1 if depthwise else ib) * ob + reg_n * ob) * BYTES),
               log_l2_tile=_log(((ci // groups) * kh * kw * ob + kh * w * ci) * BYTES),
               bias=float(bool(epilogue.get("bias"))), residual=float(bool(epilogue.get("residual"))),
               relu=float(epilogue.get("activation") == "relu"), relu6=float(epilogue.get("activation") == "relu6"))


def _transform(key: Mapping[str, Any], row: dict[str, float]) -> None:
    n, c, h, w = key["shape"]
    size = n * c * h * w * BYTES
    row.update(batch=n, in_channels=c, height=h, width=w, out_channels=c, out_height=h, out_width=w,
               log_bytes=_log(2 * size), parallel_balance=1.0)
    _layout(row, "in", key["src"], c, w)
    _layout(row, "out", key["dst"], c, w)


def parse_key(key: str | Mapping[str, Any]) -> dict[str, Any]:
    """A task key as a dict (keys are canonical JSON strings)."""
    if isinstance(key, str):
        try:
            key = json.loads(key)
        except json.JSONDecodeError as exc:
            raise FeatureError(f"not a task key: {key[:80]!r}") from exc
    if not isinstance(key, Mapping) or key.get("kind") not in KINDS:
        raise FeatureError(f"not a kernel or layout-transform key: {str(key)[:80]!r}")
    return dict(key)


def feature_row(key: str | Mapping[str, Any]) -> np.ndarray:
    """The feature vector of one task key."""
    key = parse_key(key)
    row = dict.fromkeys(FEATURE_NAMES, 0.0)
    row[f"is_{key['kind']}"] = 1.0
    try:
        (_transform if key["kind"] == "layout_transform" else _kernel)(key, row)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise FeatureError(f"malformed {key['kind']} key ({exc!r}): {canonical(key)[:120]}") from exc
    return np.fromiter((float(row[name]) for name in FEATURE_NAMES), dtype=np.float64, count=len(FEATURE_NAMES))


def feature_matrix(keys: Sequence[str | Mapping[str, Any]]) -> np.ndarray:
    """``(len(keys), len(FEATURE_NAMES))`` features, one row per key."""
    if not keys:
        return np.zeros((0, len(FEATURE_NAMES)))
    return np.stack([feature_row(key) for key in keys])


def group_key(key: str | Mapping[str, Any]) -> str:
    """What the candidates of one node share: a kernel's kind, workload and epilogue (its layouts and knobs vary),
    or a transform's tensor shape (its layouts vary). Rankings and top-k picks are made within a group."""
    key = parse_key(key)
    if key["kind"] == "layout_transform":
        return canonical({"kind": key["kind"], "shape": key["shape"]})
    return canonical({"kind": key["kind"], "workload": key["workload"], "epilogue": key.get("epilogue", {})})
