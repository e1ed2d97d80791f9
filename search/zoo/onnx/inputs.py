"""The static shape of every input of an ONNX graph, from the file and what the user binds.

An input's shape is the one given for it (``InputShape``: its name, or no name when it is the only input); static
dimensions in the file must agree with it. Without one, the file's dimensions are taken, a dynamic axis 0 (the
batch) is bound to ``batch`` (default 1), and for a single (N, C, H, W) input ``batch`` and ``image_size`` are the
shorthand of ``--batch`` / ``--image-size``: they must agree with static N, H, W and bind dynamic ones. A dynamic
dimension left unbound is an error that names the input, the axis and its symbol. Every input must be a float32
tensor (or an int32 / int64 index tensor), not a scalar.
"""

from __future__ import annotations

from search.errors import SearchError
from search.zoo.shapes import InputShape, check_input_size

_FLOAT = 1  # onnx.TensorProto.FLOAT
_TYPES = (_FLOAT, 6, 7)  # and INT32, INT64: index inputs (token ids)


def graph_inputs(graph) -> list:
    """The ``ValueInfoProto`` of each input of ``graph`` that is not an initializer, in order."""
    initializers = {t.name for t in graph.initializer}
    return [i for i in graph.input if i.name not in initializers]


def bind_inputs(graph, shapes: tuple[InputShape, ...], batch: int | None, image_size: int | None,
                source: str) -> dict[str, tuple[int, ...]]:
    """Input name -> static shape for every input of ``graph`` (see the module docstring).

    Raises
    ------
    SearchError
        One message: an input that is not float32 (or an int32 / int64 index input), a shape for no input or with
        the wrong rank, a dimension that contradicts the file, a dynamic dimension left unbound, an input of more
        than ``MAX_INPUT_ELEMENTS``, or ``batch`` / ``image_size`` for a graph that is not one (N, C, H, W) input.
    """
    from onnx import TensorProto

    inputs = graph_inputs(graph)
    if not inputs:
        raise SearchError(f"{source}: the graph has no inputs")
    for info in inputs:
        tensor = info.type.tensor_type
        if tensor.elem_type not in _TYPES:
            elem = tensor.elem_type
            kind = TensorProto.DataType.Name(elem).lower() if elem in TensorProto.DataType.values() else elem
            raise SearchError(f"{source}: input {info.name!r} is {kind}; tessera takes float32 inputs (and int32 "
                              "or int64 index inputs such as token ids) only")
        if not tensor.HasField("shape"):
            raise SearchError(f"{source}: input {info.name!r} has no shape in the file")
        if not tensor.shape.dim:
            raise SearchError(f"{source}: input {info.name!r} is a scalar; tessera takes tensor inputs (rank 1 or "
                              "more): make it a constant of the graph, or a tensor of shape [1]")
    given = _given(inputs, shapes, source)
    shorthand = batch is not None or image_size is not None
    if shorthand and (len(inputs) != 1 or _rank(inputs[0]) != 4):
        raise SearchError(f"{source}: batch and image_size bind a single (N, C, H, W) input; this graph has "
                          f"{_listed(inputs)}: give --input-shape instead")
    bound = {}
    for info in inputs:
        dims = info.type.tensor_type.shape.dim
        if info.name in given:
            wanted = [(d, "--input-shape") for d in given[info.name]]
        elif shorthand:
            wanted = [(batch, "batch"), (None, ""), (image_size, "image_size"), (image_size, "image_size")]
        else:
            wanted = [(None, "")] * len(dims)
        bound[info.name] = tuple(_bind(source, info, axis, dim, *want) for axis, (dim, want) in
                                 enumerate(zip(dims, wanted)))
        check_input_size(bound[info.name], f"{source}: input {info.name!r} "
                                           f"({'x'.join(map(str, bound[info.name]))})")
    return bound


def _given(inputs, shapes: tuple[InputShape, ...], source: str) -> dict[str, tuple[int, ...]]:
    """The user's shapes by input name, checked against the inputs' names and ranks."""
    names = [i.name for i in inputs]
    given = {}
    for shape in shapes:
        if shape.name is None and len(inputs) != 1:
            raise SearchError(f"{source} has {_listed(inputs)}: name each one's shape, e.g. --input-shape "
                              f"{_pattern(inputs[0])}")
        name = names[0] if shape.name is None else shape.name
        if name not in names:
            raise SearchError(f"{source}: no input named {name!r}; it has {_listed(inputs)}")
        info = inputs[names.index(name)]
        if len(shape.dims) != _rank(info):
            raise SearchError(f"{source}: input {name!r} has rank {_rank(info)}, but --input-shape {shape} gives "
                              f"{len(shape.dims)} dimensions")
        given[name] = shape.dims
    return given


def _bind(source: str, info, axis: int, dim, want: int | None, what: str) -> int:
    """The static extent of ``axis`` of input ``info``: the file's, checked against ``want``, or ``want``."""
    if dim.dim_value > 0:
        if want is not None and want != dim.dim_value:
            raise SearchError(f"{source}: input {info.name!r} axis {axis} is {dim.dim_value} in the file, but "
                              f"{what} gives {want}")
        return int(dim.dim_value)
    if want is not None:
        return int(want)
    if axis == 0:
        return 1
    symbol = f" ({dim.dim_param!r})" if dim.dim_param else ""
    raise SearchError(f"{source}: input {info.name!r} axis {axis}{symbol} is dynamic; bind it with --input-shape "
                      f"{_pattern(info)} (a number for each ?)")


def _rank(info) -> int:
    return len(info.type.tensor_type.shape.dim)


def _pattern(info) -> str:
    """``NAME=D0,D1,...`` with the file's static dimensions, 1 for a dynamic batch and ``?`` for the others."""
    dims = info.type.tensor_type.shape.dim
    return f"{info.name}=" + ",".join(str(d.dim_value) if d.dim_value > 0 else "1" if axis == 0 else "?"
                                      for axis, d in enumerate(dims))


def _listed(inputs) -> str:
    return f"{len(inputs)} input{'s' if len(inputs) != 1 else ''} ({', '.join(repr(i.name) for i in inputs)})"
