"""Activations as frontends write them: a chain of elementwise Relax calls from the activation's input ``x``.

A ``Form`` is a sequence of ``Step``\\ s. Step one reads ``x``; every later step reads the value of the step before
(its only reader; a division by a number also matches a multiplication by its inverse), and a binary step's other
operand is ``x`` itself (``X``), a constant equal to a number everywhere, or such a constant captured as an
attribute (a name); every step keeps ``x``'s shape. ``Form.match`` finds the chain at a binding, ``Form.write``
writes it (the conformance suite recognises what it writes).
HardSwish as TVM's ONNX frontend imports it is ``Form(Step("relax.add", 3.0), Step("relax.clip", bounds=(0, 6)),
Step("relax.divide", 6.0), Step("relax.multiply", X))``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from tvm import relax

from search.bindings import scalar

if TYPE_CHECKING:
    from search.bindings import Bindings

X = "x"
"""A binary step's operand that is the activation's input."""

COMMUTATIVE = ("relax.add", "relax.multiply", "relax.maximum", "relax.minimum")
RTOL = 1e-6  # of a constant written in float32 (1/6 as 0.16666667)


@dataclass(frozen=True)
class Step:
    """One Relax call: ``op`` of the previous value, with ``operand`` (``X``, a number, an attribute name, or None for
    a unary call) or, for ``relax.clip``, ``bounds`` (numbers or attribute names)."""

    op: str
    operand: float | str | None = None
    bounds: tuple[float | str, float | str] | None = None


@dataclass(frozen=True)
class Form:
    """A chain of ``steps`` computing one activation; ``attrs`` are the activation's attributes this form fixes."""

    steps: tuple[Step, ...]
    attrs: dict[str, float] = field(default_factory=dict)

    def __init__(self, *steps: Step, attrs: dict[str, float] | None = None) -> None:
        object.__setattr__(self, "steps", steps)
        object.__setattr__(self, "attrs", dict(attrs or {}))

    def match(self, bindings: Bindings, index: int) -> tuple[dict[str, float], tuple[int, ...]] | None:
        """(the attributes, the later bindings) of this chain starting at binding ``index``, or None."""
        value = bindings.value(index)
        if not isinstance(value, relax.Call) or not value.args:
            return None
        x, attrs, parts, previous = _input(bindings, index, self.steps[0]), dict(self.attrs), [], None
        if x is None:
            return None
        for position, step in enumerate(self.steps):
            if position:
                index = bindings.sole_user(previous)
                if not bindings.free(index):
                    return None
                parts.append(index)
            read, step = x if previous is None else previous, _as_called(step, bindings.op_name(index))
            if bindings.op_name(index) != step.op or not _reads(bindings, index, step, read, x, attrs) \
                    or _shape(bindings.var(index)) != _shape(x):  # no operand broadcasts the input
                return None
            previous = bindings.var(index)
        return attrs, tuple(parts)

    def write(self, x: relax.Expr, attrs: dict[str, Any]) -> relax.Expr:
        """The chain applied to ``x`` with attribute values ``attrs``, as one nested expression."""
        value = x
        for step in self.steps:
            call = _op(step.op)
            if step.bounds is not None:
                low, high = (attrs[b] if isinstance(b, str) else b for b in step.bounds)
                value = call(value, low, high)
            elif step.operand is None:
                value = call(value)
            else:
                other = x if step.operand == X else _scalar(attrs.get(step.operand, step.operand))
                value = call(value, other)
        return value


def _as_called(step: Step, op: str) -> Step:
    """A division by a number as a multiplication by its inverse when ``op`` multiplies (tessera's ONNX import writes
    divisions by constants so)."""
    if step.op == "relax.divide" and op == "relax.multiply" and isinstance(step.operand, float | int):
        return Step("relax.multiply", 1 / step.operand)
    return step


def _shape(expr) -> tuple | None:
    shape = getattr(getattr(expr, "ty", None), "shape", None)
    return None if shape is None else tuple(int(v) for v in shape.values)


def _op(name: str):
    """The Relax operator function called ``name`` (``relax.nn.silu`` -> ``relax.op.nn.silu``)."""
    target = relax.op
    for part in name.removeprefix("relax.").split("."):
        target = getattr(target, part)
    return target


def _scalar(value: float) -> relax.Expr:
    return relax.const(float(value), "float32")


def _input(bindings: Bindings, index: int, step: Step):
    """The activation's input read by the first step at ``index``: its first operand, or the one operand of a binary
    call that is not constant."""
    args = bindings.value(index).args
    if step.operand is None:
        return args[0]
    if len(args) != 2:
        return None
    variable = [arg for arg in args if bindings.const(arg) is None]
    return variable[0] if len(variable) == 1 else None


def _same(value, expected: float) -> bool:
    return value is not None and math.isclose(float(value), expected, rel_tol=RTOL, abs_tol=RTOL)


def _constant(bindings: Bindings, expr) -> float | None:
    """The number a constant holds everywhere (a scalar, or a per-channel constant of one value, as the ONNX import
    writes scalar shifts and scales), else None."""
    array = bindings.const(expr)
    if array is None or not np.size(array) or not np.all(array == array.flat[0]):
        return None
    return float(array.flat[0])


def _fits(value: float | None, expected: float | str, attrs: dict[str, float]) -> bool:
    """``value`` equals the number ``expected``, or is captured as attribute ``expected`` (equal if already set)."""
    if value is None:
        return False
    if isinstance(expected, str):
        if expected in attrs:
            return _same(value, attrs[expected])
        attrs[expected] = value
        return True
    return _same(value, expected)


def _reads(bindings: Bindings, index: int, step: Step, previous, x, attrs: dict[str, float]) -> bool:
    """Whether the call at ``index`` is ``step`` of ``previous`` (recording captured attributes)."""
    args = bindings.value(index).args
    if step.bounds is not None:
        return len(args) == 3 and args[0].same_as(previous) and all(
            _fits(scalar(arg), bound, attrs) for arg, bound in zip(args[1:], step.bounds))
    if step.operand is None:
        return len(args) == 1 and args[0].same_as(previous)
    if len(args) != 2:
        return False
    orders = [(args[0], args[1]), (args[1], args[0])] if step.op in COMMUTATIVE else [(args[0], args[1])]
    for mine, other in orders:
        if not mine.same_as(previous):
            continue
        if step.operand == X:
            if other.same_as(x) and not other.same_as(previous):
                return True
        elif _fits(_constant(bindings, other), step.operand, attrs):
            return True
    return False
