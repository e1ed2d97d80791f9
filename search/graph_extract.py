"""Walk the bindings of a Relax ``main`` function and turn them into ``search.graph.Op`` records.

Convolutions and dense layers absorb their epilogue: ``conv -> add(bias) -> add(residual) -> relu | clip(0, 6)``, each
step only when the previous value has exactly one user. When both operands of an add are fusable convolutions, the
later one takes the add and the earlier one becomes its residual input.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import numpy as np
import tvm
from tvm import relax

from search.errors import SearchError
from search.graph import TUNABLE_KINDS, Op
from search.relax_exprs import static_shape, var_reads

FOLLOWERS = {
    "relax.nn.relu": "relu",
    "relax.clip": "clip",
    "relax.sigmoid": "sigmoid",
    "relax.nn.max_pool2d": "max_pool2d",
    "relax.nn.avg_pool2d": "avg_pool2d",
    "relax.nn.adaptive_avg_pool2d": "adaptive_avg_pool2d",
}
POOL_ATTRS = {
    "max_pool2d": ("pool_size", "strides", "padding", "dilation", "ceil_mode"),
    "avg_pool2d": ("pool_size", "strides", "padding", "dilation", "ceil_mode", "count_include_pad"),
    "adaptive_avg_pool2d": ("output_size",),
}


def _op_name(expr) -> str:
    return expr.op.name if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) else ""


def _scalar(expr) -> Any:
    while not isinstance(expr, int | float | bool | str) and hasattr(expr, "value"):
        expr = expr.value
    return expr


def _plain(value) -> Any:
    """A TVM attribute value as plain Python (ints, floats, bools, strings, tuples)."""
    if value is None or isinstance(value, int | float | bool | str):
        return value
    if hasattr(value, "value"):
        return _scalar(value)
    return tuple(_plain(v) for v in value)


def _shape(expr, where: str) -> tuple[int, ...]:
    """The static shape of a tensor; () for a tuple or another non-tensor value; SearchError for a tensor whose
    shape is not static."""
    if not isinstance(expr.ty, relax.TensorType):
        return ()
    shape = static_shape(expr)
    if shape is None:
        raise SearchError(f"binding {where!r}: the shape {expr.ty} is not static (bind the inputs' dynamic "
                          "dimensions with --input-shape)")
    return shape


class _Extractor:
    def __init__(self, func) -> None:
        self.func = func
        self.bindings = [b for block in func.body.blocks for b in block.bindings]
        self.users: dict[Any, list[int]] = defaultdict(list)
        for index, binding in enumerate(self.bindings):
            for var in var_reads(binding.value):
                self.users[var].append(index)
        self.outputs = Counter(var_reads(func.body.body))
        self.defs = {b.var: b.value for b in self.bindings}
        self.consts: dict[Any, np.ndarray | None] = {}
        self.values: dict[Any, str] = {p: p.name for p in func.params}
        self.tuples: dict[Any, list] = {}
        self.counters: Counter[str] = Counter()
        self.ops: list[Op] = []

    # ---------------------------------------------------------------- helpers
    def const(self, expr) -> np.ndarray | None:
        """The numpy value of a constant-valued expression (constant, or permute_dims/reshape of one)."""
        if isinstance(expr, tvm.ir.expr.Constant):
            return expr.value.numpy()
        if not isinstance(expr, relax.Var) or expr not in self.defs:
            return None
        if expr not in self.consts:
            value, result = self.defs[expr], None
            inner = self.const(value.args[0]) if _op_name(value) in ("relax.permute_dims", "relax.reshape") else None
            if isinstance(value, relax.Var | tvm.ir.expr.Constant):
                result = self.const(value)
            elif inner is not None and _op_name(value) == "relax.permute_dims":
                axes = value.attrs.axes
                result = np.transpose(inner, None if axes is None else [int(a) for a in axes])
            elif inner is not None:
                result = inner.reshape(_shape(value, expr.name))
            self.consts[expr] = result
        return self.consts[expr]

    def sole_user(self, var) -> int | None:
        users = self.users.get(var, [])
        return users[0] if len(users) == 1 and not self.outputs[var] else None

    def other_operand(self, index: int, var):
        """The operand of the binary call at ``index`` that is not ``var`` (None if both are ``var``)."""
        lhs, rhs = self.bindings[index].value.args
        if lhs.same_as(var) != rhs.same_as(var):
            return rhs if lhs.same_as(var) else lhs
        return None

    def value(self, var) -> str:
        if var not in self.values:
            raise SearchError(f"binding {var.name!r} is used but tessera could not interpret it")
        return self.values[var]

    def add_op(self, kind: str, parts: list[int], inputs: list, **fields) -> None:
        self.counters[kind] += 1
        var = self.bindings[parts[-1]].var
        fixed = fields.get("call") is not None
        op = Op(
            name=f"{kind}_{self.counters[kind] - 1}",
            kind=kind,
            role="fixed" if fixed else "tunable" if kind in TUNABLE_KINDS else "follower",
            inputs=tuple(self.value(v) for v in inputs),
            input_shapes=tuple(_shape(v, v.name) for v in inputs),
            shape=_shape(var, var.name),
            bindings=tuple(self.bindings[i].var.name for i in parts),
            **fields,
        )
        self.ops.append(op)
        self.values[var] = op.name

    # ---------------------------------------------------------------- epilogue chains
    def chain(self, index: int, claimed: set[int]) -> dict[str, Any] | None:
        """Bindings and epilogue fused into the conv/dense at ``index``; None for a matmul without constant weight."""
        call, var = self.bindings[index].value, self.bindings[index].var
        is_conv = _op_name(call) == "relax.nn.conv2d"
        if not self.templated(call):
            return None
        out_shape = _shape(var, var.name)
        chain: dict[str, Any] = {"parts": [index], "bias": None, "residual": None, "activation": None}
        end, nxt = var, self.sole_user(var)
        if nxt is not None and _op_name(self.bindings[nxt].value) == "relax.add":
            other = self.other_operand(nxt, end)
            bias = None if other is None else self.const(other)
            allowed = [(out_shape[1],), (1, out_shape[1])] if len(out_shape) == 2 else [(1, out_shape[1], 1, 1)]
            if bias is not None and bias.shape in allowed + [(out_shape[1], 1, 1)]:
                chain["bias"] = bias.reshape(-1).astype("float32")
                chain["parts"].append(nxt)
                end, nxt = self.bindings[nxt].var, self.sole_user(self.bindings[nxt].var)
        if is_conv and nxt is not None and nxt not in claimed and _op_name(self.bindings[nxt].value) == "relax.add":
            other = self.other_operand(nxt, end)
            if other is not None and self.const(other) is None and _shape(other, other.name) == out_shape:
                chain["residual"] = other
                chain["parts"].append(nxt)
                end, nxt = self.bindings[nxt].var, self.sole_user(self.bindings[nxt].var)
        if nxt is not None:
            value = self.bindings[nxt].value
            if _op_name(value) == "relax.nn.relu":
                chain["activation"] = "relu"
            elif _op_name(value) == "relax.clip" and (_scalar(value.args[1]), _scalar(value.args[2])) == (0, 6):
                chain["activation"] = "relu6"
            if chain["activation"]:
                chain["parts"].append(nxt)
        return chain

    def templated(self, call) -> bool:
        """Whether a template runs this conv2d / matmul: a constant weight, NCHW / OIHW, groups 1 or depthwise, a
        2-D matmul; anything else is a fixed op that TVM compiles as it is."""
        weight = self.const(call.args[1])
        if weight is None or len(static_shape(call.args[0]) or ()) != weight.ndim:
            return False
        if _op_name(call) == "relax.matmul":
            return weight.ndim == 2
        attrs = call.attrs
        groups, channels = int(attrs.groups), static_shape(call.args[0])[1]
        return ((attrs.data_layout, attrs.kernel_layout, attrs.out_layout) == ("NCHW", "OIHW", "NCHW")
                and (groups == 1 or groups == channels == weight.shape[0]))

    def chains(self) -> dict[int, dict[str, Any]]:
        """Fused chains keyed by the index of their last binding (later convs claim shared adds first)."""
        claimed: set[int] = set()
        by_end = {}
        kernels = [i for i, b in enumerate(self.bindings) if _op_name(b.value) in ("relax.nn.conv2d", "relax.matmul")]
        for index in reversed(kernels):
            chain = self.chain(index, claimed)
            if chain is not None:
                claimed.update(chain["parts"])
                by_end[chain["parts"][-1]] = chain
        return by_end

    # ---------------------------------------------------------------- ops
    def kernel_op(self, chain: dict[str, Any]) -> None:
        call = self.bindings[chain["parts"][0]].value
        weight = self.const(call.args[1])
        params = {"weight": weight.astype("float32")}
        if chain["bias"] is not None:
            params["bias"] = chain["bias"]
        epilogue = {"bias": chain["bias"] is not None, "residual": chain["residual"] is not None,
                    "activation": chain["activation"]}
        inputs = [call.args[0]] + ([chain["residual"]] if chain["residual"] is not None else [])
        if _op_name(call) == "relax.matmul":
            params["weight"] = np.ascontiguousarray(params["weight"].T)
            self.add_op("dense", chain["parts"], inputs, attrs=epilogue, params=params)
            return
        attrs = call.attrs
        groups = int(attrs.groups)
        conv_attrs = {"strides": _plain(attrs.strides), "padding": _plain(attrs.padding),
                      "dilation": _plain(attrs.dilation), "groups": groups, "kernel": tuple(weight.shape[2:])}
        kind = "depthwise_conv2d" if groups > 1 else "conv2d"
        self.add_op(kind, chain["parts"], inputs, attrs={**conv_attrs, **epilogue}, params=params)

    def call_op(self, index: int) -> None:
        """A follower, a concat / add node, or a fixed op: what tessera does not tune runs as TVM compiles it."""
        binding = self.bindings[index]
        call, name = binding.value, _op_name(binding.value)
        args = [a for a in var_reads(call) if self.const(a) is None]
        shape = static_shape(binding.var) or ()
        if name in FOLLOWERS and self.follower_op(index, FOLLOWERS[name], args):
            return
        if name in ("relax.multiply", "relax.add") and len(shape) == 4 and len(args) == 1:
            value = self.const(next(a for a in call.args if not a.same_as(args[0])))
            if value is not None and value.shape == (1, shape[1], 1, 1):
                kind = "channel_scale" if name == "relax.multiply" else "channel_shift"
                self.add_op(kind, [index], args, params={"value": value.reshape(-1).astype("float32")})
                return
        if name in ("relax.add", "relax.concat") and len(shape) == 4 and len(args) >= 2:
            same = len({static_shape(a) for a in args}) == 1
            if (name == "relax.add" and same) or (name == "relax.concat" and int(call.attrs.axis) in (1, -3)):
                self.add_op(name.removeprefix("relax."), [index], args)
                return
        self.fixed_op(index, args)

    def follower_op(self, index: int, kind: str, args: list) -> bool:
        """Add the follower at ``index``; False (nothing added) for a pooling in another layout than NCHW."""
        call = self.bindings[index].value
        if kind in POOL_ATTRS and call.attrs.layout != "NCHW":
            return False
        attrs = {key: _plain(getattr(call.attrs, key)) for key in POOL_ATTRS.get(kind, ())}
        if kind == "clip":
            attrs = {"min": _scalar(call.args[1]), "max": _scalar(call.args[2])}
        self.add_op(kind, [index], args[:1], attrs=attrs)
        return True

    def fixed_op(self, index: int, args: list) -> None:
        """A fixed-NCHW op: the original expression (a call, tuple or tuple item), its variables renamed to value
        names, constants inlined; run as TVM compiles it."""

        def rename(expr):
            if isinstance(expr, relax.Tuple):
                return relax.Tuple([rename(item) for item in expr.fields])
            if isinstance(expr, relax.Var):
                array = self.const(expr)
                return relax.const(array) if array is not None else relax.Var(self.value(expr), expr.ty)
            return expr

        value = self.bindings[index].value
        if isinstance(value, relax.Call):
            renamed = relax.Call(value.op, [rename(a) for a in value.args], value.attrs, value.ty_args)
            kind = _op_name(value).removeprefix("relax.") or "call"
        elif isinstance(value, relax.TupleGetItem):
            renamed, kind = relax.TupleGetItem(rename(value.tuple_value), value.index), "tuple_item"
        else:
            renamed, kind = rename(value), "tuple"
        self.add_op(kind, [index], args, call=renamed)

    def run(self) -> tuple[list[Op], list[tuple[str, tuple[int, ...]]], list[str], bool]:
        chains = self.chains()
        members = {i for chain in chains.values() for i in chain["parts"]}
        for index, binding in enumerate(self.bindings):
            value = binding.value
            if index in chains:
                self.kernel_op(chains[index])
            elif index in members or self.const(binding.var) is not None:
                continue
            elif isinstance(value, relax.Var) and value in self.tuples:
                self.tuples[binding.var] = self.tuples[value]
            elif isinstance(value, relax.Var):
                self.values[binding.var] = self.value(value)
            elif isinstance(value, relax.Tuple) and all(isinstance(v, relax.Var) and v in self.values
                                                        for v in value.fields):
                self.tuples[binding.var] = [self.value(v) for v in value.fields]
            elif isinstance(value, relax.TupleGetItem) and value.tuple_value in self.tuples:
                self.values[binding.var] = self.tuples[value.tuple_value][value.index]
            elif isinstance(value, relax.Call):
                self.call_op(index)
            elif isinstance(value, relax.Tuple | relax.TupleGetItem):
                self.fixed_op(index, [v for v in var_reads(value) if self.const(v) is None])
            else:
                raise SearchError(f"binding {binding.var.name!r}: unsupported expression {type(value).__name__}")
        body = self.func.body.body
        if isinstance(body, relax.Tuple):
            outputs, is_tuple = [self.value(v) for v in body.fields], True
        elif body in self.tuples and self.tuples[body]:
            outputs, is_tuple = self.tuples[body], True
        else:
            outputs, is_tuple = [self.value(body)], False
        inputs = [(p.name, _shape(p, p.name)) for p in self.func.params]
        wrong = [f"{p.name}: {p.ty.dtype}" for p in self.func.params if p.ty.dtype != "float32"]
        if wrong:
            raise SearchError(f"only float32 models are supported; inputs {', '.join(wrong)}")
        return self.ops, inputs, outputs, is_tuple


def extract_ops(mod) -> tuple[list[Op], list[tuple[str, tuple[int, ...]]], list[str], bool]:
    """Ops (topological), model inputs, output value names and whether ``main`` returns a tuple."""
    names = [gv.name_hint for gv in mod.functions]
    if "main" not in names or not isinstance(mod["main"], relax.Function):
        raise SearchError("the module has no Relax 'main' function")
    return _Extractor(mod["main"]).run()
