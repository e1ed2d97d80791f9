"""What the rewriter binds to the frontend's variables besides emitted Relax variables and numpy constants.

Layers and clips stay *pending* (not emitted yet) while a following bias, BatchNorm, per-channel scale or second
bound can still fold into them; ``Items`` stands for a tuple-valued binding, ``Unusable`` for an item that may not
be read. A rule raises ``OutsideVocabulary`` for a call it cannot put into the vocabulary, which is then re-emitted
as it is; what cannot be re-emitted at all raises ``Unsupported``, which the loader turns into ``SearchError``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np
from tvm import relax

from search.relax_exprs import static_shape


class Unsupported(Exception):
    """The frontend's output holds something the rewriter cannot re-emit."""


class OutsideVocabulary(Exception):  # noqa: N818 (a signal to the rewriter, not an error)
    """A rule's call is outside the zoo's op vocabulary: the rewriter re-emits it unchanged."""


@dataclass(frozen=True)
class PendingLayer(ABC):
    """A conv2d or dense layer with its bias, both float64, not emitted yet."""

    data: relax.Var
    weight: np.ndarray
    bias: np.ndarray  # (out,)

    kind: ClassVar[str]  # name prefix of the emitted variables
    rank: ClassVar[int]  # of the input and output activations; channels are on axis 1
    out_axis: ClassVar[int]  # of the weight

    @property
    def channels(self) -> int:
        return len(self.bias)

    def folded(self, scale: np.ndarray | None = None, shift: np.ndarray | None = None) -> PendingLayer:
        """This layer followed by ``* scale + shift`` per output channel (``None`` leaves that step out)."""
        weight, bias = self.weight, self.bias
        if scale is not None:
            axes = [1] * weight.ndim
            axes[self.out_axis] = -1
            weight, bias = weight * scale.reshape(axes), bias * scale
        if shift is not None:
            bias = bias + shift
        return replace(self, weight=weight, bias=bias)

    @abstractmethod
    def call(self) -> relax.Call:
        """The layer without its bias, on float32 weights."""

    def emit(self, bb: relax.BlockBuilder, name: str) -> relax.Var:
        """The layer and its bias add, emitted into ``bb`` as ``name`` and ``name_bias``."""
        out = bb.emit(self.call(), name_hint=name)
        return bb.emit(relax.op.add(out, channel_constant(self.bias, self.rank)), name_hint=f"{name}_bias")


@dataclass(frozen=True)
class PendingConv(PendingLayer):
    """weight OIHW; ``attrs`` are the frontend's Conv2DAttrs (strides, padding, dilation, groups)."""

    attrs: Any

    kind: ClassVar[str] = "conv"
    rank: ClassVar[int] = 4
    out_axis: ClassVar[int] = 0

    def call(self) -> relax.Call:
        return relax.op.nn.conv2d(
            self.data,
            relax.const(self.weight.astype(np.float32)),
            strides=[int(s) for s in self.attrs.strides],
            padding=[int(p) for p in self.attrs.padding],
            dilation=[int(d) for d in self.attrs.dilation],
            groups=int(self.attrs.groups),
        )


@dataclass(frozen=True)
class PendingBlocks(PendingLayer):
    """A transposed convolution whose kernel equals its stride, weight IOHW: each input pixel writes its own kH x kW
    block of the output, so it is a 1x1 convolution to out * kH * kW channels (channel (o, i, j): pixel (i, j) of
    output channel o's block) whose channels are then put in place (depth to space: reshape, permute_dims,
    reshape)."""

    kind: ClassVar[str] = "conv"
    rank: ClassVar[int] = 4
    out_axis: ClassVar[int] = 1

    def call(self) -> relax.Call:
        ci, co, kh, kw = self.weight.shape
        pointwise = self.weight.transpose(1, 2, 3, 0).reshape(co * kh * kw, ci, 1, 1)
        return relax.op.nn.conv2d(self.data, relax.const(pointwise.astype(np.float32)))

    def emit(self, bb: relax.BlockBuilder, name: str) -> relax.Var:
        _, co, kh, kw = self.weight.shape
        n, _, h, w = static_shape(self.data)
        out = bb.emit(self.call(), name_hint=name)
        out = bb.emit(relax.op.add(out, channel_constant(np.repeat(self.bias, kh * kw), self.rank)),
                      name_hint=f"{name}_bias")
        blocks = bb.emit(relax.op.reshape(out, (n, co, kh, kw, h, w)), name_hint=f"{name}_blocks")
        placed = bb.emit(relax.op.permute_dims(blocks, [0, 1, 4, 2, 5, 3]), name_hint=f"{name}_placed")
        return bb.emit(relax.op.reshape(placed, (n, co, h * kh, w * kw)), name_hint=f"{name}_space")


@dataclass(frozen=True)
class PendingDense(PendingLayer):
    """weight (in, out), applied as ``R.matmul(x, W)``."""

    kind: ClassVar[str] = "dense"
    rank: ClassVar[int] = 2
    out_axis: ClassVar[int] = 1

    def call(self) -> relax.Call:
        return relax.op.matmul(self.data, relax.const(self.weight.astype(np.float32)))


@dataclass(frozen=True)
class PendingClip:
    data: relax.Var
    low: float = -math.inf
    high: float = math.inf


@dataclass(frozen=True)
class Items:
    """A tuple-valued binding (batch_norm, dropout): only the listed items may be read."""

    items: dict[int, Any] = field(default_factory=dict)
    producer: str = ""


@dataclass(frozen=True)
class Unusable:
    reason: str




def shape_of(var: relax.Var) -> tuple[int, ...]:
    """The static shape of a tensor variable; ``OutsideVocabulary`` if it has none."""
    shape = static_shape(var)
    if shape is None:
        raise OutsideVocabulary
    return shape


def per_channel(array: np.ndarray, channels: int, rank: int) -> np.ndarray | None:
    """``array`` as a (channels,) vector if it broadcasts along axis 1 only of a rank-``rank`` tensor, else None."""
    if array.ndim > rank:
        return None
    full = (1,) * (rank - array.ndim) + array.shape
    if any(d != 1 for i, d in enumerate(full) if i != 1) or full[1] not in (1, channels):
        return None
    return np.broadcast_to(array.reshape(-1) if array.size > 1 else array.reshape(1), (channels,)).astype(np.float64)


def channel_constant(vector: np.ndarray, rank: int) -> relax.Constant:
    """A (channels,) vector as a float32 constant that broadcasts along axis 1 of a rank-``rank`` tensor."""
    return relax.const(vector.astype(np.float32).reshape((1, -1) + (1,) * (rank - 2)))
