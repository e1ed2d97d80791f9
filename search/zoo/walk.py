"""A zoo network as a plain list of calls, for re-emitting it in other frameworks (PyTorch, ONNX).

``walk(mod)`` reads ``main``'s dataflow block (the zoo's op vocabulary, see ``search/zoo/__init__.py``) into a
``Network``: its input, its calls in order and its outputs. Constants become numpy arrays. A convolution or matmul
whose only user adds a constant takes that constant as its bias (``conv2d`` / ``dense`` with three inputs), which is
how PyTorch and ONNX models carry a folded BatchNorm. HardSwish and HardSigmoid, several ops each as the zoo writes
them (``search.zoo.activations``), become one call each (``hardswish``; ``hardsigmoid`` with ``alpha`` and ``beta``);
every other op keeps its Relax meaning.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import tvm
from tvm import relax

from search.errors import SearchError
from search.relax_exprs import var_reads

Value = str | np.ndarray
"""A call input: the name of an earlier value (the network input or a call's output) or a constant."""

OPS = {
    "relax.nn.conv2d": "conv2d",
    "relax.matmul": "matmul",
    "relax.add": "add",
    "relax.multiply": "multiply",
    "relax.nn.relu": "relu",
    "relax.clip": "clip",
    "relax.nn.silu": "silu",
    "relax.sigmoid": "sigmoid",
    "relax.divide": "divide",
    "relax.nn.max_pool2d": "max_pool2d",
    "relax.nn.avg_pool2d": "avg_pool2d",
    "relax.nn.adaptive_avg_pool2d": "global_avg_pool",
    "relax.concat": "concat",
    "relax.reshape": "reshape",
    "relax.permute_dims": "permute",
    "relax.subtract": "subtract",
    "relax.nn.gelu": "gelu",
    "relax.nn.softmax": "softmax",
    "relax.nn.layer_norm": "layer_norm",
    "relax.strided_slice": "slice",
    "relax.image.resize2d": "upsample",
}


@dataclass(frozen=True)
class Call:
    """``name = op(*inputs, **attrs)``.

    Attributes by op: conv2d ``strides``, ``padding`` (top, left, bottom, right), ``groups``; max_pool2d and
    avg_pool2d ``pool_size``, ``strides``, ``padding``; clip ``min``, ``max``; concat ``axis``; reshape ``shape``;
    permute ``axes``; softmax ``axis``; layer_norm ``epsilon`` (over the last axis); slice ``axes``, ``begin``,
    ``end``; upsample (nearest, asymmetric coordinates rounded down) ``scales`` (height, width); hardsigmoid
    ``alpha``, ``beta`` (``clip(alpha * x + beta, 0, 1)``). conv2d and dense take (x, weight[, bias]); dense's weight
    is (in, out) as in ``x @ weight``; layer_norm takes (x, gamma, beta).
    """

    name: str
    op: str
    inputs: tuple[Value, ...]
    attrs: dict[str, Any]


@dataclass(frozen=True)
class Network:
    input_name: str
    input_shape: tuple[int, ...]
    calls: tuple[Call, ...]
    outputs: tuple[str, ...]
    output_shapes: tuple[tuple[int, ...], ...]


def _ints(values) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


def _number(expr) -> float:
    while hasattr(expr, "value"):
        expr = expr.value
    return float(expr)


def _attrs(op: str, call: relax.Call) -> dict[str, Any]:
    a = call.attrs
    if op == "conv2d":
        if _ints(a.dilation) != (1, 1) or a.data_layout != "NCHW" or a.kernel_layout != "OIHW":
            raise SearchError(f"conv2d with dilation {_ints(a.dilation)} or layouts {a.data_layout}/{a.kernel_layout}"
                              " is outside the zoo vocabulary")
        return {"strides": _ints(a.strides), "padding": _ints(a.padding), "groups": int(a.groups)}
    if op in ("max_pool2d", "avg_pool2d"):
        if _ints(a.dilation) != (1, 1) or bool(a.ceil_mode) or (op == "avg_pool2d" and not a.count_include_pad):
            raise SearchError(f"{op} with dilation, ceil_mode or count_include_pad=False is outside the zoo vocabulary")
        return {"pool_size": _ints(a.pool_size), "strides": _ints(a.strides), "padding": _ints(a.padding)}
    if op == "global_avg_pool" and _ints(a.output_size) != (1, 1):
        raise SearchError(f"adaptive_avg_pool2d to {_ints(a.output_size)} is outside the zoo vocabulary")
    if op == "clip":
        return {"min": _number(call.args[1]), "max": _number(call.args[2])}
    if op == "concat":
        return {"axis": int(a.axis)}
    if op == "reshape":
        return {"shape": _ints(call.args[1].values)}
    if op == "permute":
        return {"axes": _ints(a.axes)}
    if op == "softmax":
        return {"axis": int(a.axis)}
    if op == "layer_norm":
        if _ints(a.axes) not in ((-1,), (len(call.args[0].ty.shape) - 1,)) or not (a.center and a.scale):
            raise SearchError(f"layer_norm over axes {_ints(a.axes)} is outside the zoo vocabulary")
        return {"epsilon": float(a.epsilon)}
    if op == "slice":
        if call.args[4:] and call.args[4] is not None:
            raise SearchError("strided_slice with strides is outside the zoo vocabulary")
        return {name: tuple(int(_number(v)) for v in arg.fields) for name, arg in zip(("axes", "begin", "end"),
                                                                                     call.args[1:4])}
    if op == "upsample":
        if (a.method, a.coordinate_transformation_mode, a.rounding_method) != ("nearest_neighbor", "asymmetric",
                                                                                "floor") or a.layout != "NCHW":
            raise SearchError(f"resize2d {a.method} ({a.coordinate_transformation_mode}, {a.rounding_method}) in "
                              f"{a.layout} is outside the zoo vocabulary")
        size, shape = _ints(call.args[1].values), _ints(call.args[0].ty.shape)
        return {"scales": (size[0] / shape[2], size[1] / shape[3])}
    return {}


def _value(expr, where: str) -> Value:
    if isinstance(expr, tvm.ir.expr.Constant):
        return expr.value.numpy()
    if isinstance(expr, relax.Var):
        return expr.name
    raise SearchError(f"binding {where!r}: argument {expr} is neither a variable nor a constant")


def walk(mod: tvm.IRModule) -> Network:
    """``mod``'s ``main`` as a ``Network``; SearchError for anything outside the zoo vocabulary."""
    func = mod["main"]
    if len(func.params) != 1:
        raise SearchError(f"main takes {len(func.params)} inputs; a zoo network takes one")
    data = func.params[0]
    bindings = [b for block in func.body.blocks for b in block.bindings]
    uses = Counter(v.name for b in bindings for v in var_reads(b.value))
    shapes = {b.var.name: b.var.ty.shape for b in bindings if isinstance(b.var.ty, relax.TensorType)}
    outputs: tuple[str, ...] = ()
    calls: list[Call] = []
    for binding in bindings:
        name, value = binding.var.name, binding.value
        if isinstance(value, relax.Tuple):
            outputs = tuple(v.name for v in var_reads(value))
            continue
        op = OPS.get(value.op.name) if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) else None
        if op is None:
            raise SearchError(f"binding {name!r}: {value} is outside the zoo vocabulary")
        if op == "concat":
            fields = value.args[0].fields
        else:
            fields = value.args[:1] if op in ("clip", "reshape", "slice", "upsample") else value.args
        inputs = tuple(_value(a, name) for a in fields)
        if op == "matmul" and not isinstance(inputs[1], np.ndarray):
            raise SearchError(f"binding {name!r}: matmul by a non-constant is outside the zoo vocabulary")
        previous = calls[-1] if calls else None
        if (op == "add" and previous is not None and previous.op in ("conv2d", "matmul") and len(previous.inputs) == 2
                and inputs[0] == previous.name and isinstance(inputs[1], np.ndarray) and uses[previous.name] == 1):
            calls[-1] = Call(name, "conv2d" if previous.op == "conv2d" else "dense",
                             (*previous.inputs, inputs[1].reshape(-1)), previous.attrs)
            continue
        calls.append(Call(name, op, inputs, _attrs(op, value)))
    if not outputs:
        outputs = (bindings[-1].var.name,)
    calls = [Call(c.name, "dense", c.inputs, c.attrs) if c.op == "matmul" else c
             for c in _fuse_activations(calls, uses)]
    return Network(data.name, _ints(data.ty.shape), tuple(calls), outputs, tuple(_ints(shapes[o]) for o in outputs))


