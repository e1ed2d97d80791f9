"""The ``concat`` kind: channel concatenation of 4-D activations, in one layout for every input and the output."""

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
class ConcatKind(LayoutKind):
    """``concat([...], axis=1)`` of two or more activations (every input converts to the node's layout on its own;
    inputs are not forced to the first input's layout). In place, every producer writes its slice of the output. It
    moves values only, so it also runs on bf16 values."""

    name = "concat"
    in_place = True
    moves_values = True
    examples = (((1, 8, 3, 5), (1, 16, 3, 5)), ((1, 4, 2, 2), (1, 12, 2, 2), (1, 8, 2, 2)),
                ((1, 32, 2, 3), (1, 16, 2, 3)))  # the last also in NCHW16c.bf16 on a bf16 host

    def match(self, bindings: Bindings, index: int) -> Match | None:
        var, inputs = bindings.var(index), bindings.activations(index)
        if bindings.op_name(index) != "relax.concat" or len(tensor_shape(var, var.name)) != 4 or len(inputs) < 2:
            return None
        if int(bindings.value(index).attrs.axis) not in (1, -3):
            return None
        return Match((index,), tuple(inputs))

    def output_shape(self, shapes: Sequence[tuple[int, ...]], attrs: Mapping[str, Any]) -> tuple[int, ...]:
        n, _, h, w = shapes[0]
        return (n, sum(shape[1] for shape in shapes), h, w)

    def emit(self, inputs: Sequence[relax.Expr], stored: Layout, attrs: Mapping[str, Any]) -> relax.Expr:
        return relax.op.concat(list(inputs), axis=stored.stored_axis("C"))

    def reference(self, inputs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
        return np.concatenate(inputs, axis=1)
