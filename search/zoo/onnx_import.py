"""ONNX files into the zoo's op vocabulary.

``load_onnx(path)`` reads the file with ``onnx``, checks its operators and input shape, converts it with
``tvm.relax.frontend.onnx.from_onnx(model, keep_params_in_input=False)`` and rewrites the result into the op
vocabulary documented in ``search.zoo``:

- conv2d + bias add + BatchNormalization (+ Mul/Add/Sub/Div by per-channel constants) fold into one conv2d and one
  (1, C, 1, 1) bias add; a conv without bias gets a zero bias;
- a BatchNormalization that follows no foldable conv becomes ``R.multiply`` + ``R.add`` of (1, C, 1, 1) constants;
- Clip(0, 6), which the frontend lowers to TIR maximum/minimum kernels, becomes ``R.clip(x, 0, 6)``, Clip(0, inf)
  ``R.nn.relu``; other bounds are rejected;
- GlobalAveragePool (``R.mean`` over H, W) becomes ``R.nn.adaptive_avg_pool2d(x, 1)``;
- Gemm / MatMul with a constant weight becomes ``R.matmul(x, W (in, out))`` + a (1, out) bias add;
- Dropout and Identity disappear; shape arithmetic on constants is evaluated in numpy.

Only ``SUPPORTED_OPERATORS`` are accepted; other operators, a dynamic input shape, more than one input or anything
the rewriting cannot express in the vocabulary raise ``SearchError`` naming the operator or input.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import tvm
from tvm import relax

from search.errors import SearchError
from search.zoo.layers import vocabulary_violations

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


def _import_onnx():
    try:
        import onnx
    except ImportError as exc:
        raise SearchError("loading ONNX files needs the onnx package: pip install onnx") from exc
    return onnx


def load_onnx(path: str | Path, *, batch: int = 1, image_size: int | None = None) -> tvm.IRModule:
    """Read an ``.onnx`` file and return it in the zoo's vocabulary (see ``search.zoo.load_model`` for the shapes)."""
    onnx = _import_onnx()
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
    _import_onnx()
    from tvm.relax.frontend.onnx import from_onnx

    graph = model.graph
    unsupported = sorted({node.op_type for node in graph.node if node.op_type not in SUPPORTED_OPERATORS})
    if unsupported:
        first = {op: next(n.name or f"#{i}" for i, n in enumerate(graph.node) if n.op_type == op) for op in unsupported}
        listed = ", ".join(f"{op} (node {first[op]!r})" for op in unsupported)
        raise SearchError(
            f"{source}: unsupported ONNX operator(s) {listed}; supported: {', '.join(sorted(SUPPORTED_OPERATORS))}"
        )
    input_name, shape = _input_shape(graph, batch, image_size, source)
    try:
        with warnings.catch_warnings():  # renamed inputs, checker remarks: tessera's own checks follow
            warnings.simplefilter("ignore")
            mod = from_onnx(model, shape_dict={input_name: list(shape)}, keep_params_in_input=False)
    except Exception as exc:
        raise SearchError(f"{source}: the TVM ONNX frontend failed: {type(exc).__name__}: {exc}") from exc
    try:
        result = _Rewriter(mod["main"], source).run()
    except _Unsupported as exc:
        raise SearchError(f"{source}: {exc}") from None
    problems = vocabulary_violations(result)
    if problems:
        raise SearchError(f"{source}: after import, {problems[0]}")
    return result


def _input_shape(graph, batch: int, image_size: int | None, source: str) -> tuple[str, tuple[int, int, int, int]]:
    """The data input's name and static NCHW shape; symbolic N is bound to ``batch``, H and W to ``image_size``."""
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


# ---------------------------------------------------------------------------------------------------- rewriting
class _Unsupported(Exception):
    pass


@dataclass
class _Conv:
    """A conv2d not emitted yet, so that bias, BatchNorm and per-channel scales can still fold into it."""

    data: relax.Var
    weight: np.ndarray  # float64 OIHW
    bias: np.ndarray  # float64 (O,)
    attrs: Any


