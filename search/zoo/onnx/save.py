"""A zoo network as an ONNX model with the same weights, for timing ONNX Runtime on exactly the same network.

``to_onnx(mod)`` turns ``search.zoo.walk.walk(mod)`` into an ONNX graph (opset ``OPSET``): Conv with the folded
BatchNorm as its bias, Gemm for dense layers, pools, Concat, Reshape, Transpose, HardSwish, HardSigmoid; constants
are initializers. The other activations, normalisations and slicing are written as PyTorch exports them (SiLU as
``Mul(x, Sigmoid(x))``, GELU as its erf chain: ``_emit_elementwise_or_shape``).
``load_onnx`` reads the result back into the same vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import tvm
from onnx import TensorProto, helper, numpy_helper

from search.errors import SearchError
from search.zoo.walk import Call, walk

OPSET = 17
IR_VERSION = 8
"""The ONNX IR version of opset 17 (onnx 1.23 writes 14 by default, which ONNX Runtime 1.31 cannot read)."""


def to_onnx(mod: tvm.IRModule) -> onnx.ModelProto:
    """An ONNX model computing ``mod``'s ``main`` (float32, NCHW), checked with ``onnx.checker``."""
    network = walk(mod)
    nodes: list[onnx.NodeProto] = []
    initializers: list[onnx.TensorProto] = []

    def arg(value, dtype=np.float32) -> str:
        if isinstance(value, str):
            return value
        name = f"c{len(initializers)}"
        initializers.append(numpy_helper.from_array(np.ascontiguousarray(value, dtype=dtype), name))
        return name

    def node(op: str, inputs: list[str], output: str, **attrs) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def emit(call: Call) -> None:
        x = [arg(v) for v in call.inputs]
        a, out = call.attrs, call.name
        match call.op:
            case "conv2d":
                kh, kw = np.shape(call.inputs[1])[2:]
                node("Conv", x, out, strides=list(a["strides"]), pads=list(a["padding"]), group=a["groups"],
                     kernel_shape=[int(kh), int(kw)])
            case "dense":
                node("Gemm", x, out)
            case "add" | "multiply" | "relu":
                node({"add": "Add", "multiply": "Mul", "relu": "Relu"}[call.op], x, out)
            case "clip":
                node("Clip", [x[0], arg(np.float32(a["min"])), arg(np.float32(a["max"]))], out)
            case "max_pool2d":
                node("MaxPool", x, out, kernel_shape=list(a["pool_size"]), strides=list(a["strides"]),
                     pads=list(a["padding"]))
            case "avg_pool2d":
                node("AveragePool", x, out, kernel_shape=list(a["pool_size"]), strides=list(a["strides"]),
                     pads=list(a["padding"]), count_include_pad=1)
            case "global_avg_pool":
                node("GlobalAveragePool", x, out)
            case "concat":
                node("Concat", x, out, axis=a["axis"])
            case "reshape":
                node("Reshape", [x[0], arg(np.asarray(a["shape"]), np.int64)], out)
            case "permute":
                node("Transpose", x, out, perm=list(a["axes"]))
            case "divide" | "hardswish":
                node({"divide": "Div", "hardswish": "HardSwish"}[call.op], x, out)
            case "hardsigmoid":
                node("HardSigmoid", x, out, alpha=a["alpha"], beta=a["beta"])
            case _:
                _emit_elementwise_or_shape(call, x, node, arg)

    for call in network.calls:
        emit(call)
    inputs = [helper.make_tensor_value_info(network.input_name, TensorProto.FLOAT, list(network.input_shape))]
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))
               for name, shape in zip(network.outputs, network.output_shapes)]
    graph = helper.make_graph(nodes, "zoo_network", inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tessera",
                              ir_version=IR_VERSION)
    onnx.checker.check_model(model)
    return model


def erf_gelu(node: Callable[..., str], const: Callable[[np.ndarray, str], str], x: str, name: str) -> str:
    """``x * 0.5 * (1 + erf(x / sqrt(2)))`` as PyTorch exports ``nn.GELU()`` (``Div``, ``Erf``, ``Add``, ``Mul``,
    ``Mul``); ``node(op, inputs, output)`` and ``const(value, name)`` add a node and an initializer and return their
    names."""
    erf = node("Erf", [node("Div", [x, const(np.float32(np.sqrt(2.0)), f"{name}.sqrt2")], f"{name}.scaled")],
               f"{name}.erf")
    one = node("Add", [erf, const(np.float32(1.0), f"{name}.one")], f"{name}.one_plus")
    return node("Mul", [node("Mul", [x, one], f"{name}.product"), const(np.float32(0.5), f"{name}.half")], name)


def _emit_elementwise_or_shape(call: Call, x: list[str], node: Callable[..., str], arg: Callable[..., str]) -> None:
    """The ONNX nodes of a call outside the CNN vocabulary: SiLU as ``Mul(x, Sigmoid(x))``, GELU as its erf chain,
    ``LayerNormalization``, ``Softmax``, ``Sigmoid``, ``Sub``, ``Slice``, nearest ``Resize``."""
    a, out = call.attrs, call.name
    match call.op:
        case "silu":
            node("Mul", [x[0], node("Sigmoid", x, f"{out}.sigmoid")], out)
        case "gelu":
            erf_gelu(node, lambda value, name: arg(value), x[0], out)
        case "sigmoid" | "subtract":
            node({"sigmoid": "Sigmoid", "subtract": "Sub"}[call.op], x, out)
        case "softmax":
            node("Softmax", x, out, axis=a["axis"])
        case "layer_norm":
            node("LayerNormalization", x, out, axis=-1, epsilon=a["epsilon"])
        case "slice":
            node("Slice", [x[0], *(arg(np.asarray(a[key]), np.int64) for key in ("begin", "end", "axes"))], out)
        case "upsample":
            node("Resize", [x[0], "", arg(np.asarray([1.0, 1.0, *a["scales"]]))], out, mode="nearest",
                 coordinate_transformation_mode="asymmetric", nearest_mode="floor")
        case _:
            raise SearchError(f"{call.name}: no ONNX equivalent for {call.op}")
