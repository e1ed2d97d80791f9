"""The ``channel_gate`` kind: an activation multiplied by a per-channel gate computed from it at run time (squeeze-and-
excitation's last step, as in EfficientNet and MobileNetV3), in one layout for both and the output."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from tvm import relax

from search.bindings import Bindings, tensor_shape
from search.kinds.base import LayoutKind, Match
from search.kinds.registry import register
from search.layouts import Layout


@register
class ChannelGateKind(LayoutKind):
    """``multiply(x, gate)`` of a 4-D activation x (N, C, H, W) and an activation gate (N, C, 1, 1), either order;
    any layout stores the gate as one value per channel, so the product broadcasts in every layout."""

    name = "channel_gate"
    examples = (((1, 16, 3, 5), (1, 16, 1, 1)),)

    def match(self, bindings: Bindings, index: int) -> Match | None:
        var, inputs = bindings.var(index), bindings.activations(index)
        if bindings.op_name(index) != "relax.multiply" or len(inputs) != 2:
            return None
        shape = tensor_shape(var, var.name)
        if len(shape) != 4 or shape[2] * shape[3] == 1:
            return None
        gate = (shape[0], shape[1], 1, 1)
        shapes = [tensor_shape(v, v.name) for v in inputs]
        for x, g in ((0, 1), (1, 0)):
            if shapes[x] == shape and shapes[g] == gate:
                return Match((index,), (inputs[x], inputs[g]))
        return None

    def emit(self, inputs: Sequence[relax.Expr], stored: Layout, attrs: Mapping[str, Any]) -> relax.Expr:
        return relax.op.multiply(*inputs)

    def reference(self, inputs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
        return inputs[0] * inputs[1]
