"""Reading an ONNX model and converting it: input shapes bound, shape arithmetic folded, ``from_onnx``, rewriting."""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from pathlib import Path

import tvm

from search.artifact import quiet_tvm_log
from search.errors import SearchError
from search.zoo.onnx.fold import fold_shapes
from search.zoo.onnx.inputs import bind_inputs
from search.zoo.onnx.operators import OPERATORS
from search.zoo.onnx.rewrite import rewrite
from search.zoo.onnx.values import Unsupported
from search.zoo.shapes import ShapesLike, input_shapes
from solvers.input_files import MAX_MODEL_BYTES, InputFileError, checked_input


def _require_onnx():
    """The ``onnx`` module, or ``SearchError`` saying how to install it."""
    try:
        import onnx
    except ImportError as exc:
        raise SearchError("loading ONNX files needs the onnx package: pip install onnx") from exc
    return onnx


def read_onnx(path: str | Path):
    """The ``onnx.ModelProto`` in ``path``; ``FileNotFoundError`` or ``SearchError`` if there is none."""
    onnx = _require_onnx()
    try:
        path = checked_input(path, MAX_MODEL_BYTES)
    except InputFileError as exc:
        raise SearchError(str(exc)) from exc
    try:
        return onnx.load(str(path))
    except Exception as exc:  # protobuf raises DecodeError and friends
        raise SearchError(f"{path}: not a readable ONNX file ({exc})") from exc


def load_onnx(path: str | Path, *, batch: int | None = None, image_size: int | None = None,
              input_shape: ShapesLike = None) -> tvm.IRModule:
    """Read an ``.onnx`` file and return it rewritten (see ``search.zoo.load_model`` for the shapes)."""
    return import_onnx_model(read_onnx(path), batch=batch, image_size=image_size, input_shape=input_shape,
                             source=str(path))


def bound_model(model, *, batch: int | None = None, image_size: int | None = None,
                input_shape: ShapesLike = None, source: str = "ONNX model"):
    """``(model, shapes)``: ``model`` with its inputs bound to static shapes and its shape arithmetic folded
    (``fold.fold_shapes``), and input name -> shape; what ``from_onnx`` is given."""
    onnx = _require_onnx()
    shapes = bind_inputs(model.graph, input_shapes(input_shape), batch, image_size, source)
    try:
        return fold_shapes(model, shapes), shapes
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as exc:
        raise SearchError(f"{source}: ONNX shape inference failed: {exc}") from exc


def import_onnx_model(model, *, batch: int | None = None, image_size: int | None = None,
                      input_shape: ShapesLike = None, source: str = "ONNX model") -> tvm.IRModule:
    """Convert an in-memory ``onnx.ModelProto``; see ``load_onnx``."""
    _refuse_control_flow(model.graph, source)
    folded, shapes = bound_model(model, batch=batch, image_size=image_size, input_shape=input_shape, source=source)
    mod = _from_onnx(folded, shapes, source)
    try:
        return rewrite(mod, OPERATORS, list(shapes))  # the inputs named as in the file
    except Unsupported as exc:
        raise SearchError(f"{source}: {exc}") from None


CONTROL_FLOW = ("If", "Loop", "Scan")
"""ONNX operators whose subgraphs run data-dependently: no fixed sequence of kernels to plan."""


def _refuse_control_flow(graph, source: str) -> None:
    """SearchError naming the first control-flow node of ``graph``."""
    for node in graph.node:
        if node.op_type in CONTROL_FLOW:
            name = f" ({node.name})" if node.name else ""
            raise SearchError(f"{source}: operator {node.op_type}{name} is control flow, which tessera cannot plan: "
                              "export the model with it resolved (a fixed branch, an unrolled loop)")


def _from_onnx(model, shapes: dict[str, tuple[int, ...]], source: str) -> tvm.IRModule:
    """``from_onnx`` on the bound model; its failure as one ``SearchError`` line naming the operator.

    The frontend prints the failing operator with all its inputs, and its half-built BlockBuilder logs a warning
    when the exception lets go of it: both are kept off the terminal, the operator's name goes into the message.
    """
    from tvm.relax.frontend.onnx import from_onnx

    printed, failure = io.StringIO(), None
    with quiet_tvm_log(), contextlib.redirect_stdout(printed), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # renamed inputs, checker remarks
        try:
            return from_onnx(model, shape_dict={name: list(shape) for name, shape in shapes.items()},
                             keep_params_in_input=False)
        except Exception as exc:  # the frontend raises anything from ValueError to TVMError
            failure = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"
    operator = re.search(r"Error converting operator (\w+)", printed.getvalue())
    at = ", ".join(f"{name}={','.join(map(str, shape))}" for name, shape in shapes.items())
    where = f" on operator {operator.group(1)}" if operator else ""
    raise SearchError(f"{source}: the TVM ONNX frontend failed{where} at input shape {at}: {failure}")