def _scalar(value: Value, expected: float | None = None) -> float | None:
    """A one-element constant's value (if it equals ``expected``, when given); None for anything else."""
    if not isinstance(value, np.ndarray) or value.size != 1:
        return None
    number = float(value.reshape(()))
    return number if expected is None or number == expected else None


def _names(call: Call) -> tuple[str | None, ...]:
    """``call``'s inputs, constants as None."""
    return tuple(v if isinstance(v, str) else None for v in call.inputs)


def _hardswish(tail: list[Call], uses: Counter) -> Call | None:
    """``multiply(x, divide(clip(add(x, 3), 0, 6), 6))`` ending ``tail`` as one ``hardswish`` call."""
    if len(tail) < 4 or [c.op for c in tail[-4:]] != ["add", "clip", "divide", "multiply"]:
        return None
    add, clip, divide, multiply = tail[-4:]
    x = _names(add)[0]
    if (x is None or _scalar(add.inputs[1], 3.0) is None or _names(clip) != (add.name,)
            or (clip.attrs["min"], clip.attrs["max"]) != (0.0, 6.0) or _names(divide)[0] != clip.name
            or _scalar(divide.inputs[1], 6.0) is None or _names(multiply) != (x, divide.name)
            or any(uses[c.name] != 1 for c in (add, clip, divide))):
        return None
    return Call(multiply.name, "hardswish", (x,), {})


def _hardsigmoid(tail: list[Call], uses: Counter) -> Call | None:
    """``clip(add(multiply(alpha, x), beta), 0, 1)`` ending ``tail`` as one ``hardsigmoid`` call."""
    if len(tail) < 3 or [c.op for c in tail[-3:]] != ["multiply", "add", "clip"]:
        return None
    multiply, add, clip = tail[-3:]
    alpha, beta, x = _scalar(multiply.inputs[0]), _scalar(add.inputs[1]), _names(multiply)[1]
    if (alpha is None or beta is None or x is None or _names(add)[0] != multiply.name or _names(clip) != (add.name,)
            or (clip.attrs["min"], clip.attrs["max"]) != (0.0, 1.0) or uses[multiply.name] != 1 or uses[add.name] != 1):
        return None
    return Call(clip.name, "hardsigmoid", (x,), {"alpha": alpha, "beta": beta})


def _fuse_activations(calls: list[Call], uses: Counter) -> list[Call]:
    """``calls`` with each HardSwish and HardSigmoid as one call."""
    fused: list[Call] = []
    for call in calls:
        fused.append(call)
        if (hardswish := _hardswish(fused, uses)) is not None:
            fused[-4:] = [hardswish]
        elif (hardsigmoid := _hardsigmoid(fused, uses)) is not None:
            fused[-3:] = [hardsigmoid]
    return fused
