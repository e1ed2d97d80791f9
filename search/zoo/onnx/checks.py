"""Checks on an ONNX graph before the TVM frontend sees it: supported operators, one static float32 NCHW input."""

from __future__ import annotations

from search.errors import SearchError

SUPPORTED_OPERATORS = frozenset(
    {
        "Conv",
        "BatchNormalization",
        "Relu",
        "Clip",
        "Add",
        "Sub",
        "Mul",
        "Div",
        "MaxPool",
        "AveragePool",
        "GlobalAveragePool",
        "Concat",
        "Flatten",
        "Reshape",
        "Gemm",
        "MatMul",
        "Transpose",
        "Identity",
        "Dropout",
        "Constant",
        # shape arithmetic, evaluated at import time when the input shape is static
        "Shape",
        "Gather",
        "Unsqueeze",
        "Squeeze",
        "Cast",
    }
)


def check_operators(graph, source: str) -> None:
    """Raise ``SearchError`` naming every operator of ``graph`` outside ``SUPPORTED_OPERATORS`` and its first node."""
    unsupported = sorted({node.op_type for node in graph.node if node.op_type not in SUPPORTED_OPERATORS})
    if not unsupported:
        return
    first = {op: next(n.name or f"#{i}" for i, n in enumerate(graph.node) if n.op_type == op) for op in unsupported}
    listed = ", ".join(f"{op} (node {first[op]!r})" for op in unsupported)
    raise SearchError(
        f"{source}: unsupported ONNX operator(s) {listed}; supported: {', '.join(sorted(SUPPORTED_OPERATORS))}"
    )


def input_shape(graph, batch: int, image_size: int | None, source: str) -> tuple[str, tuple[int, int, int, int]]:
    """The data input's name and static NCHW shape; symbolic N is bound to ``batch``, H and W to ``image_size``.

    Raises
    ------
    SearchError
        Not exactly one non-initializer input, not float32, not rank 4, a static dimension that contradicts
        ``batch`` / ``image_size``, or a symbolic dimension with nothing to bind it to.
    """
    initializers = {t.name for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in initializers]
    if len(inputs) != 1:
        names = ", ".join(repr(i.name) for i in inputs)
        raise SearchError(f"{source}: expected one input tensor (N, 3, H, W), found {len(inputs)}: {names}")
    info = inputs[0]
    tensor = info.type.tensor_type
    if tensor.elem_type != 1:  # onnx.TensorProto.FLOAT
        raise SearchError(f"{source}: input {info.name!r} must be float32 (ONNX elem_type 1), got {tensor.elem_type}")
    if not tensor.HasField("shape") or len(tensor.shape.dim) != 4:
        rank = len(tensor.shape.dim) if tensor.HasField("shape") else "unknown"
        raise SearchError(f"{source}: input {info.name!r} must have rank 4 (N, C, H, W), has rank {rank}")
    dims = []
    wanted = (batch, None, image_size, image_size)
    for axis, (dim, want, label) in enumerate(zip(tensor.shape.dim, wanted, "NCHW")):
        if dim.dim_value > 0:
            if want is not None and dim.dim_value != want:
                what = "batch" if axis == 0 else "image_size"
                raise SearchError(
                    f"{source}: input {info.name!r} has static {label} = {dim.dim_value}, but {what}={want} was asked"
                )
            dims.append(dim.dim_value)
        elif want is not None:
            dims.append(want)
        else:
            symbol = dim.dim_param or "?"
            hint = "; pass image_size" if label in "HW" else ""
            raise SearchError(f"{source}: input {info.name!r} has a dynamic dimension {label} ({symbol!r}){hint}")
    return info.name, tuple(dims)
