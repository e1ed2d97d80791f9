"""GELU as exporters write it, recognised in the frontend's bindings and replaced by ``R.nn.gelu`` /
``R.nn.gelu_tanh``.

Exporters decompose GELU into elementwise arithmetic around one ``Erf`` or ``Tanh``, in many operand orders:
``x * 0.5 * (1 + erf(x / sqrt(2)))`` (Hugging Face, timm), ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 *
x^3)))`` (GPT-2's ``gelu_new``; ``Pow(x, 3)`` or ``x * x * x``), ``x * (1 + erf(x * 0.7071))`` scaled by 0.5 first
or last, and so on. A candidate is a multiply binding (the root) whose arithmetic tree (add, subtract, multiply,
divide and power by constants, through intermediates read once) reads one ``erf`` / ``tanh`` of a tree over one
tensor ``x``, and only ``x`` and scalar constants besides. Both trees are expanded into polynomials; the root is a
GELU when they are, within ``RTOL``, ``0.5 x + 0.5 x A`` and ``A = erf(x / sqrt(2))`` or ``A = tanh(sqrt(2 / pi) x +
0.044715 sqrt(2 / pi) x^3)``. Its binding then becomes the GELU of ``x`` and its intermediates are dropped; every
other binding stays as it was.
"""

from __future__ import annotations

import math

import numpy as np
import tvm
from tvm import relax

from search.relax_exprs import static_shape, var_reads

RTOL = 1e-6
"""Relative tolerance of the constants (float32 rounding, sqrt(2) written as 1.4142135)."""

Poly = dict[tuple[int, int], float]
"""A polynomial in ``x`` and the ``erf`` / ``tanh`` value ``A``: (power of x, power of A) -> coefficient."""

_ARITHMETIC = ("relax.add", "relax.subtract", "relax.multiply", "relax.divide", "relax.power")
_HALF_X_TIMES_ONE_PLUS_A = {(1, 0): 0.5, (1, 1): 0.5}
_FORMS = {  # the operator of A -> (its argument as a polynomial in x, the Relax GELU)
    "relax.erf": ({(1, 0): math.sqrt(0.5)}, relax.op.nn.gelu),
    "relax.tanh": ({(1, 0): math.sqrt(2 / math.pi), (3, 0): 0.044715 * math.sqrt(2 / math.pi)},
                   relax.op.nn.gelu_tanh),
}


def fuse_gelu(bindings: list[relax.VarBinding], output: relax.Expr) -> list[relax.VarBinding]:
    """``bindings`` (of a function returning ``output``) with every GELU bound as one call, its parts dropped."""
    graph = _Graph(bindings, output)
    fused: dict[relax.Var, relax.Expr] = {}
    dropped: set[relax.Var] = set()
    for binding in bindings:
        found = _Match(graph, binding.var).gelu() if binding.var not in dropped else None
        if found is not None:
            fused[binding.var], parts = found
            dropped |= parts
    return [relax.VarBinding(b.var, fused[b.var]) if b.var in fused else b for b in bindings if b.var not in dropped]


class _Graph:
    """The value and the number of readers of every bound variable."""

    def __init__(self, bindings: list[relax.VarBinding], output: relax.Expr) -> None:
        self.values = {b.var: b.value for b in bindings}
        self.uses: dict[relax.Var, int] = {}
        for expr in [b.value for b in bindings] + [output]:
            for v in var_reads(expr):
                self.uses[v] = self.uses.get(v, 0) + 1

    def call(self, expr, ops, *, shared: bool = False) -> relax.Call | None:
        """The call of one of ``ops`` that ``expr`` is, or that the variable ``expr`` is bound to and (unless
        ``shared``) read only once; else None."""
        if isinstance(expr, relax.Var):
            expr = self.values.get(expr) if shared or self.uses.get(expr) == 1 else None
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) and expr.op.name in ops:
            return expr
        return None

    def scalar(self, expr) -> float | None:
        """The value of a one-element float constant (or of a variable bound to one), else None."""
        expr = self.values.get(expr, expr) if isinstance(expr, relax.Var) else expr
        if not isinstance(expr, tvm.ir.expr.Constant) or not hasattr(expr.value, "numpy"):
            return None
        value = expr.value.numpy()
        return float(value.reshape(())) if value.size == 1 and value.dtype.kind == "f" else None