@dataclass
class _Dense:
    data: relax.Var
    weight: np.ndarray  # float64 (in, out)
    bias: np.ndarray  # float64 (out,)


@dataclass
class _Clip:
    data: relax.Var
    low: float = -math.inf
    high: float = math.inf


@dataclass
class _Items:
    """A tuple-valued binding (batch_norm, dropout): only the listed items may be read."""

    items: dict[int, Any] = field(default_factory=dict)
    producer: str = ""


@dataclass
class _Unusable:
    reason: str


_NUMPY_BINARY = {
    "relax.add": np.add,
    "relax.subtract": np.subtract,
    "relax.multiply": np.multiply,
    "relax.divide": np.divide,
}
_CLIP_KERNELS = re.compile(r"(maximum|minimum)\d*")


def _var_reads(expr) -> list:
    if isinstance(expr, relax.Var):
        return [expr]
    if isinstance(expr, relax.Tuple):
        return [v for item in expr.fields for v in _var_reads(item)]
    if isinstance(expr, relax.Call):
        return [v for arg in expr.args for v in _var_reads(arg)]
    if isinstance(expr, relax.TupleGetItem):
        return _var_reads(expr.tuple_value)
    return []


def _shape_of(var) -> tuple[int, ...]:
    ty = var.ty
    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        raise _Unsupported(f"binding {var.name!r} has no static tensor shape ({ty})")
    try:
        return tuple(int(d) for d in ty.shape.values)
    except TypeError:
        raise _Unsupported(f"binding {var.name!r} has a dynamic shape {ty.shape}") from None


def _per_channel(array: np.ndarray, channels: int, rank: int) -> np.ndarray | None:
    """``array`` as a (channels,) vector if it broadcasts along axis 1 only of a rank-``rank`` tensor, else None."""
    if array.ndim > rank:
        return None
    full = (1,) * (rank - array.ndim) + array.shape
    if any(d != 1 for i, d in enumerate(full) if i != 1) or full[1] not in (1, channels):
        return None
    return np.broadcast_to(array.reshape(-1) if array.size > 1 else array.reshape(1), (channels,)).astype(np.float64)


