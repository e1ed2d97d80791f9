"""The rewriting engine: walks the frontend's module and re-emits its ``main`` in the zoo's op vocabulary.

Each binding's value is converted by the rule for its operator (``rules``: the ONNX import passes
``operators.OPERATORS``) into a numpy constant, an emitted Relax variable or a pending value (``values``); pending
values are emitted when something reads them as a tensor, so that folding happens only into a layer or clip that has no
other reader. A call with no rule, or one its rule finds outside the vocabulary (``OutsideVocabulary``), is re-emitted
unchanged on its converted arguments (``Rewriter.reemit``); the PrimFuncs it calls are copied into the new module. GELUs
written out in arithmetic are bound as one ``R.nn.gelu`` / ``R.nn.gelu_tanh`` call first (``gelu``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import tvm
from tvm import relax

from search.relax_exprs import var_reads
from search.zoo.onnx.gelu import fuse_gelu
from search.zoo.onnx.values import (
    Items,
    OutsideVocabulary,
    PendingClip,
    PendingLayer,
    Unsupported,
    Unusable,
    channel_constant,
)

Rule = Callable[["Rewriter", relax.Var, relax.Call], Any]
"""``rule(rw, var, call)``: the rewritten value of the binding ``var = call`` (``OutsideVocabulary``: re-emit it)."""


def rewrite(mod: tvm.IRModule, rules: Mapping[str, Rule], names: Sequence[str] = ()) -> tvm.IRModule:
    """``mod`` (the frontend's output) with ``main`` in the zoo's vocabulary where ``rules`` (operator name -> rule)
    have a form for it, its inputs named ``names`` (the file's names, which the frontend may have changed; default:
    the frontend's); ``Unsupported`` if it holds something that cannot be re-emitted at all."""
    return Rewriter(mod, rules).run(names)


class Rewriter:
    """State of one rewrite: the converted value of every original variable and the builder of the new module."""

    def __init__(self, mod: tvm.IRModule, rules: Mapping[str, Rule]) -> None:
        self.module = mod
        self.rules = rules
        self.func = mod["main"]
        bindings = [b for block in self.func.body.blocks for b in block.bindings]
        self.bindings = fuse_gelu(bindings, self.func.body.body)
        self.uses: dict[Any, int] = {}
        for expr in [b.value for b in self.bindings] + [self.func.body.body]:
            for v in var_reads(expr):
                self.uses[v] = self.uses.get(v, 0) + 1
        self.env: dict[Any, Any] = {}
        self.bb = relax.BlockBuilder()
        self.counts: dict[str, int] = {}
        self.copied: dict[Any, tvm.ir.GlobalVar] = {}

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
        """The value of ``expr`` as an emitted Relax variable (pending layers and clips get emitted);
        ``OutsideVocabulary`` if it is a constant."""
        value = self.value(expr)
        if isinstance(value, np.ndarray):
            raise OutsideVocabulary
        out = self.emitted(value)
        if isinstance(expr, relax.Var):
            self.env[expr] = out
        return out

    def emitted(self, value) -> relax.Var:
        """A non-constant value as an emitted Relax variable: pending layers and clips get emitted."""
        if isinstance(value, relax.Var):
            return value
        if isinstance(value, PendingLayer):
            return self._emit_layer(value)
        if isinstance(value, PendingClip):
            return self._emit_clip(value)
        if isinstance(value, Unusable):
            raise Unsupported(value.reason)
        raise Unsupported(f"a {type(value).__name__} value is used as a tensor")

    def argument(self, expr) -> relax.Expr:
        """``expr`` of the original function as an argument of a re-emitted call: tensors as emitted variables,
        rewritten constants as ``relax.const`` of the original dtype, tuples field by field, PrimFuncs copied
        into the new module, anything else (constants, shapes, prim values, data types) as it was."""
        if isinstance(expr, relax.Tuple):
            return relax.Tuple([self.argument(f) for f in expr.fields])
        if isinstance(expr, tvm.ir.GlobalVar):
            return self.function(expr)
        if not isinstance(expr, relax.Var):
            return expr
        value = self.value(expr)
        if isinstance(value, PendingLayer | PendingClip):
            return self.tensor(expr)  # emitted once, for every reader
        return self._passed(value, expr.ty, expr.name)

    def _passed(self, value, ty, name: str) -> relax.Expr:
        """A converted value of type ``ty`` (of the binding ``name``) as an expression of the new function."""
        if isinstance(value, np.ndarray):
            if not isinstance(ty, relax.TensorType):
                raise Unsupported(f"binding {name!r}: a constant {ty} cannot be passed on")
            return relax.const(value.astype(ty.dtype), ty.dtype)
        if isinstance(value, Items):
            if sorted(value.items) != list(range(len(ty.fields))):
                raise Unsupported(f"binding {name!r}: {value.producer} is read whole, but not all its items could "
                                  "be converted")
            return relax.Tuple([self._passed(value.items[i], ty.fields[i], name) for i in sorted(value.items)])
        return self.emitted(value)

    def function(self, gv: tvm.ir.GlobalVar) -> tvm.ir.GlobalVar:
        """The new module's copy of the function ``gv`` of the frontend's module (a PrimFunc it lowered to)."""
        if gv not in self.copied:
            self.copied[gv] = self.bb.add_func(self.module[gv], gv.name_hint)
        return self.copied[gv]

    def sole_use(self, expr) -> bool:
        """Whether ``expr`` is a variable read exactly once, so that its pending value may fold into the reader."""
        return isinstance(expr, relax.Var) and self.uses.get(expr, 0) == 1

    # -- emitting
    def _name(self, kind: str) -> str:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        return f"{kind}{self.counts[kind] - 1}"

    def emit(self, call: relax.Expr, kind: str) -> relax.Var:
        """Emit ``call`` as the next variable named ``<kind><count>``."""
        return self.bb.emit(call, name_hint=self._name(kind))

    def reemit(self, call: relax.Call) -> relax.Var:
        """``call`` emitted unchanged on its converted arguments, named after its operator or PrimFunc."""
        op = call.op.name
        kind = re.sub(r"\d+$", "", call.args[0].name_hint) if op == "relax.call_tir" else op.rsplit(".", 1)[-1]
        args = [self.argument(a) for a in call.args]
        return self.emit(relax.Call(call.op, args, call.attrs, call.ty_args), kind)

    def emit_scale_shift(self, x: relax.Var, scale: np.ndarray | None = None, shift: np.ndarray | None = None):
        """``x * scale + shift`` with (C,) vectors on a 4-D activation; ``None`` leaves that step out."""
        if scale is not None:
            x = self.emit(relax.op.multiply(x, channel_constant(scale, 4)), "scale")
        if shift is not None:
            x = self.emit(relax.op.add(x, channel_constant(shift, 4)), "shift")
        return x

    def _emit_layer(self, layer: PendingLayer) -> relax.Var:
        return layer.emit(self.bb, self._name(layer.kind))

    def _emit_clip(self, c: PendingClip) -> relax.Var:
        bounds = (c.low, c.high)
        if bounds == (0.0, 6.0):
            return self.emit(relax.op.clip(c.data, 0.0, 6.0), "relu6_")
        if bounds == (0.0, math.inf):
            return self.emit(relax.op.nn.relu(c.data), "relu")
        if bounds == (-math.inf, math.inf):
            return c.data
        return self.emit(relax.op.clip(c.data, c.low, c.high), "clip")

    # -- driver
    def run(self, names: Sequence[str] = ()) -> tvm.IRModule:
        """The new module, ``main``'s inputs named ``names`` (default: as in ``mod``)."""
        params = self.func.params
        inputs = [relax.Var(name, p.ty) for p, name in zip(params, names or [p.name for p in params], strict=True)]
        self.env.update(zip(params, inputs))
        with self.bb.function("main", inputs):
            with self.bb.dataflow():
                for binding in self.bindings:
                    self.env[binding.var] = self.convert(binding.var, binding.value)
                gv = self.bb.emit_output(self.argument(self.func.body.body))
            self.bb.emit_func_output(gv)
        return relax.transform.CanonicalizeBindings()(self.bb.get())

    def convert(self, var: relax.Var, value) -> Any:
        """The rewritten value of the binding ``var = value``."""
        if isinstance(value, relax.Var | tvm.ir.expr.Constant):
            return self.value(value)
        if isinstance(value, relax.TupleGetItem):
            items = self.value(value.tuple_value)
            if isinstance(items, relax.Var):  # a re-emitted tuple-valued call
                return self.emit(relax.TupleGetItem(items, value.index), "item")
            if not isinstance(items, Items):
                raise Unsupported(f"binding {var.name!r}: tuple item of an unsupported value")
            if value.index not in items.items:
                return Unusable(f"output {value.index} of {items.producer} is not supported")
            return items.items[value.index]
        if isinstance(value, relax.Tuple):  # e.g. the outputs gathered before the function returns them
            items = {}
            for index, field in enumerate(value.fields):
                item = self.value(field)
                items[index] = item if isinstance(item, np.ndarray | Items) else self.tensor(field)
            return Items(items, producer=f"tuple {var.name!r}")
        if not isinstance(value, relax.Call):
            raise Unsupported(f"binding {var.name!r}: {type(value).__name__} is not supported")
        if not isinstance(value.op, tvm.ir.Op):
            raise Unsupported(f"binding {var.name!r}: call of {value.op} is not supported")
        rule = self.rules.get(value.op.name)
        if rule is not None:
            try:
                return rule(self, var, value)
            except OutsideVocabulary:
                pass
        return self.reemit(value)
