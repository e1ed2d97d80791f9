"""One rewriting rule per Relax operator the ONNX frontend emits that the zoo's op vocabulary has a form for.

A rule ``rule(rw, var, call)`` returns the rewritten value of the binding ``var = call`` (see ``rewrite``): it
evaluates constant-only calls in numpy, keeps layers and clips pending so that what follows can fold into them, and
emits everything else through ``rw``; it raises ``OutsideVocabulary`` for a call the vocabulary has no form for
(a multiply of two activations, a mean over other axes, ...), which the rewriter then re-emits unchanged, as it
does every operator without a rule. ``OPERATORS`` maps operator names to rules.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
from tvm import relax

from search.zoo.onnx.rewrite import Rewriter, Rule
from search.zoo.onnx.values import (
    Items,
    OutsideVocabulary,
    PendingBlocks,
    PendingClip,
    PendingConv,
    PendingDense,
    PendingLayer,
    per_channel,
    shape_of,
)

_NUMPY_BINARY = {
    "relax.add": np.add,
    "relax.subtract": np.subtract,
    "relax.multiply": np.multiply,
    "relax.divide": np.divide,
}
_CLIP_KERNELS = re.compile(r"(maximum|minimum)\d*")


# ------------------------------------------------------------------------------------------------ layers
def conv2d(rw: Rewriter, var, call):
    a = call.attrs
    weight = rw.value(call.args[1])
    if (str(a.data_layout), str(a.kernel_layout)) != ("NCHW", "OIHW") or str(a.out_layout) not in ("", "NCHW") \
            or not isinstance(weight, np.ndarray):
        raise OutsideVocabulary
    weight = weight.astype(np.float64)
    return PendingConv(rw.tensor(call.args[0]), weight, np.zeros(weight.shape[0]), a)


def conv2d_transpose(rw: Rewriter, var, call):
    """A transposed convolution whose kernel equals its stride (no padding, output padding, dilation or groups):
    ``PendingBlocks``, a 1x1 conv2d and its channels put in place; any other is re-emitted."""
    a = call.attrs
    weight = rw.value(call.args[1])
    if not isinstance(weight, np.ndarray) or weight.ndim != 4 or int(a.groups) != 1 \
            or (str(a.data_layout), str(a.kernel_layout)) != ("NCHW", "IOHW") or str(a.out_layout) not in ("", "NCHW") \
            or [int(s) for s in a.strides] != list(weight.shape[2:]) or any(int(p) for p in a.padding) \
            or any(int(p) for p in a.output_padding) or any(int(d) != 1 for d in a.dilation):
        raise OutsideVocabulary
    weight = weight.astype(np.float64)
    return PendingBlocks(rw.tensor(call.args[0]), weight, np.zeros(weight.shape[1]))


def matmul(rw: Rewriter, var, call):
    weight = rw.value(call.args[1])
    if not isinstance(weight, np.ndarray) or weight.ndim != 2:
        raise OutsideVocabulary
    x = rw.tensor(call.args[0])
    if len(shape_of(x)) != 2:
        raise OutsideVocabulary
    return PendingDense(x, weight.astype(np.float64), np.zeros(weight.shape[1]))


def batch_norm(rw: Rewriter, var, call):
    a = call.attrs
    params = rw.constants(call.args[1:])
    if bool(a.training) or params is None or int(a.axis) != 1:
        raise OutsideVocabulary
    gamma, beta, mean, variance = (p.astype(np.float64) for p in params)
    if not bool(a.scale):
        gamma = np.ones_like(gamma)
    if not bool(a.center):
        beta = np.zeros_like(beta)
    scale = gamma / np.sqrt(variance + float(a.epsilon))
    shift = beta - mean * scale
    data = call.args[0]
    value = rw.value(data)
    if isinstance(value, PendingConv) and rw.sole_use(data):
        out = value.folded(scale, shift)
    else:
        x = rw.tensor(data)
        if len(shape_of(x)) != 4:
            raise OutsideVocabulary
        out = rw.emit_scale_shift(x, scale, shift)
    return Items({0: out}, "BatchNormalization")


# ------------------------------------------------------------------------------------------------ arithmetic
def binary(rw: Rewriter, var, call):
    """add / subtract / multiply / divide: numpy on constants, folded or per-channel with one constant side."""
    name = call.op.name
    lhs, rhs = call.args
    consts = rw.constants(call.args)
    if consts is not None:
        out = _NUMPY_BINARY[name](*consts)
        return out.astype(consts[0].dtype) if consts[0].dtype == consts[1].dtype else out
    lv, rv = rw.value(lhs), rw.value(rhs)
    if isinstance(lv, np.ndarray) or isinstance(rv, np.ndarray):
        if isinstance(lv, np.ndarray):
            if name in ("relax.subtract", "relax.divide"):  # constant - x, constant / x
                raise OutsideVocabulary
            lhs, rhs, lv, rv = rhs, lhs, rv, lv
        const = rv.astype(np.float64)
        if name == "relax.subtract":
            name, const = "relax.add", -const
        elif name == "relax.divide":
            name, const = "relax.multiply", 1.0 / const
        return _with_constant(rw, lhs, lv, const, add=name == "relax.add")
    a, b = rw.tensor(lhs), rw.tensor(rhs)
    if name != "relax.add" or shape_of(a) != shape_of(b):  # only a residual add of two activations
        raise OutsideVocabulary
    return rw.emit(relax.op.add(a, b), "add")


def _with_constant(rw: Rewriter, expr, value, const: np.ndarray, *, add: bool):
    """``expr + const`` (``add``) or ``expr * const``: folded into a pending layer if possible, else per-channel
    on a 4-D float32 activation."""
    step = "shift" if add else "scale"
    if isinstance(value, PendingLayer) and rw.sole_use(expr):
        vec = per_channel(const, value.channels, value.rank)
        if vec is not None:
            return value.folded(**{step: vec})
    x = rw.tensor(expr)
    shape = shape_of(x)
    vec = per_channel(const, shape[1], 4) if len(shape) == 4 and x.ty.dtype == "float32" else None
    if vec is None:
        raise OutsideVocabulary
    return rw.emit_scale_shift(x, **{step: vec})


# ------------------------------------------------------------------------------------------------ activations
def relu(rw: Rewriter, var, call):
    return rw.emit(relax.op.nn.relu(rw.tensor(call.args[0])), "relu")


def clip(rw: Rewriter, var, call):
    bounds = rw.constants(call.args[1:])
    if bounds is None or any(b.size != 1 for b in bounds):
        raise OutsideVocabulary
    return PendingClip(rw.tensor(call.args[0]), *(float(b.reshape(())) for b in bounds))


def clip_kernel(rw: Rewriter, var, call):
    """The frontend lowers Clip to ``call_tir`` of TIR ``maximum`` / ``minimum`` kernels with a scalar bound; other
    ``call_tir`` calls are re-emitted."""
    kernel = call.args[0]
    name = getattr(kernel, "name_hint", "")
    args = call.args[1].fields if isinstance(call.args[1], relax.Tuple) else []
    match = _CLIP_KERNELS.fullmatch(name)
    if not match or len(args) != 2:
        raise OutsideVocabulary
    bound = rw.value(args[1])
    if not isinstance(bound, np.ndarray) or bound.size != 1:
        raise OutsideVocabulary
    bound = float(bound.reshape(()))
    data = args[0]
    value = rw.value(data)
    pending = value if isinstance(value, PendingClip) and rw.sole_use(data) else PendingClip(rw.tensor(data))
    if match.group(1) == "maximum":
        return replace(pending, low=max(pending.low, bound))
    return replace(pending, high=min(pending.high, bound))


def dropout(rw: Rewriter, var, call):
    return Items({0: rw.value(call.args[0])}, "Dropout")


# ------------------------------------------------------------------------------------------------ pooling
def pool2d(rw: Rewriter, var, call):
    """max_pool2d, avg_pool2d and global adaptive_avg_pool2d in NCHW, re-emitted unchanged."""
    op = call.op.name
    if str(call.attrs.layout) != "NCHW" or (op == "relax.nn.adaptive_avg_pool2d" and shape_of(var)[2:] != (1, 1)):
        raise OutsideVocabulary
    kind = "maxpool" if op == "relax.nn.max_pool2d" else "avgpool"
    return rw.emit(relax.Call(call.op, [rw.tensor(a) for a in call.args], call.attrs, call.ty_args), kind)


def mean(rw: Rewriter, var, call):
    x = rw.tensor(call.args[0])
    shape = shape_of(x)
    axes = sorted(int(a) % len(shape) for a in call.attrs.axis) if call.attrs.axis is not None else []
    if len(shape) != 4 or axes != [2, 3]:  # only global average pooling
        raise OutsideVocabulary
    out = rw.emit(relax.op.nn.adaptive_avg_pool2d(x, output_size=(1, 1)), "avgpool")
    if not bool(call.attrs.keepdims):
        out = rw.emit(relax.op.reshape(out, shape[:2]), "flatten")
    return out


# ------------------------------------------------------------------------------------------------ shapes
def concat(rw: Rewriter, var, call):
    tensors = call.args[0]
    if not isinstance(tensors, relax.Tuple):
        raise OutsideVocabulary
    consts = rw.constants(tensors.fields)
    if consts is not None:
        return np.concatenate(consts, axis=int(call.attrs.axis))
    parts = [rw.tensor(f) for f in tensors.fields]
    if int(call.attrs.axis) % len(shape_of(parts[0])) != 1:
        raise OutsideVocabulary
    return rw.emit(relax.op.concat(parts, axis=1), "concat")


def reshape(rw: Rewriter, var, call):
    shape = shape_of(var)
    value = rw.value(call.args[0])
    if isinstance(value, np.ndarray):
        return value.reshape(shape)
    return rw.emit(relax.op.reshape(rw.tensor(call.args[0]), shape), "reshape")


def permute_dims(rw: Rewriter, var, call):
    axes = None if call.attrs.axes is None else [int(a) for a in call.attrs.axes]
    value = rw.value(call.args[0])
    if isinstance(value, np.ndarray):
        return np.transpose(value, axes)
    x = rw.tensor(call.args[0])
    axes = axes if axes is not None else list(reversed(range(len(shape_of(x)))))
    return rw.emit(relax.op.permute_dims(x, axes), "transpose")


def _constant_only(fold: Callable[..., Any]) -> Rule:
    """A rule evaluating an operator on constants (Clip bounds, casts): ``fold(var, call, *x)``; on activations the
    call is re-emitted."""

    def rule(rw: Rewriter, var, call):
        consts = rw.constants(call.args)
        if consts is None:
            raise OutsideVocabulary
        return np.asarray(fold(var, call, *consts))

    return rule


def _reshape_to_binding(var, call, x):
    return x.reshape(shape_of(var))


OPERATORS: dict[str, Rule] = {
    "relax.nn.conv2d": conv2d,
    "relax.nn.conv2d_transpose": conv2d_transpose,
    "relax.matmul": matmul,
    "relax.nn.batch_norm": batch_norm,
    **dict.fromkeys(_NUMPY_BINARY, binary),
    "relax.nn.relu": relu,
    "relax.clip": clip,
    "relax.call_tir": clip_kernel,
    "relax.nn.dropout": dropout,
    **dict.fromkeys(["relax.nn.max_pool2d", "relax.nn.avg_pool2d", "relax.nn.adaptive_avg_pool2d"], pool2d),
    "relax.mean": mean,
    "relax.concat": concat,
    "relax.reshape": reshape,
    "relax.permute_dims": permute_dims,
    "relax.isnan": _constant_only(lambda var, call, x: np.isnan(x)),
    "relax.where": _constant_only(lambda var, call, *args: np.where(*args)),
    "relax.astype": _constant_only(lambda var, call, x: x.astype(str(call.attrs.dtype))),
    "relax.squeeze": _constant_only(_reshape_to_binding),
    "relax.expand_dims": _constant_only(_reshape_to_binding),
}
