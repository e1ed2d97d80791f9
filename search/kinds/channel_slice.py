"""The ``channel_slice`` kind: a range of an activation's channels (YOLOv8's C2f blocks split their first
convolution's output in two halves), taken in whatever layout the plan gives it where the range is whole channel
blocks, so that a blocked plan needs no transform to NCHW and back around it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from tvm import relax

from search.bindings import Bindings, tensor_shape
from search.kinds.base import LayoutKind, Match
from search.kinds.registry import register
from search.layouts import Layout, candidate_layouts, layout, nearest_layout


def _ints(expr) -> list[int] | None:
    """The integers of a static ``strided_slice`` operand (a tuple of integer immediates), or None."""
    fields = expr.fields if isinstance(expr, relax.Tuple) else ()
    values = [getattr(field, "value", None) for field in fields]
    return [int(v) for v in values] if fields and all(isinstance(v, int) for v in values) else None


@register
class ChannelSliceKind(LayoutKind):
    """``strided_slice(x, axes=[1], begin=[b], end=[e])`` of a 4-D activation with unit stride: channels ``b`` to
    ``e`` (attributes ``begin``, ``end``). A blocked layout runs it only where its block divides ``b`` and ``e``: then
    it is a slice of whole blocks. It moves values only, so it also runs on bf16 values."""

    name = "channel_slice"
    attributes = ("begin", "end")
    moves_values = True
    examples = (((1, 24, 2, 4),), ((1, 64, 2, 2),))  # channels 12 to 24: NCHW, NHWC, NCHW4c; 32 to 64: all

    def match(self, bindings: Bindings, index: int) -> Match | None:
        if bindings.op_name(index) != "relax.strided_slice":
            return None
        var, inputs = bindings.var(index), bindings.activations(index)
        if len(inputs) != 1:
            return None
        shape, source = tensor_shape(var, var.name), tensor_shape(inputs[0], inputs[0].name)
        if len(shape) != 4 or len(source) != 4 or shape[0] != source[0] or shape[2:] != source[2:]:
            return None
        args = bindings.value(index).args
        axes, begin, end = (_ints(arg) for arg in args[1:4])
        strides = _ints(args[4]) if len(args) > 4 else [1]
        if axes not in ([1], [-3]) or begin is None or end is None or strides != [1]:
            return None
        first = begin[0] + source[1] if begin[0] < 0 else begin[0]
        if first < 0 or first + shape[1] > source[1]:
            return None
        return Match((index,), (inputs[0],), {"begin": first, "end": first + shape[1]})

    def output_shape(self, shapes: Sequence[tuple[int, ...]], attrs: Mapping[str, Any]) -> tuple[int, ...]:
        n, _, h, w = shapes[0]
        return (n, attrs["end"] - attrs["begin"], h, w)

    def example_attrs(self, shapes: Sequence[tuple[int, ...]]) -> dict[str, Any]:
        channels = shapes[0][1]
        return {"begin": channels // 2, "end": channels}

    def layout_pairs(self, op) -> list[tuple[str, str]]:
        begin, source = op.attrs["begin"], op.input_shapes[0]
        return self.with_bf16_values([(name, name) for name in candidate_layouts(op.shape[1])
                                      if layout(name).fits(source) and begin % (layout(name).block() or 1) == 0])

    def baseline(self, op, name: str) -> tuple[str, str]:
        shared = nearest_layout(name, op.shape[1], op.input_shapes[0][1], op.attrs["begin"])
        return shared, shared

    def emit(self, inputs: Sequence[relax.Expr], stored: Layout, attrs: Mapping[str, Any]) -> relax.Expr:
        block = stored.block() or 1
        return relax.op.strided_slice(inputs[0], axes=[stored.stored_axis("C")], begin=[attrs["begin"] // block],
                                      end=[attrs["end"] // block], assume_inbound=True)

    def reference(self, inputs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
        return inputs[0][:, attrs["begin"]:attrs["end"]]
