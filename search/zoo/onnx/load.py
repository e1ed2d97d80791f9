"""Reading an ONNX model and converting it: checks, ``from_onnx`` on the bound input shape, rewriting."""

from __future__ import annotations

import warnings
from pathlib import Path

import tvm

from search.errors import SearchError
from search.zoo.layers import vocabulary_violations
from search.zoo.onnx.checks import check_operators, input_shape
from search.zoo.onnx.rewrite import rewrite
from search.zoo.onnx.values import Unsupported


def _require_onnx():
    """The ``onnx`` module, or ``SearchError`` saying how to install it."""
    try:
        import onnx
    except ImportError as exc:
        raise SearchError("loading ONNX files needs the onnx package: pip install onnx") from exc
    return onnx


def load_onnx(path: str | Path, *, batch: int = 1, image_size: int | None = None) -> tvm.IRModule:
    """Read an ``.onnx`` file and return it in the zoo's vocabulary (see ``search.zoo.load_model`` for the shapes)."""
    onnx = _require_onnx()
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(2, "No such file or directory", str(path))
    try:
        model = onnx.load(str(path))
    except Exception as exc:  # protobuf raises DecodeError and friends
        raise SearchError(f"{path}: not a readable ONNX file ({exc})") from exc
    return import_onnx_model(model, batch=batch, image_size=image_size, source=str(path))


def import_onnx_model(model, *, batch: int = 1, image_size: int | None = None, source: str = "ONNX model"):
    """Convert an in-memory ``onnx.ModelProto``; see ``load_onnx``."""
    _require_onnx()
    from tvm.relax.frontend.onnx import from_onnx

    graph = model.graph
    check_operators(graph, source)
    input_name, shape = input_shape(graph, batch, image_size, source)
    try:
        with warnings.catch_warnings():  # renamed inputs, checker remarks: tessera's own checks follow
            warnings.simplefilter("ignore")
            mod = from_onnx(model, shape_dict={input_name: list(shape)}, keep_params_in_input=False)
    except Exception as exc:
        raise SearchError(f"{source}: the TVM ONNX frontend failed: {type(exc).__name__}: {exc}") from exc
    try:
        result = rewrite(mod["main"])
    except Unsupported as exc:
        raise SearchError(f"{source}: {exc}") from None
    problems = vocabulary_violations(result)
    if problems:
        raise SearchError(f"{source}: after import, {problems[0]}")
    return result