class _Rewriter:
    def __init__(self, func: relax.Function, source: str) -> None:
        self.func = func
        self.source = source
        self.bindings = [b for block in func.body.blocks for b in block.bindings]
        self.uses: dict[Any, int] = {}
        for b in self.bindings:
            for v in _var_reads(b.value):
                self.uses[v] = self.uses.get(v, 0) + 1
        for v in _var_reads(func.body.body):
            self.uses[v] = self.uses.get(v, 0) + 1
        self.env: dict[Any, Any] = {}
        self.bb = relax.BlockBuilder()
        self.counts: dict[str, int] = {}

    # -- values
    def _name(self, kind: str) -> str:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        return f"{kind}{self.counts[kind] - 1}"

    def value(self, expr) -> Any:
        """The rewritten value of an expression of the original function: ndarray, relax.Var, or a pending value."""
        if isinstance(expr, tvm.ir.expr.Constant) and hasattr(expr.value, "numpy"):
            return expr.value.numpy()
        if isinstance(expr, relax.Var):
            if expr not in self.env:
                raise _Unsupported(f"binding {expr.name!r} is read but could not be converted")
            return self.env[expr]
        if isinstance(expr, relax.ShapeExpr):
            return np.array([int(v) for v in expr.values], dtype=np.int64)
        inner = getattr(expr, "value", None)  # PrimValue -> FloatImm / IntImm -> float / int
        while inner is not None and not isinstance(inner, int | float) and hasattr(inner, "value"):
            inner = inner.value
        if isinstance(inner, int | float):
            return np.array(inner)
        raise _Unsupported(f"cannot convert {type(expr).__name__} {expr}")

    def tensor(self, expr) -> relax.Var:
        """The value of ``expr`` as an emitted Relax variable (pending convs, dense layers and clips get emitted)."""
        v = self.value(expr)
        if isinstance(v, relax.Var):
            return v
        if isinstance(v, np.ndarray):
            raise _Unsupported("a constant is used where an activation is expected")
        if isinstance(v, _Conv):
            out = self._emit_conv(v)
        elif isinstance(v, _Dense):
            out = self._emit_dense(v)
        elif isinstance(v, _Clip):
            out = self._emit_clip(v)
        elif isinstance(v, _Unusable):
            raise _Unsupported(v.reason)
        else:
            raise _Unsupported(f"a {type(v).__name__} value is used as a tensor")
        if isinstance(expr, relax.Var):
            self.env[expr] = out
        return out

    def _emit_conv(self, c: _Conv) -> relax.Var:
        a = c.attrs
        call = relax.op.nn.conv2d(
            c.data,
            relax.const(c.weight.astype(np.float32)),
            strides=[int(s) for s in a.strides],
            padding=[int(p) for p in a.padding],
            dilation=[int(d) for d in a.dilation],
            groups=int(a.groups),
        )
        name = self._name("conv")
        out = self.bb.emit(call, name_hint=name)
        bias = relax.const(c.bias.astype(np.float32).reshape(1, -1, 1, 1))
        return self.bb.emit(relax.op.add(out, bias), name_hint=f"{name}_bias")

    def _emit_dense(self, d: _Dense) -> relax.Var:
        name = self._name("dense")
        out = self.bb.emit(relax.op.matmul(d.data, relax.const(d.weight.astype(np.float32))), name_hint=name)
        bias = relax.const(d.bias.astype(np.float32).reshape(1, -1))
        return self.bb.emit(relax.op.add(out, bias), name_hint=f"{name}_bias")

    def _emit_clip(self, c: _Clip) -> relax.Var:
        if (c.low, c.high) == (0.0, 6.0):
            return self.bb.emit(relax.op.clip(c.data, 0.0, 6.0), name_hint=self._name("relu6_"))
        if (c.low, c.high) == (0.0, math.inf):
            return self.bb.emit(relax.op.nn.relu(c.data), name_hint=self._name("relu"))
        if (c.low, c.high) == (-math.inf, math.inf):
            return c.data
        raise _Unsupported(f"Clip(min={c.low}, max={c.high}) is not supported, only Clip(0, 6) and Clip(0, inf)")

    def sole_use(self, expr) -> bool:
        return isinstance(expr, relax.Var) and self.uses.get(expr, 0) == 1

    # -- driver
    def run(self) -> tvm.IRModule:
        params = self.func.params
        if len(params) != 1:
            raise _Unsupported(f"the converted function takes {len(params)} inputs, expected 1")
        data = relax.Var("data", params[0].ty)
        self.env[params[0]] = data
        with self.bb.function("main", [data]):
            with self.bb.dataflow():
                for binding in self.bindings:
                    self.env[binding.var] = self.convert(binding.var, binding.value)
                body = self.func.body.body
                if isinstance(body, relax.Tuple):
                    result = relax.Tuple([self.tensor(f) for f in body.fields])
                else:
                    result = self.tensor(body)
                gv = self.bb.emit_output(result)
            self.bb.emit_func_output(gv)
        return relax.transform.CanonicalizeBindings()(self.bb.get())

    def convert(self, var, value) -> Any:
        if isinstance(value, relax.Var | tvm.ir.expr.Constant):
            return self.value(value)
        if isinstance(value, relax.TupleGetItem):
            items = self.value(value.tuple_value)
            if not isinstance(items, _Items):
                raise _Unsupported(f"binding {var.name!r}: tuple item of an unsupported value")
            if value.index not in items.items:
                return _Unusable(f"output {value.index} of {items.producer} is not supported")
            return items.items[value.index]
        if isinstance(value, relax.Tuple):
            raise _Unsupported(f"binding {var.name!r}: tuple values other than the output are not supported")
        if not isinstance(value, relax.Call):
            raise _Unsupported(f"binding {var.name!r}: {type(value).__name__} is not supported")
        if isinstance(value.op, tvm.ir.Op) and value.op.name == "relax.call_tir":
            return self.convert_call_tir(var, value)
        if not isinstance(value.op, tvm.ir.Op):
            raise _Unsupported(f"binding {var.name!r}: call of {value.op} is not supported")
        op = value.op.name
        handler = getattr(self, "op_" + op.removeprefix("relax.").replace(".", "_"), None)
        if handler is None:
            raise _Unsupported(f"operator {op} (binding {var.name!r}) is outside tessera's op vocabulary")
        return handler(var, value)

    # -- constants
    def _all_const(self, args) -> list[np.ndarray] | None:
        values = [self.value(a) for a in args]
        return values if all(isinstance(v, np.ndarray) for v in values) else None

    # -- operators
    def op_nn_conv2d(self, var, call):
        a = call.attrs
        if (str(a.data_layout), str(a.kernel_layout)) != ("NCHW", "OIHW") or str(a.out_layout) not in ("", "NCHW"):
            raise _Unsupported(f"binding {var.name!r}: conv2d layouts {a.data_layout}/{a.kernel_layout}")
        weight = self.value(call.args[1])
        if not isinstance(weight, np.ndarray):
            raise _Unsupported(f"binding {var.name!r}: conv2d weight is not a constant")
        weight = weight.astype(np.float64)
        return _Conv(self.tensor(call.args[0]), weight, np.zeros(weight.shape[0]), a)

    def _binary(self, var, call, name: str):
        lhs, rhs = call.args
        consts = self._all_const(call.args)
        if consts is not None:
            out = _NUMPY_BINARY[name](*consts)
            return out.astype(consts[0].dtype) if consts[0].dtype == consts[1].dtype else out
        lv, rv = self.value(lhs), self.value(rhs)
        if isinstance(lv, np.ndarray) or isinstance(rv, np.ndarray):
            if isinstance(lv, np.ndarray):
                if name in ("relax.subtract", "relax.divide"):
                    raise _Unsupported(f"binding {var.name!r}: constant {name.split('.')[-1]} tensor")
                lhs, rhs, lv, rv = rhs, lhs, rv, lv
            const = rv.astype(np.float64)
            if name == "relax.subtract":
                name, const = "relax.add", -const
            elif name == "relax.divide":
                name, const = "relax.multiply", 1.0 / const
            return self._with_constant(var, lhs, lv, const, name)
        if name != "relax.add":
            raise _Unsupported(f"binding {var.name!r}: {name.split('.')[-1]} of two activations")
        a, b = self.tensor(lhs), self.tensor(rhs)
        if _shape_of(a) != _shape_of(b):
            raise _Unsupported(f"binding {var.name!r}: broadcasting add of {_shape_of(a)} and {_shape_of(b)}")
        return self.bb.emit(relax.op.add(a, b), name_hint=self._name("add"))

    def _with_constant(self, var, expr, value, const: np.ndarray, name: str):
        """``expr (+|*) const``: fold into a pending conv / dense if possible, else a per-channel op."""
        add = name == "relax.add"
        if isinstance(value, _Conv) and self.sole_use(expr):
            vec = _per_channel(const, value.weight.shape[0], 4)
            if vec is not None:
                if add:
                    return replace(value, bias=value.bias + vec)
                return replace(value, weight=value.weight * vec[:, None, None, None], bias=value.bias * vec)
        if isinstance(value, _Dense) and self.sole_use(expr):
            out = value.weight.shape[1]
            if const.size in (1, out) and const.ndim <= 2 and (const.ndim < 2 or const.shape[0] == 1):
                vec = np.broadcast_to(const.reshape(-1), (out,)).astype(np.float64)
                if add:
                    return replace(value, bias=value.bias + vec)
                return replace(value, weight=value.weight * vec[None, :], bias=value.bias * vec)
        x = self.tensor(expr)
        shape = _shape_of(x)
        vec = _per_channel(const, shape[1], 4) if len(shape) == 4 else None
        if vec is None:
            raise _Unsupported(
                f"binding {var.name!r}: {name.split('.')[-1]} of a {shape} activation and a {const.shape} constant "
                "(only per-channel constants on 4-D activations)"
            )
        c = relax.const(vec.astype(np.float32).reshape(1, -1, 1, 1))
        call = relax.op.add(x, c) if add else relax.op.multiply(x, c)
        return self.bb.emit(call, name_hint=self._name("shift" if add else "scale"))

    def op_add(self, var, call):
        return self._binary(var, call, "relax.add")

    def op_subtract(self, var, call):
        return self._binary(var, call, "relax.subtract")

    def op_multiply(self, var, call):
        return self._binary(var, call, "relax.multiply")

    def op_divide(self, var, call):
        return self._binary(var, call, "relax.divide")

    def op_nn_batch_norm(self, var, call):
        a = call.attrs
        if bool(a.training):
            raise _Unsupported(f"binding {var.name!r}: BatchNormalization in training mode")
        params = self._all_const(call.args[1:])
        if params is None:
            raise _Unsupported(f"binding {var.name!r}: BatchNormalization parameters are not constants")
        gamma, beta, mean, var_ = (p.astype(np.float64) for p in params)
        if not bool(a.scale):
            gamma = np.ones_like(gamma)
        if not bool(a.center):
            beta = np.zeros_like(beta)
        if int(a.axis) != 1:
            raise _Unsupported(f"binding {var.name!r}: BatchNormalization on axis {a.axis}")
        scale = gamma / np.sqrt(var_ + float(a.epsilon))
        shift = beta - mean * scale
        data = call.args[0]
        value = self.value(data)
        if isinstance(value, _Conv) and self.sole_use(data):
            out = replace(value, weight=value.weight * scale[:, None, None, None], bias=value.bias * scale + shift)
        else:
            x = self.tensor(data)
            if len(_shape_of(x)) != 4:
                raise _Unsupported(f"binding {var.name!r}: BatchNormalization of a non-4-D tensor")
            scaled = self.bb.emit(
                relax.op.multiply(x, relax.const(scale.astype(np.float32).reshape(1, -1, 1, 1))),
                name_hint=self._name("scale"),
            )
            out = self.bb.emit(
                relax.op.add(scaled, relax.const(shift.astype(np.float32).reshape(1, -1, 1, 1))),
                name_hint=self._name("shift"),
            )
        return _Items({0: out}, "BatchNormalization")

    def op_nn_dropout(self, var, call):
        return _Items({0: self.value(call.args[0])}, "Dropout")

    def op_nn_relu(self, var, call):
        return self.bb.emit(relax.op.nn.relu(self.tensor(call.args[0])), name_hint=self._name("relu"))

    def op_clip(self, var, call):
        low, high = (float(self.value(a)) for a in call.args[1:])
        return _Clip(self.tensor(call.args[0]), low, high)

    def convert_call_tir(self, var, call):
        """The frontend lowers Clip to ``call_tir`` of TIR ``maximum`` / ``minimum`` kernels with a scalar bound."""
        kernel = call.args[0]
        name = getattr(kernel, "name_hint", "")
        args = call.args[1].fields if isinstance(call.args[1], relax.Tuple) else []
        match = _CLIP_KERNELS.fullmatch(name)
        if not match or len(args) != 2:
            raise _Unsupported(f"binding {var.name!r}: call_tir of {name!r} is outside tessera's op vocabulary")
        bound = self.value(args[1])
        if not isinstance(bound, np.ndarray) or bound.size != 1:
            raise _Unsupported(f"binding {var.name!r}: {match.group(1)} with a non-scalar bound")
        bound = float(bound.reshape(()))
        data = args[0]
        value = self.value(data)
        pending = value if isinstance(value, _Clip) and self.sole_use(data) else _Clip(self.tensor(data))
        if match.group(1) == "maximum":
            return replace(pending, low=max(pending.low, bound))
        return replace(pending, high=min(pending.high, bound))

    def _pass_through(self, call, name: str):
        args = [self.tensor(a) for a in call.args]
        return self.bb.emit(relax.Call(call.op, args, call.attrs, call.ty_args), name_hint=self._name(name))

    def op_nn_max_pool2d(self, var, call):
        self._check_pool_layout(var, call)
        return self._pass_through(call, "maxpool")

    def op_nn_avg_pool2d(self, var, call):
        self._check_pool_layout(var, call)
        return self._pass_through(call, "avgpool")

    def op_nn_adaptive_avg_pool2d(self, var, call):
        self._check_pool_layout(var, call)
        if _shape_of(var)[2:] != (1, 1):
            raise _Unsupported(f"binding {var.name!r}: adaptive_avg_pool2d to {_shape_of(var)[2:]}, only global")
        return self._pass_through(call, "avgpool")

    def _check_pool_layout(self, var, call) -> None:
        if str(call.attrs.layout) != "NCHW":
            raise _Unsupported(f"binding {var.name!r}: pooling layout {call.attrs.layout}")

    def op_mean(self, var, call):
        x = self.tensor(call.args[0])
        shape = _shape_of(x)
        axes = sorted(int(a) % len(shape) for a in call.attrs.axis) if call.attrs.axis is not None else []
        if len(shape) != 4 or axes != [2, 3]:
            raise _Unsupported(f"binding {var.name!r}: mean over axes {axes} (only global average pooling)")
        out = self.bb.emit(relax.op.nn.adaptive_avg_pool2d(x, output_size=(1, 1)), name_hint=self._name("avgpool"))
        if not bool(call.attrs.keepdims):
            out = self.bb.emit(relax.op.reshape(out, shape[:2]), name_hint=self._name("flatten"))
        return out

    def op_concat(self, var, call):
        tensors = call.args[0]
        if not isinstance(tensors, relax.Tuple):
            raise _Unsupported(f"binding {var.name!r}: concat of a tuple variable")
        consts = self._all_const(tensors.fields)
        if consts is not None:
            return np.concatenate(consts, axis=int(call.attrs.axis))
        parts = [self.tensor(f) for f in tensors.fields]
        axis = int(call.attrs.axis) % len(_shape_of(parts[0]))
        if axis != 1:
            raise _Unsupported(f"binding {var.name!r}: concat on axis {axis}, only 1")
        return self.bb.emit(relax.op.concat(parts, axis=1), name_hint=self._name("concat"))

    def op_reshape(self, var, call):
        shape = _shape_of(var)
        value = self.value(call.args[0])
        if isinstance(value, np.ndarray):
            return value.reshape(shape)
        return self.bb.emit(relax.op.reshape(self.tensor(call.args[0]), shape), name_hint=self._name("reshape"))

    def op_permute_dims(self, var, call):
        axes = None if call.attrs.axes is None else [int(a) for a in call.attrs.axes]
        value = self.value(call.args[0])
        if isinstance(value, np.ndarray):
            return np.transpose(value, axes)
        x = self.tensor(call.args[0])
        axes = axes if axes is not None else list(reversed(range(len(_shape_of(x)))))
        return self.bb.emit(relax.op.permute_dims(x, axes), name_hint=self._name("transpose"))

    def op_matmul(self, var, call):
        weight = self.value(call.args[1])
        if not isinstance(weight, np.ndarray) or weight.ndim != 2:
            raise _Unsupported(f"binding {var.name!r}: matmul without a 2-D constant weight")
        x = self.tensor(call.args[0])
        if len(_shape_of(x)) != 2:
            raise _Unsupported(f"binding {var.name!r}: matmul of a {len(_shape_of(x))}-D activation (only 2-D)")
        return _Dense(x, weight.astype(np.float64), np.zeros(weight.shape[1]))

    # -- constant-only helpers the frontend leaves behind (Clip bounds, casts)
    def op_isnan(self, var, call):
        return self._const_op(var, call, np.isnan)

    def op_where(self, var, call):
        return self._const_op(var, call, np.where)

    def op_astype(self, var, call):
        return self._const_op(var, call, lambda x: x.astype(str(call.attrs.dtype)))

    def op_squeeze(self, var, call):
        return self._const_op(var, call, lambda x: x.reshape(_shape_of(var)))

    def op_expand_dims(self, var, call):
        return self._const_op(var, call, lambda x: x.reshape(_shape_of(var)))

    def _const_op(self, var, call, fn):
        consts = self._all_const(call.args)
        if consts is None:
            raise _Unsupported(f"operator {call.op.name} (binding {var.name!r}) on activations is not supported")
        return np.asarray(fn(*consts))
