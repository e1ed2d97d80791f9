"""YOLOv8 detectors: Ultralytics' ``yolov8.yaml`` at the ``n`` and ``s`` scales (depth 0.33, widths 0.25 and 0.50,
at most 1024 channels), 80 classes, ``reg_max`` 16, as its ONNX export computes them.

- ``Conv`` (``model_{i}_conv``, ``..._cv1_conv``, ...): conv2d + BatchNorm (eps 1e-3, folded) + ``R.nn.silu``.
- ``C2f``: ``cv1`` (1x1) to 2c channels, ``R.strided_slice`` into two halves (``_split_0``, ``_split_1``), n
  Bottlenecks on the last half (``m_{j}_cv1``, ``m_{j}_cv2``: 3x3 Convs; a residual add ``m_{j}_add`` in the
  backbone, none in the neck), the halves and every Bottleneck's output concatenated, ``cv2`` (1x1).
- ``SPPF`` (``model_9``): ``cv1`` (1x1, half the channels), three chained 5x5 stride-1 max pools (``m``, ``m_1``,
  ``m_2``), concatenation, ``cv2`` (1x1).
- Neck: nearest 2x upsampling (``R.image.resize2d``, ``model_10``, ``model_13``), channel concats, C2f, 3x3 stride-2
  Convs.
- ``Detect`` (``model_22``) on strides 8, 16, 32: per scale a box branch (two 3x3 Convs, a 1x1 conv with bias to
  4 x 16) and a class branch (two 3x3 Convs, a 1x1 conv with bias to 80), concatenated and reshaped to
  (N, 144, H*W); the three joined on the last axis (``R.concat(axis=2)``) to (N, 144, A); the DFL on the box
  channels: reshape to (N, 4, 16, A), ``R.permute_dims`` to (N, 16, 4, A), ``R.nn.softmax`` over the 16 bins and the
  expectation as a fixed 1x1 conv with weights 0..15 (``model_22_dfl_conv``, a zero bias); the distances decoded
  against the anchor centres into (cx, cy, w, h) and scaled by the strides (``R.subtract``, ``R.add``,
  ``R.multiply`` by constants; the division by 2 as a multiply by 0.5), and ``R.sigmoid`` of the class logits.

``main`` returns one (N, 84, A) tensor, boxes (cx, cy, w, h in input pixels) then class probabilities, A = 8400 at
640x640; non-maximum suppression is left out. conv2d: 64 (63 + the DFL's); no dense. Image sizes must be multiples
of 32.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from tvm import relax

from search.errors import SearchError
from search.zoo.activations import sigmoid_np
from search.zoo.layers import Net, Network, Tensor, conv2d_np

CLASSES = 80
REG_MAX = 16
STRIDES = (8, 16, 32)


@dataclass(frozen=True)
class Scale:
    """Ultralytics' model scale: ``depth`` multiplies the C2f repeats, ``width`` the channels (capped at
    ``max_channels`` first, rounded up to a multiple of 8)."""

    depth: float
    width: float
    max_channels: int = 1024

    def channels(self, c: int) -> int:
        return math.ceil(min(c, self.max_channels) * self.width / 8) * 8

    def repeats(self, n: int) -> int:
        return max(round(n * self.depth), 1) if n > 1 else n


def _conv(net: Net, x: Tensor, c: int, k: int, *, name: str, stride: int = 1) -> Tensor:
    return net.conv(x, c, k, stride=stride, padding=k // 2, act="silu", name=f"{name}_conv")


def _c2f(net: Net, x: Tensor, c2: int, n: int, *, shortcut: bool, name: str) -> Tensor:
    c = c2 // 2
    y = _conv(net, x, 2 * c, 1, name=f"{name}_cv1")
    parts = [net.slice(y, 1, 0, c, name=f"{name}_split_0"), net.slice(y, 1, c, 2 * c, name=f"{name}_split_1")]
    for j in range(n):
        h = _conv(net, parts[-1], c, 3, name=f"{name}_m_{j}_cv1")
        h = _conv(net, h, c, 3, name=f"{name}_m_{j}_cv2")
        parts.append(net.add(parts[-1], h, name=f"{name}_m_{j}_add") if shortcut else h)
    return _conv(net, net.concat(parts, name=f"{name}_cat"), c2, 1, name=f"{name}_cv2")


def _sppf(net: Net, x: Tensor, c2: int, *, name: str) -> Tensor:
    parts = [_conv(net, x, x.channels // 2, 1, name=f"{name}_cv1")]
    for j in range(3):
        parts.append(net.max_pool(parts[-1], 5, 1, 2, name=f"{name}_m" + (f"_{j}" if j else "")))
    return _conv(net, net.concat(parts, name=f"{name}_cat"), c2, 1, name=f"{name}_cv2")


def anchors(features: Sequence[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Anchor centres (1, 2, A) in grid units (x, y; 0.5 the first cell's centre) and strides (1, 1, A) of feature
    maps of (height, width) at ``STRIDES``, row-major per map, as Ultralytics' ``make_anchors``."""
    points, strides = [], []
    for (h, w), stride in zip(features, STRIDES):
        sy, sx = np.meshgrid(np.arange(h) + 0.5, np.arange(w) + 0.5, indexing="ij")
        points.append(np.stack([sx.reshape(-1), sy.reshape(-1)]))
        strides.append(np.full(h * w, stride))
    return (np.concatenate(points, axis=1)[None].astype(np.float32),
            np.concatenate(strides)[None, None].astype(np.float32))


def _const(net: Net, x: Tensor, op, value: np.ndarray, name: str, reference) -> Tensor:
    """``op(x, value)`` with a constant ``value``."""
    return net.apply(op(x.var, relax.const(value)), name, lambda s: reference(s, value), x)


