"""The ``batch_matmul`` kind: a matmul of two activations (attention's scores and context) with the ``permute_dims``
that split the heads before it and merge them after it, run by the template in ``search.templates.batch_matmul``.

Each absorbed permute becomes a layout choice: the kernel reads the operand where the permute found it (token-major
for attention, ``NHCW``), or export transposes it first into the kernel's own order (``BIJ``, head-major) as a priced
layout transform; likewise for the result. The solver so decides, per matmul, where heads are split and merged."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from tvm import relax

from search.bindings import Bindings
from search.kinds.base import Match, TemplateKind
from search.kinds.epilogue import apply_epilogue, fused_activation
from search.kinds.features import Extents, tiled_kernel_features
from search.kinds.registry import register
from search.layouts import layout
from search.precision import KNOB
from search.relax_exprs import static_shape
from search.templates import batch_matmul as template
from search.templates import batch_matmul_dot, int8
from search.templates.workloads import BatchMatmulWorkload, Epilogue, KernelSpec

AXES = template.VIEW  # the letters of the kernel's 4-D view, in its own order


@dataclass(frozen=True)
class _Permute:
    """A ``permute_dims`` of a 4-D tensor at binding ``index``: ``source`` read, ``axes`` its permutation."""

    index: int
    source: relax.Var
    axes: tuple[int, ...]


def _permute(bindings: Bindings, index: int | None) -> _Permute | None:
    """The free 4-D ``permute_dims`` at ``index``, if it is one."""
    if not bindings.free(index) or bindings.op_name(index) != "relax.permute_dims":
        return None
    call = bindings.value(index)
    source, axes = call.args[0], call.attrs.axes
    shape = static_shape(source)
    if not isinstance(source, relax.Var) or bindings.const(source) is not None or shape is None or len(shape) != 4:
        return None
    return _Permute(index, source, tuple(range(3, -1, -1)) if axes is None else tuple(int(a) for a in axes))


def _logical(shape: Sequence[int], stored: str) -> tuple[int, ...]:
    """The logical 4-D shape of a value of ``shape`` storing an operand in ``stored``."""
    parsed = layout(stored)
    return tuple(int(shape[parsed.stored_axis(letter)]) for letter in AXES)


@register
class BatchMatmulKind(TemplateKind):
    """``act(a @ w)`` with a (..., m, k) and w (..., k, n) both activations of rank >= 3 and equal leading dimensions
    (no broadcasting), with a 4-D ``permute_dims`` read by nothing else before either operand or after the result
    taken along, and the activation after them, if any (a registered one), in the kernel's epilogue. The kernel runs
    on the leading dimensions as (batch, heads) (``batch x heads`` batch entries; ranks other than 4 as (batch, 1)).
    Its tensors take no part in the activation layout decisions (``layout_free``): export reads and writes its values
    as fixed ops see them, and its layout pairs say how the kernel reads them (``BIJ``, or through the absorbed
    permutes: ``NHCW+NWCH``, ...) and what export converts (``conversions``). Its cost-model features are a dense
    layer's on the flattened (batch x m, k) rows, the second operand counted as one (k, n) weight. Its int8 kernels
    quantise both operands, each over its own range (``int8_inputs``)."""

    name = "batch_matmul"
    template = template
    absorbs = True  # the permutes around it
    layout_free = True
    workload_type = BatchMatmulWorkload
    epilogues = (Epilogue(bias=False),)
    examples = (BatchMatmulWorkload(3, 7, 5, 9), BatchMatmulWorkload(2, 8, 16, 32),
                BatchMatmulWorkload(6, 5, 4, 9, heads=3))
    int8_inputs = 2

    def match(self, bindings: Bindings, index: int) -> Match | None:
        if bindings.op_name(index) != "relax.matmul":
            return None
        operands = bindings.value(index).args
        if not all(isinstance(x, relax.Var) and bindings.const(x) is None for x in operands):
            return None
        a_shape, w_shape = static_shape(operands[0]), static_shape(operands[1])
        if a_shape is None or w_shape is None or len(a_shape) < 3 or len(w_shape) != len(a_shape):
            return None
        if a_shape[:-2] != w_shape[:-2] or a_shape[-1] != w_shape[-2]:
            return None
        before, inputs, stored = [], [], []
        for operand in operands:
            found = _permute(bindings, bindings.index(operand))
            if found is not None and bindings.sole_user(operand) == index:  # the operand is source.transpose(axes)
                before.append(found.index)
                inputs.append(found.source)
                stored.append("".join(AXES[axis] for axis in np.argsort(found.axes)))
            else:
                inputs.append(operand)
                stored.append(AXES)
        after = _permute(bindings, bindings.sole_user(bindings.var(index)))
        result = "".join(AXES[axis] for axis in after.axes) if after is not None else AXES
        parts = (*sorted(before), index, *([after.index] if after is not None else []))
        attrs: dict = {"operands": tuple(stored), "result": result}
        end = bindings.var(parts[-1])
        activation = fused_activation(bindings, end, static_shape(end))
        if activation is not None:
            name, activation_attrs, claimed = activation
            parts = (*parts, *claimed)
            attrs.update(activation=name, **({"activation_attrs": activation_attrs} if activation_attrs else {}))
        return Match(parts, tuple(inputs), attrs)

    def layout_pairs(self, op) -> list[tuple[str, str]]:
        (a, w), result = self.stored_layouts(op)
        ins = dict.fromkeys([template.LAYOUT, template.input_layout(a, w)])
        outs = dict.fromkeys([template.LAYOUT, template.output_layout(result)])
        return [(i, o) for i in ins for o in outs]

    def stored_layouts(self, op) -> tuple[tuple[str, ...], str]:
        return tuple(op.attrs.get("operands", (AXES, AXES))), op.attrs.get("result", AXES)

    def check_spec(self, spec: KernelSpec) -> None:
        template.check_layouts(spec)

    def int8_capable(self, op) -> bool:
        """Every batched matmul (``search.templates.batch_matmul_dot``)."""
        return True

    def pack(self, spec: KernelSpec, params: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Nothing (both operands are activations); an int8 setting's scale and quantisation from the ranges of its
        operands (``params[int8.RANGE]``): ``search.templates.batch_matmul_dot.pack_int8``."""
        self.check_spec(spec)
        if not int8.is_int8(spec.knobs):
            return []
        a, w = int8.input_ranges(params, self.int8_inputs)
        return batch_matmul_dot.pack_int8(spec, (int8.quantisation(*a), int8.signed_scale(*w)))

    def baseline(self, op, name: str) -> tuple[str, str]:
        return template.LAYOUT, template.LAYOUT

    def workload(self, op) -> BatchMatmulWorkload:
        (a, w), _ = self.stored_layouts(op)
        a_shape, w_shape = op.input_shapes
        if len(a_shape) == 4:
            (batch, heads, m, k), n = _logical(a_shape, a), _logical(w_shape, w)[-1]
            return BatchMatmulWorkload(batch * heads, m, k, n, heads=heads)
        (*batch, m, k), n = a_shape, w_shape[-1]
        return BatchMatmulWorkload(int(np.prod(batch)), m, k, n)

    def in_shape(self, workload: BatchMatmulWorkload) -> tuple[int, ...]:
        return (workload.batch // workload.heads, workload.heads, workload.m, workload.k)

    def out_shape(self, workload: BatchMatmulWorkload) -> tuple[int, ...]:
        return (workload.batch // workload.heads, workload.heads, workload.m, workload.n)

    def activations(self, spec: KernelSpec) -> tuple[tuple[str, tuple[int, ...]], ...]:
        wl, (a, w) = spec.workload, template.operand_layouts(spec.in_layout)
        return (a, self.in_shape(wl)), (w, (wl.batch // wl.heads, wl.heads, wl.k, wl.n))

    def output(self, spec: KernelSpec) -> tuple[str, tuple[int, ...]]:
        return template.result_layout(spec.out_layout), self.out_shape(spec.workload)

    def reference(self, spec: KernelSpec, inputs: Sequence[np.ndarray], params: dict[str, np.ndarray]
                  ) -> np.ndarray:
        a, w = inputs
        return apply_epilogue(a @ w, spec.epilogue, None)

    def features(self, spec: KernelSpec) -> dict[str, float]:
        if int8.is_int8(spec.knobs):
            raise NotImplementedError("int8 batched matmuls have no cost-model features yet: they are priced measured")
        wl = spec.workload
        extents = Extents(wl.batch * wl.m, wl.k, 1, 1, wl.n, 1, 1)
        row = tiled_kernel_features(spec, extents, wl.k, dict(spec.knobs).get("n_bn", 1), layouts=False, tile="reg_m",
                                    tiled=wl.m)
        a, w = template.operand_layouts(spec.in_layout)
        out = template.result_layout(spec.out_layout)
        row.update({f"permuted_{name}": float(order != template.VIEW)
                    for name, order in (("a", a), ("b", w), ("out", out))})
        row["bf16"] = float(dict(spec.knobs).get(KNOB, 0))
        return row
