"""The ``softmax`` and ``layer_norm`` kinds: a reduction along the innermost axis of an activation of any rank (a
transformer's attention scores, its hidden states), run by the template in ``search.templates.rows`` on the data
flattened to (rows, cols); export reshapes around it for free.

Like ``batch_matmul`` they are ``layout_free``: their tensors take no part in the activation layout decisions, and
they read and write their values as fixed ops do. Each has one layout pair and a schedule knob, so that the cost
problem prices the time the network spends in them instead of leaving it out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from search.bindings import Bindings, tensor_shape
from search.kinds.base import Match, TemplateKind
from search.kinds.features import BYTES, log_size
from search.kinds.registry import register
from search.templates import rows as template
from search.templates.workloads import Epilogue, KernelSpec, LayerNormWorkload, RowWorkload, SoftmaxWorkload


class RowKind(TemplateKind):
    """A reduction along the last axis, flattened to (rows, cols) in the template's one layout."""

    template = template
    layout_free = True
    epilogues = (Epilogue(bias=False),)

    def stored_layouts(self, op) -> tuple[tuple[str, ...], str]:
        return (template.LAYOUT,), template.LAYOUT

    def baseline(self, op, name: str) -> tuple[str, str]:
        return template.LAYOUT, template.LAYOUT

    @staticmethod
    def rows_cols(op) -> tuple[int, int]:
        """The op's rows (the product of its leading dimensions) and the length of each."""
        *rows, cols = op.shape
        return int(np.prod(rows)), int(cols)

    def in_shape(self, workload: RowWorkload) -> tuple[int, ...]:
        return (workload.rows, workload.cols)

    def out_shape(self, workload: RowWorkload) -> tuple[int, ...]:
        return (workload.rows, workload.cols)

    def features(self, spec: KernelSpec) -> dict[str, float]:
        wl = spec.workload
        weight_bytes = 2 * wl.cols * BYTES if isinstance(wl, LayerNormWorkload) else 0
        moved = 2 * wl.rows * wl.cols * BYTES + weight_bytes
        return {"batch": float(wl.rows), "in_channels": float(wl.cols), "out_channels": float(wl.cols),
                "height": 1.0, "width": 1.0, "out_height": 1.0, "out_width": 1.0,
                "log_flops": log_size(wl.flops), "log_bytes": log_size(moved),
                "log_weight_bytes": log_size(weight_bytes), "arithmetic_intensity": wl.flops / moved,
                "log_parallel_items": log_size(wl.rows), "parallel_balance": wl.rows / (math.ceil(wl.rows / 2) * 2),
                "lane_partials": float(dict(spec.knobs).get("partial", 1))}


def _last_axis(axis: int, ndim: int) -> bool:
    return int(axis) in (-1, ndim - 1)


@register
class SoftmaxKind(RowKind):
    """``softmax(x, axis=-1)``, with a multiplication of its input by a scalar constant before it (attention's
    ``1 / sqrt(head size)``) taken along where nothing else reads the product."""

    name = "softmax"
    absorbs = True  # the scale before it
    workload_type = SoftmaxWorkload
    examples = (SoftmaxWorkload(6, 32, 0.5), SoftmaxWorkload(5, 20))

    def match(self, bindings: Bindings, index: int) -> Match | None:
        if bindings.op_name(index) != "relax.nn.softmax":
            return None
        (data,), var = bindings.value(index).args, bindings.var(index)
        if bindings.const(data) is not None or not _last_axis(bindings.value(index).attrs.axis,
                                                              len(tensor_shape(var, var.name))):
            return None
        parts, scale, before = (index,), 1.0, bindings.index(data)
        if bindings.free(before) and bindings.op_name(before) == "relax.multiply" \
                and bindings.sole_user(data) == index:
            operands = bindings.value(before).args
            factor = [bindings.const(x) for x in operands]
            if sum(f is not None and f.size == 1 for f in factor) == 1 and any(f is None for f in factor):
                scale = float(next(f for f in factor if f is not None).reshape(()))
                data, parts = next(x for x, f in zip(operands, factor) if f is None), (before, index)
        return Match(parts, (data,), {"scale": scale})

    def workload(self, op) -> SoftmaxWorkload:
        return SoftmaxWorkload(*self.rows_cols(op), scale=float(op.attrs.get("scale", 1.0)))

    def reference(self, spec: KernelSpec, inputs: Sequence[np.ndarray], params: dict[str, np.ndarray]
                  ) -> np.ndarray:
        x = np.asarray(inputs[0], dtype=np.float64) * spec.workload.scale
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)


@register
class LayerNormKind(RowKind):
    """``layer_norm(x, gamma, beta, axes=[-1])`` with constant ``gamma`` and ``beta``."""

    name = "layer_norm"
    absorbs = False
    workload_type = LayerNormWorkload
    examples = (LayerNormWorkload(6, 32), LayerNormWorkload(3, 24, 1e-6))

    def match(self, bindings: Bindings, index: int) -> Match | None:
        if bindings.op_name(index) != "relax.nn.layer_norm":
            return None
        call, var = bindings.value(index), bindings.var(index)
        data, gamma, beta = call.args
        shape, axes = tensor_shape(var, var.name), list(call.attrs.axes)
        gamma, beta = bindings.const(gamma), bindings.const(beta)
        if bindings.const(data) is not None or len(axes) != 1 or not _last_axis(axes[0], len(shape)) \
                or gamma is None or beta is None or not (call.attrs.center and call.attrs.scale):
            return None
        params = {"gamma": gamma.reshape(-1).astype("float32"), "beta": beta.reshape(-1).astype("float32")}
        return Match((index,), (data,), {"epsilon": float(call.attrs.epsilon)}, params)

    def workload(self, op) -> LayerNormWorkload:
        return LayerNormWorkload(*self.rows_cols(op), epsilon=float(op.attrs.get("epsilon", 1e-5)))

    def pack(self, spec: KernelSpec, params: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(params[name], dtype=spec.workload.dtype) for name in ("gamma", "beta")]

    def random_params(self, workload: LayerNormWorkload, epilogue: Epilogue, rng: np.random.Generator
                      ) -> dict[str, np.ndarray]:
        return {name: rng.uniform(-1, 1, workload.cols) for name in ("gamma", "beta")}

    def reference(self, spec: KernelSpec, inputs: Sequence[np.ndarray], params: dict[str, np.ndarray]
                  ) -> np.ndarray:
        x = np.asarray(inputs[0], dtype=np.float64)
        mean, var = x.mean(axis=-1, keepdims=True), x.var(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(var + spec.workload.epsilon) * params["gamma"] + params["beta"]
