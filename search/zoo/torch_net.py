"""A zoo network as a PyTorch module with the same weights, for timing PyTorch eager on exactly the same network.

``torch_module(mod)`` turns ``search.zoo.walk.walk(mod)`` into a ``torch.fx.GraphModule``: one ``torch`` call per
call of the network (``F.conv2d`` with the folded BatchNorm as its bias, ``F.linear``, pools, ``torch.cat``, ...),
constants as buffers. Running it runs PyTorch eager, op by op (oneDNN for convolutions on the CPU). Needs the
optional ``torch`` package (``pip install -e ".[peers]"``).
"""

from __future__ import annotations

import numpy as np
import tvm

from search.errors import SearchError
from search.zoo.walk import Call, walk

OPS = frozenset({"conv2d", "dense", "add", "multiply", "divide", "relu", "clip", "silu", "sigmoid", "hardswish",
                 "hardsigmoid", "max_pool2d", "avg_pool2d", "global_avg_pool", "concat", "reshape", "permute"})
"""The calls of ``search.zoo.walk`` that ``torch_module`` writes in PyTorch."""


def unsupported_ops(mod: tvm.IRModule) -> list[str]:
    """The calls of ``mod`` (a zoo network) that ``torch_module`` has no PyTorch equivalent for, sorted."""
    return sorted({call.op for call in walk(mod).calls} - OPS)


def _symmetric(padding: tuple[int, ...], where: str) -> tuple[int, int]:
    top, left, bottom, right = padding
    if (top, left) != (bottom, right):
        raise SearchError(f"{where}: asymmetric padding {padding} has no PyTorch equivalent here")
    return top, left


def torch_module(mod: tvm.IRModule):
    """A ``torch.fx.GraphModule`` computing ``mod``'s ``main`` (float32, NCHW) with the same constants."""
    import torch
    import torch.nn.functional as F

    network = walk(mod)
    root = torch.nn.Module()
    graph = torch.fx.Graph()
    values = {network.input_name: graph.placeholder(network.input_name)}
    constants = 0

    def arg(value):
        nonlocal constants
        if isinstance(value, str):
            return values[value]
        name = f"c{constants}"
        constants += 1
        root.register_buffer(name, torch.from_numpy(np.ascontiguousarray(value, dtype=np.float32)))
        return graph.get_attr(name)

    def emit(call: Call):
        x = [arg(v) for v in call.inputs]
        a = call.attrs
        match call.op:
            case "conv2d":
                bias = x[2] if len(x) == 3 else None
                return graph.call_function(F.conv2d, (x[0], x[1], bias, a["strides"],
                                                      _symmetric(a["padding"], call.name), (1, 1), a["groups"]))
            case "dense":
                weight = graph.call_method("t", (x[1],))  # (in, out) -> (out, in), as F.linear takes it
                return graph.call_function(F.linear, (x[0], weight, x[2] if len(x) == 3 else None))
            case "add":
                return graph.call_function(torch.add, (x[0], x[1]))
            case "multiply":
                return graph.call_function(torch.mul, (x[0], x[1]))
            case "relu":
                return graph.call_function(F.relu, (x[0],))
            case "clip":
                return graph.call_function(torch.clamp, (x[0], a["min"], a["max"]))
            case "divide":
                return graph.call_function(torch.div, (x[0], x[1]))
            case "silu" | "sigmoid" | "hardswish":
                elementwise = {"silu": F.silu, "sigmoid": torch.sigmoid, "hardswish": F.hardswish}
                return graph.call_function(elementwise[call.op], (x[0],))
            case "hardsigmoid":
                scaled = graph.call_function(torch.add, (graph.call_function(torch.mul, (x[0], a["alpha"])), a["beta"]))
                return graph.call_function(torch.clamp, (scaled, 0.0, 1.0))
            case "max_pool2d":
                return graph.call_function(F.max_pool2d, (x[0], a["pool_size"], a["strides"],
                                                          _symmetric(a["padding"], call.name)))
            case "avg_pool2d":
                return graph.call_function(F.avg_pool2d, (x[0], a["pool_size"], a["strides"],
                                                          _symmetric(a["padding"], call.name), False, True))
            case "global_avg_pool":
                return graph.call_function(F.adaptive_avg_pool2d, (x[0], 1))
            case "concat":
                return graph.call_function(torch.cat, (x, a["axis"]))
            case "reshape":
                return graph.call_function(torch.reshape, (x[0], a["shape"]))
            case "permute":
                return graph.call_function(torch.permute, (x[0], a["axes"]))
        raise SearchError(f"{call.name}: no PyTorch equivalent for {call.op}")

    for call in network.calls:
        values[call.name] = emit(call)
    outputs = [values[name] for name in network.outputs]
    graph.output(outputs[0] if len(outputs) == 1 else tuple(outputs))
    return torch.fx.GraphModule(root, graph, class_name="ZooNetwork").eval()
