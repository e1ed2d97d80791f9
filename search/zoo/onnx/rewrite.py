"""The rewriting engine: walks the frontend's ``main`` and re-emits it in the zoo's op vocabulary.

Each binding's value is converted by the rule for its operator (``operators.OPERATORS``) into a numpy constant, an
emitted Relax variable or a pending value (``values``); pending values are emitted when something reads them as a
tensor, so that folding happens only into a layer or clip that has no other reader.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import tvm
from tvm import relax

from search.relax_exprs import var_reads
from search.zoo.onnx.operators import OPERATORS
from search.zoo.onnx.values import (
    Items,
    PendingClip,
    PendingLayer,
    Unsupported,
    Unusable,
    channel_constant,
)


def rewrite(func: relax.Function) -> tvm.IRModule:
    """``func`` (the frontend's ``main``) in the zoo's vocabulary; ``Unsupported`` if it cannot be expressed."""
    return Rewriter(func).run()


class Rewriter:
    """State of one rewrite: the converted value of every original variable and the builder of the new module."""

    def __init__(self, func: relax.Function) -> None:
        self.func = func
        self.bindings = [b for block in func.body.blocks for b in block.bindings]
        self.uses: dict[Any, int] = {}
        for expr in [b.value for b in self.bindings] + [func.body.body]:
            for v in var_reads(expr):
                self.uses[v] = self.uses.get(v, 0) + 1
        self.env: dict[Any, Any] = {}
        self.bb = relax.BlockBuilder()
        self.counts: dict[str, int] = {}

    # -- values
    def value(self, expr) -> Any:
        """The rewritten value of an expression of the original function: ndarray, relax.Var, or a pending value."""
        if isinstance(expr, tvm.ir.expr.Constant) and hasattr(expr.value, "numpy"):
            return expr.value.numpy()
        if isinstance(expr, relax.Var):
            if expr not in self.env:
                raise Unsupported(f"binding {expr.name!r} is read but could not be converted")
            return self.env[expr]
        if isinstance(expr, relax.ShapeExpr):
            return np.array([int(v) for v in expr.values], dtype=np.int64)
        inner = getattr(expr, "value", None)  # PrimValue -> FloatImm / IntImm -> float / int
        while inner is not None and not isinstance(inner, int | float) and hasattr(inner, "value"):
            inner = inner.value
        if isinstance(inner, int | float):
            return np.array(inner)
        raise Unsupported(f"cannot convert {type(expr).__name__} {expr}")

    def constants(self, args) -> list[np.ndarray] | None:
        """The values of ``args`` if all of them are constants, else None."""
        values = [self.value(a) for a in args]
        return values if all(isinstance(v, np.ndarray) for v in values) else None

    def tensor(self, expr) -> relax.Var:
        """The value of ``expr`` as an emitted Relax variable (pending layers and clips get emitted)."""
        v = self.value(expr)
        if isinstance(v, relax.Var):
            return v
        if isinstance(v, np.ndarray):
            raise Unsupported("a constant is used where an activation is expected")
        if isinstance(v, PendingLayer):
            out = self._emit_layer(v)
        elif isinstance(v, PendingClip):
            out = self._emit_clip(v)
        elif isinstance(v, Unusable):
            raise Unsupported(v.reason)
        else:
            raise Unsupported(f"a {type(v).__name__} value is used as a tensor")
        if isinstance(expr, relax.Var):
            self.env[expr] = out
        return out

    def sole_use(self, expr) -> bool:
        """Whether ``expr`` is a variable read exactly once, so that its pending value may fold into the reader."""
        return isinstance(expr, relax.Var) and self.uses.get(expr, 0) == 1

    # -- emitting
    def _name(self, kind: str) -> str:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        return f"{kind}{self.counts[kind] - 1}"

    def emit(self, call: relax.Call, kind: str) -> relax.Var:
        """Emit ``call`` as the next variable named ``<kind><count>``."""
        return self.bb.emit(call, name_hint=self._name(kind))

    def emit_scale_shift(self, x: relax.Var, scale: np.ndarray | None = None, shift: np.ndarray | None = None):
        """``x * scale + shift`` with (C,) vectors on a 4-D activation; ``None`` leaves that step out."""
        if scale is not None:
            x = self.emit(relax.op.multiply(x, channel_constant(scale, 4)), "scale")
        if shift is not None:
            x = self.emit(relax.op.add(x, channel_constant(shift, 4)), "shift")
        return x

    def _emit_layer(self, layer: PendingLayer) -> relax.Var:
        name = self._name(layer.kind)
        out = self.bb.emit(layer.call(), name_hint=name)
        return self.bb.emit(relax.op.add(out, channel_constant(layer.bias, layer.rank)), name_hint=f"{name}_bias")

    def _emit_clip(self, c: PendingClip) -> relax.Var:
        bounds = (c.low, c.high)
        if bounds == (0.0, 6.0):
            return self.emit(relax.op.clip(c.data, 0.0, 6.0), "relu6_")
        if bounds == (0.0, math.inf):
            return self.emit(relax.op.nn.relu(c.data), "relu")
        if bounds == (-math.inf, math.inf):
            return c.data
        raise Unsupported(f"Clip(min={c.low}, max={c.high}) is not supported, only Clip(0, 6) and Clip(0, inf)")

    # -- driver
    def run(self) -> tvm.IRModule:
        params = self.func.params
        if len(params) != 1:
            raise Unsupported(f"the converted function takes {len(params)} inputs, expected 1")
        data = relax.Var("data", params[0].ty)
        self.env[params[0]] = data
        with self.bb.function("main", [data]):
            with self.bb.dataflow():
                for binding in self.bindings:
                    self.env[binding.var] = self.convert(binding.var, binding.value)
                body = self.func.body.body
                if isinstance(body, relax.Tuple):
                    result = relax.Tuple([self.tensor(f) for f in body.fields])
                elif isinstance(items := self.value(body), Items):
                    if sorted(items.items) != list(range(len(body.ty.fields))):
                        raise Unsupported(f"the output {items.producer} has items that could not be converted")
                    result = relax.Tuple([items.items[i] for i in sorted(items.items)])
                else:
                    result = self.tensor(body)
                gv = self.bb.emit_output(result)
            self.bb.emit_func_output(gv)
        return relax.transform.CanonicalizeBindings()(self.bb.get())

    def convert(self, var: relax.Var, value) -> Any:
        """The rewritten value of the binding ``var = value``."""
        if isinstance(value, relax.Var | tvm.ir.expr.Constant):
            return self.value(value)
        if isinstance(value, relax.TupleGetItem):
            items = self.value(value.tuple_value)
            if not isinstance(items, Items):
                raise Unsupported(f"binding {var.name!r}: tuple item of an unsupported value")
            if value.index not in items.items:
                return Unusable(f"output {value.index} of {items.producer} is not supported")
            return items.items[value.index]
        if isinstance(value, relax.Tuple):  # e.g. the outputs gathered before the function returns them
            return Items({i: self.tensor(f) for i, f in enumerate(value.fields)}, producer=f"tuple {var.name!r}")
        if not isinstance(value, relax.Call):
            raise Unsupported(f"binding {var.name!r}: {type(value).__name__} is not supported")
        if not isinstance(value.op, tvm.ir.Op):
            raise Unsupported(f"binding {var.name!r}: call of {value.op} is not supported")
        rule = OPERATORS.get(value.op.name)
        if rule is None:
            raise Unsupported(f"operator {value.op.name} (binding {var.name!r}) is outside tessera's op vocabulary")
        return rule(self, var, value)
