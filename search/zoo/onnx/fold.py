"""Shape arithmetic of an ONNX graph evaluated on the bound input shapes, before the TVM frontend sees it.

Exporters compute reshape targets at run time: ``Shape`` of a tensor, ``Cast``, ``Slice``, ``Concat`` with
constants, then ``Reshape``. With every input shape bound these are constants, but TVM 0.27's frontend folds only
some of them (not a ``Slice`` of a cast shape, for one) and then refuses ``Reshape`` to a computed shape.
``fold_shapes`` replaces them by ``Constant`` nodes: ``Shape`` of a tensor whose shape ONNX shape inference makes
static, and any node whose inputs are all known and small (at most ``SMALL`` elements, so weights are left to the
frontend), evaluated with ``onnx.reference``; it repeats until nothing changes, since a folded reshape target lets
inference see further, and drops the nodes nothing reads any more.
"""

from __future__ import annotations

import math

import numpy as np

SMALL = 4096
"""Most elements of an input a node may have to be evaluated here."""

_NOT_EVALUATED = {"If", "Loop", "Scan", "Bernoulli", "Multinomial"}  # subgraphs, and random ops with the Random*


def fold_shapes(model, shapes: dict[str, tuple[int, ...]]):
    """A copy of ``model`` with its inputs set to ``shapes`` and its shape arithmetic folded (see the module)."""
    import onnx

    folded = onnx.ModelProto()
    folded.CopyFrom(model)
    for info in folded.graph.input:
        if info.name in shapes:
            for dim, value in zip(info.type.tensor_type.shape.dim, shapes[info.name]):
                dim.Clear()
                dim.dim_value = value
    while _fold_once(folded):
        pass
    return folded


def _fold_once(model) -> bool:
    """Fold what is known in ``model`` (in place); whether any node other than a Constant was folded."""
    from onnx import helper, numpy_helper

    graph = model.graph
    opsets = {o.domain: o.version for o in model.opset_import}
    static = _static_shapes(model)
    known = {t.name: numpy_helper.to_array(t) for t in graph.initializer if math.prod(t.dims) <= SMALL}
    nodes, changed = [], False
    for node in graph.node:
        values = _evaluate(node, known, static, opsets)
        if values is None:
            nodes.append(node)
            continue
        known.update(zip(node.output, values))
        if node.op_type == "Constant":
            nodes.append(node)
            continue
        changed = True
        nodes += [helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name))
                  for name, value in zip(node.output, values)]
    read = {o.name for o in graph.output}
    kept = []
    for node in reversed(nodes):
        if any(name in read for name in node.output):
            kept.append(node)
            read.update(name for name in node.input if name)
    del graph.node[:]
    graph.node.extend(reversed(kept))
    return changed


def _evaluate(node, known: dict[str, np.ndarray], static: dict[str, list[int]], opsets) -> list[np.ndarray] | None:
    """The outputs of ``node`` if they are known here, else None."""
    from onnx import AttributeProto, helper
    from onnx.reference import ReferenceEvaluator

    if node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type == "Shape":
        if node.input[0] not in static:
            return None
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        return [np.array(static[node.input[0]][attrs.get("start", 0):attrs.get("end")], dtype=np.int64)]
    inputs = [name for name in node.input if name]
    if (node.op_type in _NOT_EVALUATED or node.op_type.startswith("Random")
            or any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in node.attribute)
            or not all(name in known and known[name].size <= SMALL for name in inputs)):
        return None
    try:
        outputs = ReferenceEvaluator(node, opsets=opsets).run(None, {name: known[name] for name in inputs})
    except Exception:  # an operator onnx.reference lacks, or refuses: the frontend converts the node instead
        return None
    return [np.asarray(value) for value in outputs]


def _static_shapes(model) -> dict[str, list[int]]:
    """Name -> shape of every value ONNX shape inference (with data propagation) gives a static shape."""
    from onnx import shape_inference

    inferred = shape_inference.infer_shapes(model, data_prop=True)
    graph = inferred.graph
    shapes = {}
    for info in [*graph.value_info, *graph.input, *graph.output]:
        tensor = info.type.tensor_type
        if tensor.HasField("shape") and all(d.HasField("dim_value") for d in tensor.shape.dim):
            shapes[info.name] = [int(d.dim_value) for d in tensor.shape.dim]
    return shapes
