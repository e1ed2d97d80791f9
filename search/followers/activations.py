"""Elementwise activations as followers and epilogues: ReLU, ReLU6, clip, LeakyReLU, HardSwish, SiLU, Mish, sigmoid,
HardSigmoid, GELU (erf and tanh forms) and tanh, each in the Relax forms TVM's ONNX frontend and the usual exporters
produce (``search.followers.forms``).

Where the forms of several kinds match at a binding, the one spanning the most bindings wins (SiLU's
``sigmoid(x) * x`` over sigmoid, HardSwish over the HardSigmoid inside it); registration order breaks ties.
"""

from __future__ import annotations

import math

import numpy as np
import tvm
from scipy.special import erf
from tvm import relax, te

from search.followers import fast_math
from search.followers.base import ActivationKind, FollowerMatch, register_follower
from search.followers.fast_math import clamp, const
from search.followers.forms import Form, Step, X


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1 + np.tanh(0.5 * x))  # no overflow warning for large |x|


@register_follower
class ReLU(ActivationKind):
    name, forms = "relu", (Form(Step("relax.nn.relu")),)

    def tir(self, x, attrs):
        return te.max(x, const(0.0, x))

    def numpy(self, x, attrs):
        return np.maximum(x, 0)


@register_follower
class ReLU6(ActivationKind):
    name = "relu6"
    forms = (Form(Step("relax.clip", bounds=(0, 6))), Form(Step("relax.nn.relu6")))

    def tir(self, x, attrs):
        return clamp(x, 0.0, 6.0)

    def numpy(self, x, attrs):
        return np.clip(x, 0, 6)


@register_follower
class HardSwish(ActivationKind):
    """``x * relu6(x + 3) / 6``: as the ONNX frontend imports ``HardSwish``, as ``x * HardSigmoid(x)``, and written
    out by hand."""

    name = "hardswish"
    forms = (Form(Step("relax.add", 3.0), Step("relax.clip", bounds=(0, 6)), Step("relax.divide", 6.0),
                  Step("relax.multiply", X)),
             Form(Step("relax.multiply", 1 / 6), Step("relax.add", 0.5), Step("relax.clip", bounds=(0, 1)),
                  Step("relax.multiply", X)),
             Form(Step("relax.add", 3.0), Step("relax.clip", bounds=(0, 6)), Step("relax.multiply", X),
                  Step("relax.divide", 6.0)))
    tolerance = 5e-7

    def tir(self, x, attrs):
        return x * clamp(x + const(3.0, x), 0.0, 6.0) * const(1 / 6, x)

    def numpy(self, x, attrs):
        return x * np.clip(x + 3, 0, 6) / 6


@register_follower
class Clip(ActivationKind):
    """``clip(x, min, max)`` with other bounds than ReLU6's."""

    name, forms = "clip", (Form(Step("relax.clip", bounds=("min", "max"))),)
    attributes = {"min": -1.0, "max": 1.0}

    def tir(self, x, attrs):
        return clamp(x, attrs["min"], attrs["max"])

    def numpy(self, x, attrs):
        return np.clip(x, attrs["min"], attrs["max"])


@register_follower
class LeakyReLU(ActivationKind):
    """``nn.leakyrelu``, whose slope is an attribute of the call rather than an operand (so no ``Form``)."""

    name, forms = "leaky_relu", ()
    attributes = {"alpha": 0.1}

    def match(self, bindings, index, shape):
        if bindings.op_name(index) != "relax.nn.leakyrelu":
            return None
        return FollowerMatch({"alpha": float(bindings.value(index).attrs.alpha)})

    def written(self, op, x):
        return [relax.op.nn.leakyrelu(x, op.attrs["alpha"])]

    def tir(self, x, attrs):
        return tvm.tirx.Select(x > const(0.0, x), x, x * const(attrs["alpha"], x))

    def numpy(self, x, attrs):
        return np.where(x > 0, x, x * attrs["alpha"])


