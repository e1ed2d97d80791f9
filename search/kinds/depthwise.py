"""The ``depthwise_conv2d`` kind: a conv2d with groups == in == out channels and its fused epilogue, run by the
template in ``search.templates.depthwise`` from any of NHWC and NCHW{c}c to any of them (the conversion done on the
way), or NCHW to NCHW; on a host with bf16 instructions also on bf16 values (bf16 weights, fp32 sums), on one with
int8 dot products also in int8 (calibrated: ``search.templates.int8``)."""

from __future__ import annotations

import numpy as np

from search.bindings import Bindings
from search.kinds.base import Match
from search.kinds.conv2d import ConvLike, conv_extents, match_conv
from search.kinds.epilogue import packed_bias
from search.kinds.features import tiled_kernel_features
from search.kinds.registry import register
from search.layouts import nearest_layout, view_block
from search.precision import KNOB
from search.templates import depthwise as template
from search.templates import int8
from search.templates.workloads import Conv2DWorkload, KernelSpec


@register
class DepthwiseConv2DKind(ConvLike):
    """``act(depthwise_conv2d(data, weight) + bias + residual)``."""

    name = "depthwise_conv2d"
    template = template
    examples = (
        Conv2DWorkload(1, 16, 9, 8, 16, (3, 3), (1, 1), (1, 1, 1, 1), groups=16),
        Conv2DWorkload(1, 8, 9, 9, 8, (3, 3), (2, 2), (1, 0, 1, 0), groups=8),
    )

    def match(self, bindings: Bindings, index: int) -> Match | None:
        return match_conv(bindings, index, depthwise=True)

    def baseline(self, op, name: str) -> tuple[str, str]:
        shared = nearest_layout(name, op.shape[1])
        return shared, shared

    def int8_capable(self, op) -> bool:
        """Without a prologue (``search.templates.depthwise``)."""
        return not self.epilogue(op).reads_through

    def pack(self, spec: KernelSpec, params: dict[str, np.ndarray]) -> list[np.ndarray]:
        """The weights (bf16 values: rounded to bf16) and the bias; an int8 setting's from the range of its input
        (``params[int8.RANGE]``): ``search.templates.depthwise.pack_int8``."""
        self.check_spec(spec)
        if int8.is_int8(spec.knobs):
            return template.pack_int8(spec, np.asarray(params["weight"]), params.get("bias"),
                                      int8.input_quantisation(params))
        return [template.pack_weight(spec, np.asarray(params["weight"])), *packed_bias(spec, params)]

    def features(self, spec: KernelSpec) -> dict[str, float]:
        if int8.is_int8(spec.knobs):
            raise NotImplementedError("int8 depthwise convolutions have no cost-model features yet: they are priced "
                                      "measured")
        wl, block = spec.workload, template.compute_block(spec)
        run = min(view_block(spec.in_layout, wl.in_channels), block)  # the input's contiguous channels per vector
        rows = template.resolved_knobs(spec).get("rows", -1)  # a default the setting leaves out counts too
        return {**tiled_kernel_features(spec, conv_extents(wl), run, block, depthwise=True), "rows_outer": float(rows),
                "bf16": float(dict(spec.knobs).get(KNOB, 0))}