class _Match:
    """One attempt at reading the binding of ``root`` as a GELU: its input ``x``, its ``erf`` / ``tanh`` value
    ``atom`` and the intermediates read on the way."""

    def __init__(self, graph: _Graph, root: relax.Var) -> None:
        self.graph, self.root = graph, root
        self.x: relax.Var | None = None
        self.atom: relax.Expr | None = None
        self.parts: set[relax.Var] = set()

    def gelu(self) -> tuple[relax.Call, set[relax.Var]] | None:
        """The GELU call replacing the root and the intermediates it leaves unread, or None if the root is none."""
        root = self.graph.call(self.root, ("relax.multiply",), shared=True)
        atoms = [] if root is None else [e for e in self.leaves(root) if self.graph.call(e, _FORMS) is not None]
        if len(atoms) != 1:
            return None
        self.atom, atom = atoms[0], self.graph.call(atoms[0], _FORMS)
        inputs = {e for e in self.leaves(atom.args[0]) if self.graph.scalar(e) is None}
        if len(inputs) != 1 or not isinstance(x := inputs.pop(), relax.Var):
            return None
        self.x = x
        argument, make = _FORMS[atom.op.name]
        if not (self.fits() and _close(self.poly(root), _HALF_X_TIMES_ONE_PLUS_A)
                and _close(self.poly(atom.args[0]), argument)):
            return None
        if isinstance(self.atom, relax.Var):
            self.parts.add(self.atom)
        return relax.BlockBuilder().normalize(make(x)), self.parts

    def leaves(self, expr) -> list[relax.Expr]:
        """What the arithmetic tree of ``expr`` reads: constants, tensors read elsewhere, other calls."""
        call = self.graph.call(expr, _ARITHMETIC)
        if call is None:
            return [expr]
        return [leaf for arg in call.args for leaf in self.leaves(arg)]

    def fits(self) -> bool:
        """Whether the root has the static shape and the dtype of ``x`` (no broadcasting by a constant)."""
        x, out = self.x.ty, self.root.ty
        return (isinstance(x, relax.TensorType) and isinstance(out, relax.TensorType) and x.dtype == out.dtype
                and static_shape(self.x) is not None and static_shape(self.x) == static_shape(self.root))

    def poly(self, expr) -> Poly | None:
        """``expr`` as a polynomial in ``x`` and the atom, recording the intermediates it reads; None if it is none."""
        if expr.same_as(self.x):
            return {(1, 0): 1.0}
        if expr.same_as(self.atom):
            return {(0, 1): 1.0}
        value = self.graph.scalar(expr)
        if value is not None:
            return {(0, 0): value}
        call = self.graph.call(expr, _ARITHMETIC)
        if call is None:
            return None
        if isinstance(expr, relax.Var):
            self.parts.add(expr)
        lhs, rhs = (self.poly(arg) for arg in call.args)
        return None if lhs is None or rhs is None else _apply(call.op.name, lhs, rhs)


def _apply(op: str, lhs: Poly, rhs: Poly) -> Poly | None:
    """``lhs op rhs``; None for a division by or a power of anything but a constant (a power: 1 to 4)."""
    if op in ("relax.add", "relax.subtract"):
        sign = 1.0 if op == "relax.add" else -1.0
        return {k: lhs.get(k, 0.0) + sign * rhs.get(k, 0.0) for k in lhs.keys() | rhs.keys()}
    if op == "relax.multiply":
        out: Poly = {}
        for (a, b), u in lhs.items():
            for (c, d), v in rhs.items():
                out[a + c, b + d] = out.get((a + c, b + d), 0.0) + u * v
        return out
    constant = rhs.get((0, 0)) if set(rhs) == {(0, 0)} else None
    if op == "relax.divide":
        return None if not constant else {k: v / constant for k, v in lhs.items()}
    if constant not in (1.0, 2.0, 3.0, 4.0):
        return None
    out = {(0, 0): 1.0}
    for _ in range(int(constant)):
        out = _apply("relax.multiply", out, lhs)
    return out


def _close(actual: Poly | None, expected: Poly) -> bool:
    """Whether ``actual`` has ``expected``'s terms, each within ``RTOL``, and no other non-zero term."""
    if actual is None:
        return False
    terms = {k for k, v in actual.items() if abs(v) > 1e-12} | set(expected)
    return all(np.isclose(actual.get(k, 0.0), expected.get(k, 0.0), rtol=RTOL, atol=0.0) for k in terms)
