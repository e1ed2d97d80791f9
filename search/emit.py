"""Emit a Relax module that runs an ``OpGraph`` in the layouts a plan chose.

Every node of a kernel kind becomes ``R.call_tir`` of its scheduled template kernel with pre-packed constant arguments;
a node of a layout kind (concat, add) runs its Relax op in its chosen layout, except a concat in place, whose producers'
kernels write their slices of its output (``R.call_tir_inplace``), its other inputs copied in, and whose shorter family
members are views of its first channels (``R.memory.view``; ``search.in_place``); every edge whose layouts differ gets
one explicit ``R.layout_transform`` (shared by consumers wanting the same layout); followers run in their producer's
layout (its fp32 twin where it stores bf16 values: ``search.conversions``); fixed ops, layout-free kernels
(``batch_matmul``) and model outputs see NCHW (of 4-D values) or NC (of a linear layer's rows, 2-D or 3-D), and a
layout-free kernel gets the transforms its layouts ask for (``KernelKind.conversions``) around it. A value stored NC
keeps its graph shape (a linear layer's kernel reshapes it to (rows, features) for free); in any other layout it is held
as that layout stores it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import tvm
from tvm import relax

from search.candidates import Candidate
from search.conversions import conversion_kernel, converts
from search.followers import get_follower
from search.graph import OpGraph
from search.in_place import copy_kernel, write_into, written_inputs
from search.kinds import KernelKind, LayoutKind, get_kind
from search.kinds.base import COPIED, VIEW_OF
from search.layouts import activation_shape, fixed_layout, layout, stored_as
from search.op import Op

NO_LAYOUT = "-"  # the "layout" of tensors that are no activations (never transformed)


@dataclass(frozen=True)
class Origin:
    """What an emitted binding computes: graph op ``op``, or a layout transform of the value ``op`` (of logical
    ``shape``) from layout ``src`` to ``dst``."""

    op: str
    src: str = ""
    dst: str = ""
    shape: tuple[int, ...] = ()

    @property
    def is_transform(self) -> bool:
        return bool(self.dst)


@dataclass(frozen=True)
class Emitted:
    """The emitted module, its template kernels by name (which must reach the binary unchanged), the number of
    layout transforms it contains and the origin of each binding, by name."""

    module: tvm.IRModule
    kernels: dict[str, tvm.tirx.PrimFunc]
    transforms: int
    origins: dict[str, Origin]


class _Emitter:
    def __init__(self, graph: OpGraph, chosen: dict[str, Candidate], target: tvm.target.Target) -> None:
        self.graph, self.chosen, self.target = graph, chosen, target
        self.bb = relax.BlockBuilder()
        self.values: dict[str, tuple[relax.Expr, str]] = {}
        self.converted: dict[tuple[str, str], relax.Expr] = {}
        self.kernel_vars: dict = {}
        self.kernels: dict[str, tvm.tirx.PrimFunc] = {}
        self.functions: dict[str, tvm.ir.GlobalVar] = {}  # the source module's functions that fixed ops call
        self.origins: dict[str, Origin] = {}
        self.transforms = 0
        self.shapes = dict(graph.inputs) | {op.name: op.shape for op in graph.ops}
        self.slices: dict[str, tuple[str, int]] = {}  # input -> (in-place concat owner, first channel of its slice)
        self.buffers: dict[str, relax.Expr] = {}  # in-place concat owner -> its output, as written so far
        self.copied: set[str] = set()  # copied inputs already in their owner's buffer
        self.writers: set[str] = set()  # kernels writing their slice of an owner's buffer
        for op in graph.tunable:
            if chosen[op.name].in_place and VIEW_OF not in op.attrs:
                starts = itertools.accumulate((shape[1] for shape in op.input_shapes), initial=0)
                self.slices.update({value: (op.name, start) for value, start in zip(op.inputs, starts)})
                self.writers.update(written_inputs(op))

    def read(self, value: str, wanted: str) -> relax.Expr:
        """``value`` in layout ``wanted``, emitting (once) a layout_transform if it is stored otherwise."""
        expr, stored = self.values[value]
        if stored in (wanted, NO_LAYOUT):
            return expr
        key = (value, wanted)
        if key not in self.converted:
            logical = activation_shape(self.shapes[value])
            x = self.reshaped(expr, self.held(value, stored), layout(stored).physical_shape(logical), f"{value}_rows")
            x = self.transform(x, value, stored, wanted, logical)
            self.converted[key] = self.reshaped(x, layout(wanted).physical_shape(logical), self.held(value, wanted),
                                                _symbol(f"{value}_{wanted}"))
        return self.converted[key]

    def read_fixed(self, value: str) -> relax.Expr:
        """``value`` as fixed ops and model outputs read it: NCHW or NC (in its graph shape), or as it is."""
        return self.read(value, _fixed_layout(self.shapes[value]))

    def held(self, value: str, stored: str) -> tuple[int, ...]:
        """The shape of ``value``'s expression when stored in ``stored``: its graph shape in NC, else physical."""
        shape = self.shapes[value]
        return tuple(shape) if stored in ("NC", NO_LAYOUT) else layout(stored).physical_shape(activation_shape(shape))

    def kernel(self, op: Op, kind: KernelKind) -> None:
        candidate = self.chosen[op.name]
        spec = kind.spec(op, candidate.in_layout, candidate.out_layout, candidate.knobs)
        into = self.slices.get(op.name) if op.name in self.writers else None
        view = None if into is None else self.slice_of(*into)
        key = (spec, view)
        if key not in self.kernel_vars:
            name = _symbol(f"{op.name}_{candidate.in_layout}_{candidate.out_layout}")
            func = kind.build(spec, self.target)
            if view is not None:
                func, name = write_into(func, *view), f"{name}_into_{into[0]}"
            self.kernel_vars[key] = self.bb.add_func(func, name)  # an equal function added before is reused
            self.kernels.setdefault(self.kernel_vars[key].name_hint, func)
        # a kernel's logical shapes may flatten the op's (dense on (batch, tokens, in)): reshaped around it
        if op.layout_free:
            inputs = self.layout_free_inputs(op, kind, spec)
        else:
            sides = {"in": candidate.in_layout, "out": candidate.out_layout}
            inputs = [self.reshaped(self.read(value, sides[side]), self.held(value, sides[side]),
                                    layout(want).physical_shape(logical), f"{op.name}_in{i}")
                      for i, (value, side, (want, logical)) in
                      enumerate(zip(op.inputs, op.input_sides, kind.activations(spec), strict=True))]
        args = [inputs[0], *(relax.const(array) for array in kind.pack(spec, op.params)), *inputs[1:]]
        written, kernel_out = kind.output(spec)
        shape = layout(written).physical_shape(kernel_out)
        if into is None:
            out = relax.TensorType(shape, layout(written).dtype)
            call = relax.call_tir(self.kernel_vars[key], relax.Tuple(args), out)
        else:
            call = relax.call_tir_inplace(self.kernel_vars[key], [*args, self.buffer(into[0], view[0])], len(args),
                                          relax.TensorType(view[0], layout(written).dtype))
        self.define(op, self.bb.emit(call, name_hint=op.name), candidate.out_layout)
        if into is not None:
            self.buffers[into[0]] = self.values[op.name][0]
        if op.layout_free:
            result = next((c for c in kind.conversions(op, spec) if c.input is None), None)
            out = self.values[op.name][0]
            if result is not None:
                out = self.transform(out, op.name, result.src, result.dst, result.shape)
                shape = layout(result.dst).physical_shape(result.shape)
            self.values[op.name] = (self.reshaped(out, shape, op.shape, f"{op.name}_out"), _fixed_layout(op.shape))
        elif written == "NC" and tuple(kernel_out) != tuple(op.shape):
            view = self.bb.emit(relax.op.reshape(self.values[op.name][0], op.shape), name_hint=f"{op.name}_out")
            self.values[op.name] = (view, written)

    def layout_free_inputs(self, op: Op, kind: KernelKind, spec) -> list[relax.Expr]:
        """The operands of layout-free ``op``'s kernel: its values as fixed ops see them, each viewed in the layout
        it stores the operand in and converted where the kernel reads it in another."""
        stored, _ = kind.stored_layouts(op)
        moves = {c.input: c for c in kind.conversions(op, spec) if c.input is not None}
        inputs = []
        for i, (value, have, (want, logical)) in enumerate(zip(op.inputs, stored, kind.activations(spec),
                                                               strict=True)):
            x = self.reshaped(self.read_fixed(value), self.shapes[value], layout(have).physical_shape(logical),
                              f"{op.name}_in{i}")
            if i in moves:
                x = self.transform(x, value, have, want, logical)
            inputs.append(x)
        return inputs

    def reshaped(self, x: relax.Expr, shape, wanted, name: str) -> relax.Expr:
        """``x`` (of ``shape``) reshaped to ``wanted`` if they differ."""
        if tuple(shape) == tuple(wanted):
            return x
        return self.bb.emit(relax.op.reshape(x, wanted), name_hint=name)

    def transform(self, x: relax.Expr, value: str, src: str, dst: str, shape) -> relax.Expr:
        """An explicit layout transform of ``x`` (the value ``value`` of logical ``shape``) from ``src`` to ``dst``; a
        conversion's kernel (``search.conversions``) where they store other precisions."""
        name = _symbol(f"{value}_to_{dst}")
        if converts(src, dst):
            key = ("convert", tuple(shape), src, dst)
            if key not in self.kernel_vars:
                func = conversion_kernel(shape, src, dst)  # a transform, not a template kernel (``kernels``)
                self.kernel_vars[key] = self.bb.add_func(func, _symbol(f"convert_{src}_{dst}"))
            out = relax.TensorType(layout(dst).physical_shape(shape), layout(dst).dtype)
            var = self.bb.emit(relax.call_tir(self.kernel_vars[key], relax.Tuple([x]), out), name_hint=name)
        else:
            var = self.bb.emit(relax.op.layout_transform(x, index_map=layout(src).index_map(layout(dst))),
                               name_hint=name)
        self.origins[var.name] = Origin(value, src, dst, tuple(shape))
        self.transforms += 1
        return var

    def slice_of(self, concat: str, start: int) -> tuple[tuple[int, ...], int, int]:
        """The stored shape of in-place ``concat``'s output, its channel axis and where channel ``start`` begins on
        it (``search.in_place.write_into``'s arguments)."""
        stored = layout(self.chosen[concat].out_layout)
        return stored.physical_shape(self.shapes[concat]), stored.stored_axis("C"), start // (stored.block() or 1)

    def buffer(self, concat: str, shape: tuple[int, ...]) -> relax.Expr:
        """In-place ``concat``'s output as written so far, allocated (uninitialised) before its first producer."""
        if concat not in self.buffers:
            dtype = layout(self.chosen[concat].out_layout).dtype
            alloc = relax.op.builtin.alloc_tensor(relax.ShapeExpr(shape), dtype, 0)
            self.buffers[concat] = self.bb.emit(alloc, name_hint=f"{concat}_buffer")
        return self.buffers[concat]

    def copy_in(self, op: Op) -> None:
        """Copy the inputs of in-place concat ``op`` that no kernel writes into its owner's buffer (each once)."""
        for value in op.attrs.get(COPIED, ()):
            if value in self.copied:
                continue
            owner, start = self.slices[value]
            view = self.slice_of(owner, start)
            stored = layout(self.chosen[owner].out_layout)
            key = ("copy", self.shapes[value], view, stored.dtype)
            if key not in self.kernel_vars:
                func = write_into(copy_kernel(stored.physical_shape(self.shapes[value]), stored.dtype), *view)
                self.kernel_vars[key] = self.bb.add_func(func, f"copy_{value}_into_{owner}")
                self.kernels.setdefault(self.kernel_vars[key].name_hint, func)
            call = relax.call_tir_inplace(self.kernel_vars[key], [self.read(value, stored.name),
                                                                  self.buffer(owner, view[0])],
                                          1, relax.TensorType(view[0], stored.dtype))
            self.buffers[owner] = self.bb.emit(call, name_hint=f"{value}_into_{owner}")
            self.origins[self.buffers[owner].name] = Origin(owner)
            self.copied.add(value)

    def layout_op(self, op: Op, kind: LayoutKind) -> None:
        stored = self.chosen[op.name].out_layout
        if self.chosen[op.name].in_place:  # its producers wrote its output, or the start of its owner's
            self.copy_in(op)
            owner = op.attrs.get(VIEW_OF, op.name)
            shape = layout(stored).physical_shape(op.shape)
            buffer = self.buffer(owner, layout(stored).physical_shape(self.shapes[owner]))
            if owner == op.name:
                self.values[op.name] = (buffer, stored)
            else:
                self.define(op, self.bb.emit(relax.op.memory.view(buffer, relax.ShapeExpr(shape)), name_hint=op.name),
                            stored)
            return
        inputs = [self.read(value, stored) for value in op.inputs]
        self.define(op, self.bb.emit(kind.emit(inputs, layout(stored), op.attrs), name_hint=op.name), stored)

    def follower(self, op: Op) -> None:
        stored = stored_as(self.values[op.inputs[0]][1], "fp32")  # a kernel's bf16 values: converted first
        expr = follower_expr(op, self.read(op.inputs[0], stored), stored)
        self.define(op, self.bb.emit(expr, name_hint=op.name), stored)

    def fixed(self, op: Op) -> None:
        """Re-emit a fixed op's expression with its variables read in NCHW (NC); a PrimFunc it calls
        (``call_tir``) is copied from the source module once."""

        def substitute(expr):
            if isinstance(expr, relax.Tuple):
                return relax.Tuple([substitute(item) for item in expr.fields])
            if isinstance(expr, relax.TupleGetItem):
                return relax.TupleGetItem(substitute(expr.tuple_value), expr.index)
            if isinstance(expr, relax.Var):
                return self.read_fixed(expr.name)
            if isinstance(expr, tvm.ir.GlobalVar):
                if expr.name_hint not in self.functions:
                    self.functions[expr.name_hint] = self.bb.add_func(self.graph.module[expr], expr.name_hint)
                return self.functions[expr.name_hint]
            return expr

        expr = op.call
        if isinstance(expr, relax.Call):
            expr = relax.Call(expr.op, [substitute(arg) for arg in expr.args], expr.attrs, expr.ty_args)
        else:
            expr = substitute(expr)
        self.define(op, self.bb.emit(expr, name_hint=op.name.replace(".", "_")), _fixed_layout(op.shape))

    def define(self, op: Op, expr: relax.Var, stored: str) -> None:
        self.values[op.name] = (expr, stored if activation_shape(op.shape) is not None else NO_LAYOUT)
        self.origins[expr.name] = Origin(op.name)

    def run(self) -> Emitted:
        params = [relax.Var(name, relax.TensorType(shape, dtype))
                  for (name, shape), dtype in zip(self.graph.inputs, self.graph.input_dtypes, strict=True)]
        with self.bb.function("main", params):
            for param in params:
                self.values[param.name] = (param, _fixed_layout(param.ty.shape.values))
            with self.bb.dataflow():
                for op in self.graph.ops:
                    kind = get_kind(op.kind) if op.role == "tunable" else None
                    if isinstance(kind, KernelKind):
                        self.kernel(op, kind)
                    elif isinstance(kind, LayoutKind):
                        self.layout_op(op, kind)
                    elif op.role == "follower":
                        self.follower(op)
                    else:
                        self.fixed(op)
                outputs = [self.read_fixed(value) for value in self.graph.outputs]
                result = relax.Tuple(outputs) if self.graph.output_is_tuple else outputs[0]
                out = self.bb.emit_output(result)
            self.bb.emit_func_output(out)
        return Emitted(self.bb.get(), self.kernels, self.transforms, self.origins)


def _symbol(name: str) -> str:
    """``name`` as a function or variable name: the separators of layout names (``+``, ``.``) replaced."""
    return name.replace("+", "_").replace(".", "_")


def _fixed_layout(shape) -> str:
    """How fixed ops and model inputs store a value of ``shape``: NCHW or NC if it is an activation, else as is."""
    return fixed_layout(shape) if activation_shape(shape) is not None else NO_LAYOUT


def follower_expr(op: Op, x: relax.Expr, stored: str) -> relax.Expr:
    """Follower ``op`` applied to ``x``, which is stored in layout ``stored`` (and so is the result)."""
    return get_follower(op.kind).emit(op, x, stored)


def emit_module(graph: OpGraph, chosen: dict[str, Candidate], target: tvm.target.Target) -> Emitted:
    """The Relax module running ``graph`` as ``chosen`` (node -> Candidate, already validated)."""
    with target:
        return _Emitter(graph, chosen, target).run()