def _dfl(net: Net, box: Tensor, *, name: str) -> Tensor:
    """Distances (N, 4, A): the expected bin of the softmax over each side's ``REG_MAX`` bins."""
    n, _, a = box.shape
    x = net.reshape(box, (n, 4, REG_MAX, a), name=f"{name}_view")
    x = net.softmax(net.permute(x, (0, 2, 1, 3), name=f"{name}_transpose"), 1, name=f"{name}_softmax")
    weight = np.arange(REG_MAX, dtype=np.float32).reshape(1, REG_MAX, 1, 1)
    x = net.apply(relax.op.nn.conv2d(x.var, relax.const(weight)), f"{name}_conv",
                  lambda s: conv2d_np(s, weight.astype(s.dtype), (1, 1), (0, 0, 0, 0), 1), x)
    x = _const(net, x, relax.op.add, np.zeros((1, 1, 1, 1), np.float32), f"{name}_conv_bias", np.add)
    return net.reshape(x, (n, 4, a), name=name)


def _detect(net: Net, features: list[Tensor], *, name: str) -> Tensor:
    c2 = max(16, features[0].channels // 4, 4 * REG_MAX)
    c3 = max(features[0].channels, min(CLASSES, 100))
    flat = []
    for i, f in enumerate(features):
        branches = []
        for branch, width, out in (("cv2", c2, 4 * REG_MAX), ("cv3", c3, CLASSES)):
            y = _conv(net, f, width, 3, name=f"{name}_{branch}_{i}_0")
            y = _conv(net, y, width, 3, name=f"{name}_{branch}_{i}_1")
            branches.append(net.conv(y, out, 1, bn=False, bias=True, act=None, name=f"{name}_{branch}_{i}_2"))
        y = net.concat(branches, name=f"{name}_cat_{i}")
        flat.append(net.reshape(y, (0, y.channels, y.shape[2] * y.shape[3]), name=f"{name}_view_{i}"))
    x = net.concat(flat, axis=2, name=f"{name}_cat")
    distances = _dfl(net, net.slice(x, 1, 0, 4 * REG_MAX, name=f"{name}_box"), name=f"{name}_dfl")
    centres, strides = anchors([f.shape[2:] for f in features])
    lt = net.slice(distances, 1, 0, 2, name=f"{name}_lt")
    rb = net.slice(distances, 1, 2, 4, name=f"{name}_rb")
    x1y1 = net.apply(relax.op.subtract(relax.const(centres), lt.var), f"{name}_x1y1", lambda s: centres - s, lt)
    x2y2 = _const(net, rb, relax.op.add, centres, f"{name}_x2y2", np.add)
    centre = _const(net, net.add(x1y1, x2y2, name=f"{name}_sum"), relax.op.multiply, np.float32(0.5),
                    f"{name}_cxy", np.multiply)
    size = net.apply(relax.op.subtract(x2y2.var, x1y1.var), f"{name}_wh", np.subtract, x2y2, x1y1)
    box = net.concat([centre, size], name=f"{name}_xywh")
    box = _const(net, box, relax.op.multiply, strides, f"{name}_dbox", np.multiply)
    cls = net.slice(x, 1, 4 * REG_MAX, 4 * REG_MAX + CLASSES, name=f"{name}_cls")
    cls = net.apply(relax.op.sigmoid(cls.var), f"{name}_sigmoid", sigmoid_np, cls)
    return net.concat([box, cls], name=name)


def _yolov8(scale: Scale):
    def body(net: Net, x: Tensor) -> Tensor:
        if x.shape[2] % 32 or x.shape[3] % 32:
            raise SearchError(f"YOLOv8 takes images whose sides are multiples of 32, got {x.shape[2]}x{x.shape[3]}")
        ch, n = scale.channels, scale.repeats
        x = _conv(net, x, ch(64), 3, stride=2, name="model_0")
        x = _conv(net, x, ch(128), 3, stride=2, name="model_1")
        x = _c2f(net, x, ch(128), n(3), shortcut=True, name="model_2")
        x = _conv(net, x, ch(256), 3, stride=2, name="model_3")
        p3 = _c2f(net, x, ch(256), n(6), shortcut=True, name="model_4")
        x = _conv(net, p3, ch(512), 3, stride=2, name="model_5")
        p4 = _c2f(net, x, ch(512), n(6), shortcut=True, name="model_6")
        x = _conv(net, p4, ch(1024), 3, stride=2, name="model_7")
        x = _c2f(net, x, ch(1024), n(3), shortcut=True, name="model_8")
        p5 = _sppf(net, x, ch(1024), name="model_9")
        x = net.concat([net.upsample(p5, 2, name="model_10"), p4], name="model_11")
        h4 = _c2f(net, x, ch(512), n(3), shortcut=False, name="model_12")
        x = net.concat([net.upsample(h4, 2, name="model_13"), p3], name="model_14")
        h3 = _c2f(net, x, ch(256), n(3), shortcut=False, name="model_15")
        x = net.concat([_conv(net, h3, ch(256), 3, stride=2, name="model_16"), h4], name="model_17")
        h4 = _c2f(net, x, ch(512), n(3), shortcut=False, name="model_18")
        x = net.concat([_conv(net, h4, ch(512), 3, stride=2, name="model_19"), p5], name="model_20")
        h5 = _c2f(net, x, ch(1024), n(3), shortcut=False, name="model_21")
        return _detect(net, [h3, h4, h5], name="model_22")

    return body


yolov8n = Network(_yolov8(Scale(depth=0.33, width=0.25)), calibration_size=128, bn_eps=1e-3)
yolov8s = Network(_yolov8(Scale(depth=0.33, width=0.50)), calibration_size=128, bn_eps=1e-3)
