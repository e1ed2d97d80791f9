"""A zoo network as an ONNX model with the same weights, for timing ONNX Runtime on exactly the same network.

``to_onnx(mod)`` turns ``search.zoo.walk.walk(mod)`` into an ONNX graph (opset ``OPSET``): Conv with the folded
BatchNorm as its bias, Gemm for dense layers, pools, Concat, Reshape, Transpose, the activations (SiLU as
``Mul(x, Sigmoid(x))``, as PyTorch's exporter writes it; HardSwish, HardSigmoid); constants are initializers.
``load_onnx`` reads the result back into the same vocabulary.
"""

from __future__ import annotations

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

    def node(op: str, inputs: list[str], output: str, **attrs) -> None:
        nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))

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
            case "silu":  # as PyTorch's exporter writes it
                node("Sigmoid", x, f"{out}_sigmoid")
                node("Mul", [x[0], f"{out}_sigmoid"], out)
            case "sigmoid" | "divide" | "hardswish":
                node({"sigmoid": "Sigmoid", "divide": "Div", "hardswish": "HardSwish"}[call.op], x, out)
            case "hardsigmoid":
                node("HardSigmoid", x, out, alpha=a["alpha"], beta=a["beta"])
            case _:
                raise SearchError(f"{call.name}: no ONNX equivalent for {call.op}")

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
