"""The elementwise work a kernel kind absorbs around its operator: ``act(op(...) + bias + residual)`` after it and a
pre-activation ``relu(data * scale + shift)`` before it.

``fused_chain`` recognises the first in a Relax function: ``op -> add(bias) -> add(residual) -> activation`` (any
registered activation kind, ``search.followers``, in any of its forms), or ``op -> add(bias) -> activation ->
add(residual)``, each step only when the previous value is read by that step alone (the activation's bindings,
together) and the binding is not claimed yet;
``fused_prologue`` the second (``x -> multiply(scale) -> add(shift) -> relu -> op``, the same conditions) and
``fused_gate`` a gate before it (``multiply(x, gate) -> op``, gate an (N, C, 1, 1) activation).
``apply_epilogue`` and ``apply_prologue`` are their numpy references.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tvm import relax

from search.bindings import Bindings, tensor_shape
from search.followers import FOLLOWERS, ActivationKind, activation_kind, longest_match
from search.kinds.base import Match
from search.templates.workloads import Epilogue


@dataclass(frozen=True)
class Chain:
    """The bindings of an operator and its epilogue, the bias (C,), the residual variable, the activation, its
    attributes, and whether the residual is added after the activation."""

    parts: tuple[int, ...]
    bias: np.ndarray | None
    residual: Any
    activation: str | None
    activation_attrs: dict[str, float] = field(default_factory=dict)
    residual_after_activation: bool = False

    def match(self, data, params: dict[str, np.ndarray]) -> Match:
        """A ``Match`` reading ``data`` (and the residual), with the epilogue as attributes and the bias as a param."""
        attrs = {"bias": self.bias is not None, "residual": self.residual is not None, "activation": self.activation}
        if self.activation_attrs:
            attrs["activation_attrs"] = dict(self.activation_attrs)
        if self.residual_after_activation:
            attrs["residual_after_activation"] = True
        params = {**params, **({"bias": self.bias} if self.bias is not None else {})}
        inputs = (data,) + ((self.residual,) if self.residual is not None else ())
        return Match(self.parts, inputs, attrs, params)


def fused_chain(bindings: Bindings, index: int, *, residual: bool) -> Chain:
    """The epilogue following the operator bound at ``index`` (a residual add only if ``residual``).

    C is the channel axis of a 4-D output and the last axis of any other. A bias is a constant of shape (C,) or
    (1, ..., 1, C) (other outputs), (1, C, 1, 1) or (C, 1, 1) (4-D outputs); a residual is a non-constant tensor of
    the output's shape; the activation is any registered activation kind (``search.followers.ActivationKind``).
    """
    var = bindings.var(index)
    out_shape = tensor_shape(var, var.name)
    channels = out_shape[1] if len(out_shape) == 4 else out_shape[-1]
    parts, bias, added = [index], None, None
    end, nxt = var, bindings.sole_user(var)
    if bindings.free(nxt) and bindings.op_name(nxt) == "relax.add":
        other = bindings.other_operand(nxt, end)
        value = None if other is None else bindings.const(other)
        if len(out_shape) == 4:
            allowed = [(1, channels, 1, 1), (channels, 1, 1)]
        else:
            allowed = [(channels,), (1,) * (len(out_shape) - 1) + (channels,)]
        if value is not None and value.shape in allowed:
            bias = value.reshape(-1).astype("float32")
            parts.append(nxt)
            end, nxt = bindings.var(nxt), bindings.sole_user(bindings.var(nxt))
    if residual and (added := _residual(bindings, nxt, end, out_shape)) is not None:
        parts.append(nxt)
        end, nxt = bindings.var(nxt), bindings.sole_user(bindings.var(nxt))
    found = fused_activation(bindings, end, out_shape)
    if found is None:
        return Chain(tuple(parts), bias, added, None)
    activation, attrs, claimed = found
    parts += claimed
    late = False
    if residual and added is None:  # a shortcut added after the activation
        end = bindings.var(claimed[-1])
        after = bindings.sole_user(end)
        added = _residual(bindings, after, end, out_shape)
        if added is not None:
            parts.append(after)
            late = True
    return Chain(tuple(parts), bias, added, activation, attrs, late)


def _residual(bindings: Bindings, index: int | None, value, shape: tuple[int, ...]):
    """The other operand of the unclaimed ``add`` at ``index`` reading ``value``, if it is an activation of
    ``shape``."""
    if not bindings.free(index) or bindings.op_name(index) != "relax.add":
        return None
    other = bindings.other_operand(index, value)
    if other is None or bindings.const(other) is not None or tensor_shape(other, other.name) != shape:
        return None
    return other


def fused_activation(bindings: Bindings, value, shape: tuple[int, ...]) -> tuple[str, dict, list[int]] | None:
    """(kind, attributes, bindings) of the registered activation applied to ``value``, if it reads nothing else and
    nothing else reads ``value`` or its intermediates."""
    users = bindings.users.get(value, [])
    if not users or bindings.outputs[value] or not bindings.free(users[0]):
        return None
    found = longest_match(bindings, users[0], shape, [k for k in FOLLOWERS.values() if isinstance(k, ActivationKind)])
    if found is None or not set(users) <= {users[0], *found[1].claims}:
        return None
    kind, match = found
    return kind.name, dict(match.attrs), [users[0], *match.claims]


@dataclass(frozen=True)
class Prologue:
    """The bindings of a pre-activation ``relu(source * scale + shift)``, its source and its (C,) constants."""

    parts: tuple[int, ...]
    source: Any
    scale: np.ndarray
    shift: np.ndarray


def _channel_constant(bindings: Bindings, index: int, channels: int) -> tuple[Any, np.ndarray] | None:
    """(the variable operand, the constant (C,)) of the binary call at ``index`` if one operand is a per-channel
    constant of shape (1, C, 1, 1) or (C, 1, 1) and the other is not constant."""
    lhs, rhs = bindings.value(index).args
    for value, other in ((bindings.const(rhs), lhs), (bindings.const(lhs), rhs)):
        if value is not None and value.shape in [(1, channels, 1, 1), (channels, 1, 1)] \
                and bindings.const(other) is None:
            return other, value.reshape(-1).astype("float32")
    return None


def fused_prologue(bindings: Bindings, data, index: int) -> Prologue | None:
    """The pre-activation ``relu(x * scale + shift)`` computing ``data``, the 4-D input of the operator bound at
    ``index``, if each of its three bindings is unclaimed and read only by the next (the operator reads ``data``
    only)."""
    shape = tensor_shape(data, data.name) if isinstance(data, relax.Var) else ()
    relu = bindings.index(data)
    if len(shape) != 4 or bindings.sole_user(data) != index or not bindings.free(relu) \
            or bindings.op_name(relu) != "relax.nn.relu":
        return None
    add = bindings.index(bindings.value(relu).args[0])
    if not bindings.free(add) or bindings.op_name(add) != "relax.add" or bindings.sole_user(bindings.var(add)) != relu:
        return None
    shifted = _channel_constant(bindings, add, shape[1])
    multiply = None if shifted is None else bindings.index(shifted[0])
    if not bindings.free(multiply) or bindings.op_name(multiply) != "relax.multiply" \
            or bindings.sole_user(bindings.var(multiply)) != add:
        return None
    scaled = _channel_constant(bindings, multiply, shape[1])
    if scaled is None:
        return None
    return Prologue((multiply, add, relu), scaled[0], scaled[1], shifted[1])


@dataclass(frozen=True)
class Gate:
    """The binding of a gate ``source * gate`` (squeeze-and-excitation's multiply), its source (N, C, H, W) and its
    gate (N, C, 1, 1), both activations."""

    index: int
    source: Any
    gate: Any


def fused_gate(bindings: Bindings, data, index: int) -> Gate | None:
    """The gate computing ``data``, the 4-D input of the operator bound at ``index``, if its binding is unclaimed and
    read by that operator only."""
    shape = tensor_shape(data, data.name) if isinstance(data, relax.Var) else ()
    multiply = bindings.index(data) if len(shape) == 4 else None
    if multiply is None or bindings.sole_user(data) != index or not bindings.free(multiply) \
            or bindings.op_name(multiply) != "relax.multiply" or shape[2] * shape[3] == 1:
        return None
    operands = bindings.value(multiply).args
    if not all(isinstance(x, relax.Var) and bindings.const(x) is None for x in operands):
        return None
    for source, gate in (operands, operands[::-1]):
        if tensor_shape(source, source.name) == shape and tensor_shape(gate, gate.name) == (*shape[:2], 1, 1):
            return Gate(multiply, source, gate)
    return None


def apply_prologue(data: np.ndarray, scale: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """``relu(data * scale + shift)`` per channel (axis 1), in numpy."""
    return np.maximum(data * scale.reshape(1, -1, 1, 1) + shift.reshape(1, -1, 1, 1), 0)


def packed_bias(spec, params: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The bias argument of a template kernel, a contiguous (C,) vector, if ``spec``'s epilogue has one; else []."""
    if not spec.epilogue.bias:
        return []
    return [np.ascontiguousarray(params["bias"], dtype=spec.workload.dtype).reshape(-1)]


def apply_epilogue(acc: np.ndarray, epilogue: Epilogue, bias: np.ndarray | None, residual: np.ndarray | None = None
                   ) -> np.ndarray:
    """``act(acc + bias + residual)`` (or ``act(acc + bias) + residual``) in numpy, on logical arrays (channels on
    axis 1)."""
    shape = [1] * acc.ndim
    shape[1] = -1
    late = epilogue.residual_after_activation
    out = acc + (bias.reshape(shape) if epilogue.bias else 0) + (residual if epilogue.residual and not late else 0)
    if epilogue.activation is not None:
        out = activation_kind(epilogue.activation).numpy(out, dict(epilogue.activation_attrs))
    return out + residual if late else out
