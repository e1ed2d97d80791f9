"""Walk the bindings of a Relax ``main`` function and turn them into ``search.op.Op`` records.

Registered operator kinds (``search.kinds``) recognise the tunable ops. Kinds that absorb an epilogue (convolutions,
dense: ``op -> add(bias) -> add(residual) -> activation``) are matched first, the latest operator first, so that
when both operands of an add are such operators the later one takes the add and the earlier one becomes its residual
input. Every other binding, in order, is a tunable op of another kind (concat, add), a follower (a registered
follower kind, ``search.followers``: an activation, a per-channel scale or shift, a pooling; the one spanning the
most bindings) or a fixed op (anything else, run as TVM compiles it).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tvm import relax

from search.bindings import Bindings, op_name, tensor_shape
from search.errors import SearchError
from search.followers import FOLLOWERS, longest_match
from search.in_place import mark_in_place
from search.kinds import KINDS, Match, OperatorKind
from search.op import INPUT_DTYPES, Op
from search.relax_exprs import var_reads


class _Extractor:
    def __init__(self, func) -> None:
        self.func = func
        self.bindings = Bindings(func)
        self.values: dict[Any, str] = {p: p.name for p in func.params}
        self.tuples: dict[Any, list] = {}
        self.counters: Counter[str] = Counter()
        self.ops: list[Op] = []

    def value(self, var) -> str:
        if var not in self.values:
            raise SearchError(f"binding {var.name!r} is used but tessera could not interpret it")
        return self.values[var]

    def add_op(self, kind: str, role: str, parts: tuple[int, ...] | list[int], inputs: list, **fields) -> None:
        self.counters[kind] += 1
        var = self.bindings.var(parts[-1])
        op = Op(
            name=f"{kind}_{self.counters[kind] - 1}",
            kind=kind,
            role=role,
            inputs=tuple(self.value(v) for v in inputs),
            input_shapes=tuple(tensor_shape(v, v.name) for v in inputs),
            shape=tensor_shape(var, var.name),
            bindings=tuple(self.bindings.var(i).name for i in parts),
            **fields,
        )
        self.ops.append(op)
        self.values[var] = op.name

    def tunable_op(self, kind: OperatorKind, match: Match) -> None:
        self.add_op(kind.name, "tunable", match.parts, list(match.inputs), attrs=dict(match.attrs),
                    params=dict(match.params), input_sides=kind.input_sides(match), layout_free=kind.layout_free)

    # ---------------------------------------------------------------- matching
    def absorbing_matches(self) -> dict[int, tuple[OperatorKind, Match]]:
        """Matches of the kinds that absorb an epilogue, keyed by their last binding (latest operator first)."""
        kinds = [kind for kind in KINDS.values() if kind.absorbs]
        by_end = {}
        for index in reversed(range(len(self.bindings))):
            for kind in kinds:
                match = kind.match(self.bindings, index)
                if match is not None:
                    self.bindings.claimed.update(match.parts)
                    by_end[match.parts[-1]] = (kind, match)
                    break
        return by_end

    def call_op(self, index: int) -> None:
        """A tunable op of a kind that absorbs nothing, a follower, or a fixed op."""
        for kind in KINDS.values():
            match = None if kind.absorbs else kind.match(self.bindings, index)
            if match is not None:
                self.tunable_op(kind, match)
                return
        args = self.bindings.activations(index)
        shape = tensor_shape(self.bindings.var(index), self.bindings.var(index).name)
        found = longest_match(self.bindings, index, shape, FOLLOWERS.values())
        if found is None:
            self.fixed_op(index, args)
            return
        follower, match = found
        self.bindings.claimed.update(match.claims)
        self.add_op(follower.name, "follower", [index, *match.claims], args[:1], attrs=dict(match.attrs),
                    params=dict(match.params))

    def fixed_op(self, index: int, args: list) -> None:
        """A fixed-NCHW op: the original expression (a call, tuple or tuple item), its variables renamed to value
        names, constants inlined; run as TVM compiles it."""

        def rename(expr):
            if isinstance(expr, relax.Tuple):
                return relax.Tuple([rename(item) for item in expr.fields])
            if isinstance(expr, relax.Var):
                array = self.bindings.const(expr)
                return relax.const(array) if array is not None else relax.Var(self.value(expr), expr.ty)
            return expr

        value = self.bindings.value(index)
        if isinstance(value, relax.Call):
            renamed = relax.Call(value.op, [rename(a) for a in value.args], value.attrs, value.ty_args)
            kind = op_name(value).removeprefix("relax.") or "call"
        elif isinstance(value, relax.TupleGetItem):
            renamed, kind = relax.TupleGetItem(rename(value.tuple_value), value.index), "tuple_item"
        else:
            renamed, kind = rename(value), "tuple"
        self.add_op(kind, "fixed", [index], args, call=renamed)

    def run(self) -> tuple[list[Op], list[tuple[str, tuple[int, ...]]], list[str], bool, list[str]]:
        matches = self.absorbing_matches()
        for index, binding in enumerate(self.bindings.items):
            value = binding.value
            if index in matches:
                self.tunable_op(*matches[index])
            elif index in self.bindings.claimed or self.bindings.const(binding.var) is not None:
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
                self.fixed_op(index, [v for v in var_reads(value) if self.bindings.const(v) is None])
            else:
                raise SearchError(f"binding {binding.var.name!r}: unsupported expression {type(value).__name__}")
        body = self.func.body.body
        if isinstance(body, relax.Tuple):
            outputs, is_tuple = [self.value(v) for v in body.fields], True
        elif body in self.tuples and self.tuples[body]:
            outputs, is_tuple = self.tuples[body], True
        else:
            outputs, is_tuple = [self.value(body)], False
        inputs = [(p.name, tensor_shape(p, p.name)) for p in self.func.params]
        dtypes = [str(getattr(p.ty, "dtype", "")) for p in self.func.params]
        wrong = [f"{p.name}: {dtype}" for p, dtype in zip(self.func.params, dtypes) if dtype not in INPUT_DTYPES]
        if wrong:
            raise SearchError(f"only float32 models are supported (with int32 or int64 index inputs); inputs "
                              f"{', '.join(wrong)}")
        mark_in_place(self.ops, outputs)
        return self.ops, inputs, outputs, is_tuple, dtypes


def extract_ops(mod) -> tuple[list[Op], list[tuple[str, tuple[int, ...]]], list[str], bool, list[str]]:
    """Ops (topological), model inputs, output value names, whether ``main`` returns a tuple, and the inputs'
    dtypes."""
    names = [gv.name_hint for gv in mod.functions]
    if "main" not in names or not isinstance(mod["main"], relax.Function):
        raise SearchError("the module has no Relax 'main' function")
    return _Extractor(mod["main"]).run()


