"""The bindings of a Relax function, with the questions kinds ask to recognise their operator (``OperatorKind.match``)
and graph extraction asks to classify the rest: operator names, constant values, users, static shapes."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import numpy as np
import tvm
from tvm import relax

from search.errors import SearchError
from search.relax_exprs import static_shape, var_reads


def op_name(expr) -> str:
    """The Relax operator a call applies (``relax.nn.conv2d``), or "" for anything else."""
    return expr.op.name if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) else ""


def scalar(expr) -> Any:
    """A PrimValue / IntImm / FloatImm as a Python number."""
    while not isinstance(expr, int | float | bool | str) and hasattr(expr, "value"):
        expr = expr.value
    return expr


def plain(value) -> Any:
    """A TVM attribute value as plain Python (ints, floats, bools, strings, tuples)."""
    if value is None or isinstance(value, int | float | bool | str):
        return value
    if hasattr(value, "value"):
        return scalar(value)
    return tuple(plain(v) for v in value)


def tensor_shape(expr, where: str) -> tuple[int, ...]:
    """The static shape of a tensor; () for a tuple or another non-tensor value; ``SearchError`` for a tensor whose
    shape is not static."""
    if not isinstance(expr.ty, relax.TensorType):
        return ()
    shape = static_shape(expr)
    if shape is None:
        raise SearchError(f"binding {where!r}: the shape {expr.ty} is not static (bind the inputs' dynamic "
                          "dimensions with --input-shape)")
    return shape


class Bindings:
    """The bindings of ``func``'s dataflow blocks, indexed in order, and what a matcher needs to know of them.

    ``claimed`` holds the indices already taken by a match; a kind must not take them again.
    """

    def __init__(self, func: relax.Function) -> None:
        self.func = func
        self.items = [b for block in func.body.blocks for b in block.bindings]
        self.users: dict[Any, list[int]] = defaultdict(list)
        for index, binding in enumerate(self.items):
            for var in var_reads(binding.value):
                self.users[var].append(index)
        self.outputs = Counter(var_reads(func.body.body))
        self.defs = {b.var: b.value for b in self.items}
        self.indices = {b.var: index for index, b in enumerate(self.items)}
        self.claimed: set[int] = set()
        self._consts: dict[Any, np.ndarray | None] = {}

    def __len__(self) -> int:
        return len(self.items)

    def value(self, index: int):
        """The expression bound at ``index``."""
        return self.items[index].value

    def index(self, var) -> int | None:
        """The index of the binding of ``var`` (None for a parameter or anything else)."""
        return self.indices.get(var)

    def var(self, index: int) -> relax.Var:
        """The variable bound at ``index``."""
        return self.items[index].var

    def op_name(self, index: int) -> str:
        """The operator of the call bound at ``index`` ("" if it is no operator call)."""
        return op_name(self.items[index].value)

    def free(self, index: int | None) -> bool:
        """Whether ``index`` is a binding no match has claimed."""
        return index is not None and index not in self.claimed

    def const(self, expr) -> np.ndarray | None:
        """The numpy value of a constant-valued expression (a constant, or permute_dims / reshape of one)."""
        if isinstance(expr, tvm.ir.expr.Constant):
            return expr.value.numpy()
        if not isinstance(expr, relax.Var) or expr not in self.defs:
            return None
        if expr not in self._consts:
            value, result = self.defs[expr], None
            name = op_name(value)
            inner = self.const(value.args[0]) if name in ("relax.permute_dims", "relax.reshape") else None
            if isinstance(value, relax.Var | tvm.ir.expr.Constant):
                result = self.const(value)
            elif inner is not None and name == "relax.permute_dims":
                axes = value.attrs.axes
                result = np.transpose(inner, None if axes is None else [int(a) for a in axes])
            elif inner is not None:
                result = inner.reshape(tensor_shape(value, expr.name))
            self._consts[expr] = result
        return self._consts[expr]

    def sole_user(self, var) -> int | None:
        """The index of the one binding reading ``var``, if exactly one does and ``var`` is no function output."""
        users = self.users.get(var, [])
        return users[0] if len(users) == 1 and not self.outputs[var] else None

    def other_operand(self, index: int, var):
        """The operand of the binary call at ``index`` that is not ``var`` (None if both are ``var``)."""
        lhs, rhs = self.items[index].value.args
        if lhs.same_as(var) != rhs.same_as(var):
            return rhs if lhs.same_as(var) else lhs
        return None

    def activations(self, index: int) -> list[relax.Var]:
        """The non-constant variables the binding at ``index`` reads, in order (once per read)."""
        return [v for v in var_reads(self.items[index].value) if self.const(v) is None]
