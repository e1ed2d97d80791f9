"""The ``conv2d`` kind: a dense (groups 1) NCHW / OIHW convolution with a constant weight and its fused epilogue,
run by the template in ``search.templates.conv2d`` in any pair of NCHW, NHWC and NCHW{c}c layouts."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from search.bindings import Bindings, plain
from search.kinds.base import Match, TemplateKind
from search.kinds.epilogue import (
    apply_epilogue,
    apply_prologue,
    fused_chain,
    fused_gate,
    fused_prologue,
    packed_bias,
)
from search.kinds.features import Extents, tiled_kernel_features
from search.kinds.registry import register
from search.layouts import view_block
from search.precision import KNOB
from search.relax_exprs import static_shape
from search.templates import conv2d as template
from search.templates import conv2d_dot, int8
from search.templates.workloads import Conv2DWorkload, Epilogue, KernelSpec


def match_conv(bindings: Bindings, index: int, *, depthwise: bool) -> Match | None:
    """A conv2d call at ``index`` in NCHW / OIHW with a constant weight, groups 1 (or depthwise), with its epilogue
    (and, groups 1, the pre-activation or the gate it reads through)."""
    if bindings.op_name(index) != "relax.nn.conv2d":
        return None
    call = bindings.value(index)
    weight, shape, attrs = bindings.const(call.args[1]), static_shape(call.args[0]), call.attrs
    if weight is None or shape is None or len(shape) != 4 or weight.ndim != 4:
        return None
    if (attrs.data_layout, attrs.kernel_layout, attrs.out_layout) != ("NCHW", "OIHW", "NCHW"):
        return None
    groups, channels = int(attrs.groups), shape[1]
    if depthwise != (groups > 1) or (groups > 1 and not groups == channels == weight.shape[0]):
        return None
    chain = fused_chain(bindings, index, residual=True)
    prologue = None if depthwise else fused_prologue(bindings, call.args[0], index)
    data = call.args[0] if prologue is None else prologue.source
    match = chain.match(data, {"weight": weight.astype("float32")})
    conv = {"strides": plain(attrs.strides), "padding": plain(attrs.padding), "dilation": plain(attrs.dilation),
            "groups": groups, "kernel": tuple(weight.shape[2:])}
    gate = None if depthwise or prologue is not None else fused_gate(bindings, call.args[0], index)
    if gate is not None:
        return Match((gate.index, *match.parts), (gate.source, gate.gate, *match.inputs[1:]),
                     {**conv, **match.attrs, "gate": True}, match.params)
    if prologue is None:
        return Match(match.parts, match.inputs, {**conv, **match.attrs}, match.params)
    return Match(prologue.parts + match.parts, match.inputs, {**conv, **match.attrs, "prologue": True},
                 {**match.params, "scale": prologue.scale, "shift": prologue.shift})


def conv_workload(op) -> Conv2DWorkload:
    """The workload of a conv2d or depthwise conv2d op."""
    n, c, h, w = op.input_shapes[0]
    a = op.attrs
    return Conv2DWorkload(n, c, h, w, op.shape[1], a["kernel"], a["strides"], a["padding"], a["dilation"], a["groups"])


def conv_reference(x: np.ndarray, w: np.ndarray, wl: Conv2DWorkload) -> np.ndarray:
    """Direct NCHW / OIHW convolution in float64, one kernel tap at a time (groups 1 or depthwise)."""
    top, left, bottom, right = wl.padding
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    (sh, sw), (dh, dw) = wl.strides, wl.dilation
    out = np.zeros(wl.out_shape, dtype=np.float64)
    for i in range(wl.kernel[0]):
        for j in range(wl.kernel[1]):
            rows = slice(i * dh, i * dh + sh * (wl.out_height - 1) + 1, sh)
            cols = slice(j * dw, j * dw + sw * (wl.out_width - 1) + 1, sw)
            tap = xp[:, :, rows, cols]
            if wl.is_depthwise:
                out += tap * w[None, :, 0, i, j, None, None]
            else:
                out += np.einsum("nchw,oc->nohw", tap, w[:, :, i, j])
    return out


def conv_extents(wl: Conv2DWorkload) -> Extents:
    """The feature extents of a convolution."""
    top, left, bottom, right = wl.padding
    return Extents(wl.batch, wl.in_channels, wl.height, wl.width, wl.out_channels, wl.out_height, wl.out_width,
                   wl.kernel, wl.strides, (top + bottom, left + right), wl.groups)


class ConvLike(TemplateKind):
    """What conv2d and depthwise conv2d share: the workload, shapes, random operands, numpy reference, bias."""

    workload_type = Conv2DWorkload
    epilogues = (Epilogue(bias=False), Epilogue(activation="relu6"), Epilogue(True, True, "relu"))

    def workload(self, op) -> Conv2DWorkload:
        return conv_workload(op)

    def in_shape(self, workload: Conv2DWorkload) -> tuple[int, ...]:
        return workload.in_shape

    def out_shape(self, workload: Conv2DWorkload) -> tuple[int, ...]:
        return workload.out_shape

    def random_params(self, workload: Conv2DWorkload, epilogue: Epilogue, rng: np.random.Generator
                      ) -> dict[str, np.ndarray]:
        wl = workload
        params = {"weight": rng.uniform(-1, 1, (wl.out_channels, wl.in_channels // wl.groups, *wl.kernel))}
        if epilogue.bias:
            params["bias"] = rng.uniform(-1, 1, wl.out_channels)
        if epilogue.prologue:
            params["scale"], params["shift"] = rng.uniform(0, 2, wl.in_channels), rng.uniform(-1, 1, wl.in_channels)
        return params

    def reference(self, spec: KernelSpec, inputs: Sequence[np.ndarray], params: dict[str, np.ndarray]
                  ) -> np.ndarray:
        data, *residual = inputs  # the gate, if the epilogue has one, then the residual, if it adds one
        if spec.epilogue.gate:
            gate, *residual = residual
            data = data * gate
        if spec.epilogue.prologue:
            data = apply_prologue(data, params["scale"], params["shift"])
        acc = conv_reference(data, params["weight"], spec.workload)
        return apply_epilogue(acc, spec.epilogue, params.get("bias"), *residual)


@register
class Conv2DKind(ConvLike):
    """``act(conv2d(data, weight) + bias + residual)``, groups 1, the data read through a pre-activation or a
    gate where the graph has one."""

    name = "conv2d"
    template = template
    prologue = True
    epilogues = (Epilogue(bias=False), Epilogue(activation="relu6", prologue=True), Epilogue(activation="relu6"),
                 Epilogue(True, True, "relu"))
    examples = (
        Conv2DWorkload(1, 8, 7, 6, 16, (3, 3), (1, 1), (1, 1, 1, 1)),
        Conv2DWorkload(1, 8, 5, 17, 12, (3, 3), (1, 1), (1, 1, 1, 1)),  # 12 channels, 17 wide: knobs pad both
        Conv2DWorkload(1, 16, 6, 7, 32, (3, 3), (1, 1), (1, 1, 1, 1)),  # Winograd settings; 7 wide: tiles cropped
    )

    def match(self, bindings: Bindings, index: int) -> Match | None:
        return match_conv(bindings, index, depthwise=False)

    def int8_capable(self, op) -> bool:
        """Groups 1, without a prologue or gate (``search.templates.conv2d_dot``)."""
        return conv2d_dot.supports(self.spec(op, "NCHW", "NCHW", int8.settings_on_any_cpu()[0]))

    def activations(self, spec: KernelSpec) -> tuple[tuple[str, tuple[int, ...]], ...]:
        data, *residual = super().activations(spec)
        wl = spec.workload
        gate = ((spec.in_layout, (wl.batch, wl.in_channels, 1, 1)),) if spec.epilogue.gate else ()
        return (data, *gate, *residual)

    def pack(self, spec: KernelSpec, params: dict[str, np.ndarray]) -> list[np.ndarray]:
        """The weights (bf16: as bf16), the bias and the prologue's parameters; an int8 setting's from the range of
        its input (``params[int8.RANGE]``): ``search.templates.conv2d_dot.pack_int8``."""
        self.check_spec(spec)
        if int8.is_int8(spec.knobs):
            return conv2d_dot.pack_int8(spec, np.asarray(params["weight"]), params.get("bias"),
                                        int8.input_quantisation(params))
        prologue = ("scale", "shift") if spec.epilogue.prologue else ()
        return [template.pack_weight(spec, np.asarray(params["weight"])), *packed_bias(spec, params),
                *(np.ascontiguousarray(params[name], dtype=spec.workload.dtype) for name in prologue)]

    def features(self, spec: KernelSpec) -> dict[str, float]:
        if int8.is_int8(spec.knobs):
            raise NotImplementedError("int8 convolutions have no cost-model features yet: they are priced measured")
        wl, knobs = spec.workload, dict(spec.knobs)
        ib = view_block(spec.in_layout, wl.in_channels)
        ob = knobs["oc_bn"] if "oc_bn" in knobs else view_block(spec.out_layout, wl.out_channels)
        placement = knobs.get("prologue", template.PER_ROW)
        prologue = 1 + placement if spec.epilogue.reads_through else 0
        if "winograd" in knobs:  # the loop order: rows outermost 1, output channel blocks 0
            rows = -1
        elif spec.epilogue.reads_through:
            rows = int(placement == template.PER_ROW)
        else:
            rows = knobs.get("rows", 0)
        return {**tiled_kernel_features(spec, conv_extents(wl), ib, ob), "winograd": float(knobs.get("winograd", 0)),
                "bf16": float(knobs.get(KNOB, 0)), "prologue": float(prologue), "gate": float(spec.epilogue.gate),
                "rows_outer": float(rows)}
