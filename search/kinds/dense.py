"""The ``dense`` kind: a 2-D matmul by a constant weight and its fused bias, residual add and activation, run by the
template in ``search.templates.dense`` on rows stored ``NC`` or ``CN{c}c`` (in fp32, bf16 or, calibrated, int8)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from search.bindings import Bindings
from search.kinds.base import Match, TemplateKind
from search.kinds.epilogue import apply_epilogue, fused_chain, packed_bias
from search.kinds.features import Extents, tiled_kernel_features
from search.kinds.registry import register
from search.layouts import layout
from search.precision import KNOB
from search.relax_exprs import static_shape
from search.templates import dense as template
from search.templates import dense_dot, int8
from search.templates.workloads import DenseWorkload, Epilogue, KernelSpec


@register
class DenseKind(TemplateKind):
    """``act(data @ weight.T + bias + residual)`` with data (..., in) and a constant weight; the graph holds the
    weight as (out, in). The kernel runs on data flattened to (rows, in), rows the product of the leading dimensions
    (a transformer's batch x tokens; ``search.layouts.activation_shape``): export reshapes an ``NC`` value around it
    for free, and the plan may keep the rows blocked (``CN{c}c``) between two linear layers."""

    name = "dense"
    template = template
    workload_type = DenseWorkload
    epilogues = (Epilogue(bias=False, activation="relu6"), Epilogue(True, True, "relu"), Epilogue(True, False, "gelu"),
                 Epilogue(False, True, "gelu_tanh"))
    examples = (DenseWorkload(3, 32, 24), DenseWorkload(4, 12, 32))

    def match(self, bindings: Bindings, index: int) -> Match | None:
        if bindings.op_name(index) != "relax.matmul":
            return None
        call = bindings.value(index)
        weight, shape = bindings.const(call.args[1]), static_shape(call.args[0])
        if weight is None or shape is None or len(shape) < 2 or weight.ndim != 2:
            return None
        chain = fused_chain(bindings, index, residual=True)
        return chain.match(call.args[0], {"weight": np.ascontiguousarray(weight.astype("float32").T)})

    def baseline(self, op, name: str) -> tuple[str, str]:
        return "NC", "NC"

    def workload(self, op) -> DenseWorkload:
        *rows, in_features = op.input_shapes[0]
        return DenseWorkload(int(np.prod(rows)), in_features, op.shape[-1])

    def in_shape(self, workload: DenseWorkload) -> tuple[int, ...]:
        return (workload.batch, workload.in_features)

    def out_shape(self, workload: DenseWorkload) -> tuple[int, ...]:
        return (workload.batch, workload.out_features)

    def int8_capable(self, op) -> bool:
        """Every linear layer (``search.templates.dense_dot``)."""
        return True

    def pack(self, spec: KernelSpec, params: dict[str, np.ndarray]) -> list[np.ndarray]:
        """The weights (bf16: as bf16) and the bias; an int8 setting's from the range of its input
        (``params[int8.RANGE]``): ``search.templates.dense_dot.pack_int8``."""
        self.check_spec(spec)
        if int8.is_int8(spec.knobs):
            return dense_dot.pack_int8(spec, np.asarray(params["weight"]), params.get("bias"),
                                       int8.input_quantisation(params))
        return [template.pack_weight(spec, np.asarray(params["weight"])), *packed_bias(spec, params)]

    def random_params(self, workload: DenseWorkload, epilogue: Epilogue, rng: np.random.Generator
                      ) -> dict[str, np.ndarray]:
        params = {"weight": rng.uniform(-1, 1, (workload.out_features, workload.in_features))}
        if epilogue.bias:
            params["bias"] = rng.uniform(-1, 1, workload.out_features)
        return params

    def reference(self, spec: KernelSpec, inputs: Sequence[np.ndarray], params: dict[str, np.ndarray]
                  ) -> np.ndarray:
        data, *residual = inputs  # the residual, if the epilogue adds one
        return apply_epilogue(data @ params["weight"].T, spec.epilogue, params.get("bias"), *residual)

    def features(self, spec: KernelSpec) -> dict[str, float]:
        if int8.is_int8(spec.knobs):
            raise NotImplementedError("int8 linear layers have no cost-model features yet: they are priced measured")
        wl = spec.workload
        extents = Extents(wl.batch, wl.in_features, 1, 1, wl.out_features, 1, 1)
        run = layout(spec.in_layout).block() or wl.in_features  # the input's contiguous run of features
        knobs = dict(spec.knobs)
        return {**tiled_kernel_features(spec, extents, run, knobs.get("oc_bn", 1), tile="reg_b", tiled=wl.batch),
                "rows_outer": float(knobs.get("rows", 0)),  # row tiles outermost (the default, 0, resolved)
                "bf16": float(knobs.get(KNOB, 0))}
