"""Vectorising float32 forms of ``exp``, ``sigmoid``, ``tanh`` and ``erf`` as TIR expressions, for activations fused
into kernel epilogues and run as passes of their own.

On x86 ``tir.exp``, ``tir.tanh`` and ``tir.erf`` compile to one scalar library call per element; these are the
forms TVM's ``topi.fast_exp``, ``fast_tanh`` and ``fast_erf`` compute (a range reduction and a polynomial for exp,
rational approximations for tanh and erf), written on expressions so that an epilogue can inline them.
"""

from __future__ import annotations

from collections.abc import Sequence

import tvm
from tvm import te

# odd numerator (coefficients of x^13, x^11, ..., x), even denominator (of ..., x^2, 1), on x clamped to
# [-bound, bound]
_ERF = ((-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
         -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02),
        (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
         -1.42647390514189e-02), 4.0)
_TANH = ((-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
          1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03),
         (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03), 9.0)
# exp(r) - 1 - r = r^2 * p(r) on |r| <= ln(2) / 2 (Cephes' expf), coefficients of r^5 ... r^0
_EXP = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)
_EXP_BOUND = 88.3762626647949  # exp of more overflows float32
_LOG2E, _LN2 = 1.44269504088896341, 0.6931471805599453


def dtype(x: tvm.tirx.PrimExpr) -> str:
    """The dtype of ``x`` (an expression, or a tensor element ``A[i]``)."""
    return str(x.ty if hasattr(x, "ty") else x.dtype)


def const(value: float, like: tvm.tirx.PrimExpr) -> tvm.tirx.PrimExpr:
    """``value`` as a constant of ``like``'s dtype."""
    return tvm.tirx.const(value, dtype(like))


def clamp(x: tvm.tirx.PrimExpr, low: float, high: float) -> tvm.tirx.PrimExpr:
    """``x`` clamped to [low, high]."""
    return te.min(te.max(x, const(low, x)), const(high, x))


def _horner(x: tvm.tirx.PrimExpr, coefficients: Sequence[float]) -> tvm.tirx.PrimExpr:
    value = const(coefficients[0], x)
    for coefficient in coefficients[1:]:
        value = value * x + const(coefficient, x)
    return value


def _rational(x: tvm.tirx.PrimExpr, form: tuple) -> tvm.tirx.PrimExpr:
    numerator, denominator, bound = form
    x = clamp(x, -bound, bound)
    square = x * x
    return x * _horner(square, numerator) / _horner(square, denominator)


def exp(x: tvm.tirx.PrimExpr) -> tvm.tirx.PrimExpr:
    """``e^x``: ``2^n e^r`` with ``n = round(x log2 e)``, ``e^r`` by a polynomial and ``2^n`` built in the exponent
    bits; 0 below -88.38, the largest float32 above +88.38."""
    x = clamp(x, -_EXP_BOUND, _EXP_BOUND)
    n = tvm.tirx.floor(x * const(_LOG2E, x) + const(0.5, x))
    r = x - n * const(_LN2, x)
    value = _horner(r, _EXP) * r * r + r + const(1.0, x)
    bits = tvm.tirx.shift_left(n.astype("int32") + tvm.tirx.const(127, "int32"), tvm.tirx.const(23, "int32"))
    return tvm.tirx.reinterpret(dtype(x), bits) * value


def sigmoid(x: tvm.tirx.PrimExpr) -> tvm.tirx.PrimExpr:
    """``1 / (1 + e^-x)``."""
    return const(1.0, x) / (const(1.0, x) + exp(-x))


def tanh(x: tvm.tirx.PrimExpr) -> tvm.tirx.PrimExpr:
    """``tanh(x)`` (rational, on x clamped to [-9, 9], where it is +-1 in float32)."""
    return _rational(x, _TANH)


def erf(x: tvm.tirx.PrimExpr) -> tvm.tirx.PrimExpr:
    """``erf(x)`` (rational, on x clamped to [-4, 4], where it is +-1 in float32)."""
    return _rational(x, _ERF)