@register_follower
class SiLU(ActivationKind):
    """``x * sigmoid(x)`` (Swish): ``nn.silu``, or a sigmoid whose one reader multiplies it by its input, as the ONNX
    frontend imports ``Mul(x, Sigmoid(x))``."""

    name = "silu"
    forms = (Form(Step("relax.nn.silu")), Form(Step("relax.sigmoid"), Step("relax.multiply", X)))
    tolerance = 2e-6

    def tir(self, x, attrs):
        return x * fast_math.sigmoid(x)

    def numpy(self, x, attrs):
        return x * _sigmoid(x)


@register_follower
class Mish(ActivationKind):
    """``x * tanh(softplus(x))``, as the ONNX frontend imports ``Mish``; computed as ``x * n / (n + 2)`` with ``n =
    e^x (e^x + 2)`` (one exp), which is ``x`` in float32 above x = 20."""

    name = "mish"
    forms = (Form(Step("relax.exp"), Step("relax.add", 1.0), Step("relax.log"), Step("relax.tanh"),
                  Step("relax.multiply", X)),
             Form(Step("relax.nn.softplus"), Step("relax.tanh"), Step("relax.multiply", X)))
    tolerance = 2e-6

    def tir(self, x, attrs):
        e = fast_math.exp(te.min(x, const(20.0, x)))
        n = e * (e + const(2.0, x))
        return x * n / (n + const(2.0, x))

    def numpy(self, x, attrs):
        return x * np.tanh(np.logaddexp(0, x))


@register_follower
class Sigmoid(ActivationKind):
    name, forms = "sigmoid", (Form(Step("relax.sigmoid")),)
    tolerance = 2e-6

    def tir(self, x, attrs):
        return fast_math.sigmoid(x)

    def numpy(self, x, attrs):
        return _sigmoid(x)


@register_follower
class HardSigmoid(ActivationKind):
    """``clip(alpha x + beta, 0, 1)``, as the ONNX frontend imports ``HardSigmoid``, or ``relu6(x + 3) / 6``."""

    name = "hardsigmoid"
    forms = (Form(Step("relax.multiply", "alpha"), Step("relax.add", "beta"), Step("relax.clip", bounds=(0, 1))),
             Form(Step("relax.add", 3.0), Step("relax.clip", bounds=(0, 6)), Step("relax.divide", 6.0),
                  attrs={"alpha": 1 / 6, "beta": 0.5}))
    attributes = {"alpha": 1 / 6, "beta": 0.5}

    def tir(self, x, attrs):
        return clamp(x * const(attrs["alpha"], x) + const(attrs["beta"], x), 0.0, 1.0)

    def numpy(self, x, attrs):
        return np.clip(x * attrs["alpha"] + attrs["beta"], 0, 1)


@register_follower
class GELU(ActivationKind):
    """``x Phi(x)`` with the erf (``nn.gelu``; ONNX import rewrites exporters' erf chains to it)."""

    name, forms = "gelu", (Form(Step("relax.nn.gelu")),)
    tolerance = 2e-6

    def tir(self, x, attrs):
        return x * (const(0.5, x) + fast_math.erf(x * const(0.5**0.5, x)) * const(0.5, x))

    def numpy(self, x, attrs):
        return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


@register_follower
class GELUTanh(ActivationKind):
    """GELU's tanh approximation (``nn.gelu_tanh``; GPT-2's ``gelu_new``)."""

    name, forms = "gelu_tanh", (Form(Step("relax.nn.gelu_tanh")),)
    tolerance = 2e-6

    def tir(self, x, attrs):
        inner = const(math.sqrt(2.0 / math.pi), x) * x * (const(1.0, x) + const(0.044715, x) * x * x)
        return const(0.5, x) * x * (const(1.0, x) + fast_math.tanh(inner))

    def numpy(self, x, attrs):
        return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


@register_follower
class Tanh(ActivationKind):
    name, forms = "tanh", (Form(Step("relax.tanh")),)
    tolerance = 2e-6

    def tir(self, x, attrs):
        return fast_math.tanh(x)

    def numpy(self, x, attrs):
        return np.tanh(x)
