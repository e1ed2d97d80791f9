"""The zoo's activations, each as the Relax ops TVM's ONNX frontend imports it as, and as numpy.

==============  ================================================================================================
``relu``        ``R.nn.relu(x)``
``relu6``       ``R.clip(x, 0.0, 6.0)``
``silu``        ``R.nn.silu(x)`` (x * sigmoid(x))
``sigmoid``     ``R.sigmoid(x)``
``gelu``        ``R.nn.gelu(x)`` (the erf form)
``hardswish``   ``R.multiply(x, R.divide(R.clip(R.add(x, 3), 0, 6), 6))``: the frontend's HardSwish
``hardsigmoid`` ``R.clip(R.add(R.multiply(1/6, x), 0.5), 0, 1)``: the frontend's HardSigmoid with PyTorch's alpha 1/6
                and beta 0.5 (``relu6(x + 3) / 6``)
==============  ================================================================================================

Constants are float32 scalars (shape ()); the clips of HardSwish and HardSigmoid have integer bounds, as the frontend
writes them. The last op of an activation gets the name it is given, the ops before it that name with ``_add``,
``_clip``, ``_div`` or ``_mul`` appended.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import erf
from tvm import relax

Emit = Callable[[relax.Expr, str], relax.Var]
"""Binds an expression to a new variable of the given name."""

HARDSIGMOID_ALPHA = float(np.float32(1.0 / 6.0))
HARDSIGMOID_BETA = 0.5


@dataclass(frozen=True)
class Activation:
    """``emit(emit, x, name)`` binds the activation of ``x``; ``numpy(s)`` computes it in ``s``'s precision."""

    emit: Callable[[Emit, relax.Expr, str], relax.Var]
    numpy: Callable[[np.ndarray], np.ndarray]


def _f32(value: float) -> relax.Expr:
    return relax.const(value, "float32")


def _hardswish(emit: Emit, x: relax.Expr, name: str) -> relax.Var:
    shifted = emit(relax.op.add(x, _f32(3)), f"{name}_add")
    clipped = emit(relax.op.clip(shifted, 0, 6), f"{name}_clip")
    gate = emit(relax.op.divide(clipped, _f32(6)), f"{name}_div")
    return emit(relax.op.multiply(x, gate), name)


def _hardsigmoid(emit: Emit, x: relax.Expr, name: str) -> relax.Var:
    scaled = emit(relax.op.multiply(_f32(HARDSIGMOID_ALPHA), x), f"{name}_mul")
    shifted = emit(relax.op.add(scaled, _f32(HARDSIGMOID_BETA)), f"{name}_add")
    return emit(relax.op.clip(shifted, 0, 1), name)


def sigmoid_np(s: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * s))  # = 1 / (1 + exp(-s)) without overflow


def gelu_np(s: np.ndarray) -> np.ndarray:
    """GELU in its erf form."""
    return 0.5 * s * (1.0 + erf(s / np.sqrt(2.0)))


ACTIVATIONS: dict[str, Activation] = {
    "relu": Activation(lambda emit, x, name: emit(relax.op.nn.relu(x), name), lambda s: np.maximum(s, 0)),
    "relu6": Activation(lambda emit, x, name: emit(relax.op.clip(x, 0.0, 6.0), name), lambda s: np.clip(s, 0, 6)),
    "silu": Activation(lambda emit, x, name: emit(relax.op.nn.silu(x), name), lambda s: s * sigmoid_np(s)),
    "sigmoid": Activation(lambda emit, x, name: emit(relax.op.sigmoid(x), name), sigmoid_np),
    "hardswish": Activation(_hardswish, lambda s: s * np.clip(s + 3, 0, 6) / 6),
    "gelu": Activation(lambda emit, x, name: emit(relax.op.nn.gelu(x), name), gelu_np),
    "hardsigmoid": Activation(_hardsigmoid, lambda s: np.clip(HARDSIGMOID_ALPHA * s + HARDSIGMOID_BETA, 0, 1)),
}
