"""The ``add`` kind: the sum of 4-D activations of one shape (a residual no convolution absorbed), in one layout."""

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
class AddKind(LayoutKind):
    """``add(a, b)`` of two activations of the same shape (a broadcasting add is a fixed op)."""

    name = "add"
    examples = (((1, 16, 3, 5), (1, 16, 3, 5)),)

    def match(self, bindings: Bindings, index: int) -> Match | None:
        var, inputs = bindings.var(index), bindings.activations(index)
        if bindings.op_name(index) != "relax.add" or len(tensor_shape(var, var.name)) != 4 or len(inputs) < 2:
            return None
        if len({tensor_shape(v, v.name) for v in inputs}) != 1:
            return None
        return Match((index,), tuple(inputs))

    def emit(self, inputs: Sequence[relax.Expr], stored: Layout, attrs: Mapping[str, Any]) -> relax.Expr:
        return relax.op.add(*inputs)

    def reference(self, inputs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
        return np.sum(inputs, axis=0)
