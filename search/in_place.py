"""Concats in place: which concats may, and the kernels that write their slices and copy the other inputs in.

A concat runs in place when kernels write their outputs straight into its output (``write_into``), so it copies
nothing. ``mark_in_place`` finds them, by *families*: a concat (the owner) and the concats whose input lists are
prefixes of its own (DenseNet's dense block: layer i concatenates the block input and layers 1..i-1, the block output
all of them). In place, the owner's output is one buffer; a kernel input that only the family reads writes its slice
(*written*), every other input is copied into its slice (``copy_kernel``), and each prefix concat is a view of the
buffer's first channels (a *view*: free where those channels are the start of the buffer's memory,
``Layout.prefix_contiguous``). Attributes: the owner and its views get ``in_place``; ``copied`` lists the copied
inputs (when there are any); the owner's ``views`` names its views, a view's ``view_of`` its owner.

``write_into(func, full_shape, axis, offset)`` rebinds the last parameter of a scheduled PrimFunc (its output) to a
view of a tensor of ``full_shape``, starting ``offset`` elements along stored axis ``axis``; export calls it with
``relax.call_tir_inplace`` on the concatenated tensor, so the kernel's schedule is unchanged. The output parameter
becomes the full tensor and the old output is declared in the body as the view. Where the slice is one contiguous run
of the full tensor (every axis before ``axis`` of extent 1, as at batch 1 in NCHW, NCHWc and NC), the old output
buffer itself is declared at the slice's first element, in the IR. Otherwise the view needs the full tensor's
strides, which TVM 0.27's TIR cannot give the old buffer from Python: the rebinding goes through TVMScript
(``T.decl_buffer`` with the full tensor's strides and an element offset), at 0.05-0.24 s a kernel.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

import tvm
from tvm import te

from search.kinds import IN_PLACE, KernelKind, LayoutKind, get_kind
from search.kinds.base import COPIED, VIEW_OF, VIEWS
from search.layouts import DTYPES
from search.lower import schedule_generic
from search.op import Op


def row_major_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Element strides of a dense row-major tensor of ``shape``."""
    strides, step = [], 1
    for extent in reversed(shape):
        strides.insert(0, step)
        step *= int(extent)
    return tuple(strides)


def write_into(func: tvm.tirx.PrimFunc, full_shape: Sequence[int], axis: int, offset: int) -> tvm.tirx.PrimFunc:
    """``func`` with its output written into ``[..., offset : offset + n, ...]`` (along ``axis``) of a row-major
    tensor of ``full_shape`` and the output's dtype (float32, or the bits of bf16 values), which replaces the output
    parameter; every other axis of the output must span the full tensor's."""
    out = func.params[-1]
    if out.ty.dtype not in DTYPES.values():
        raise RuntimeError(f"a kernel writes an in-place concat in {' or '.join(DTYPES.values())}, not {out.ty.dtype}")
    shape, full = tuple(int(extent) for extent in out.ty.shape), tuple(int(extent) for extent in full_shape)
    if len(shape) != len(full) or any(a != b for i, (a, b) in enumerate(zip(shape, full)) if i != axis) \
            or offset + shape[axis] > full[axis]:
        raise RuntimeError(f"an output of shape {shape} is no slice of {full} along axis {axis} at {offset}")
    if all(extent == 1 for extent in full[:axis]) and not out.ty.strides:
        return _declared_at(func, full, axis, offset)
    return _strided_view(func, shape, full, axis, offset)


def _declared_at(func: tvm.tirx.PrimFunc, full: tuple[int, ...], axis: int, offset: int) -> tvm.tirx.PrimFunc:
    """``write_into`` for a contiguous slice: the old output declared at the address of its first element."""
    out = func.params[-1]
    buffer = tvm.tirx.decl_buffer(full, out.ty.dtype, name=f"{out.name}_full")
    first = tvm.tirx.BufferLoad(buffer, [offset if i == axis else 0 for i in range(len(full))])
    body = tvm.tirx.SeqStmt([tvm.tirx.DeclBuffer(out, data=tvm.tirx.address_of(first)), func.body])
    return tvm.tirx.PrimFunc([*func.params[:-1], buffer], body, func.ret_type, func.attrs)


def _strided_view(func: tvm.tirx.PrimFunc, shape: tuple[int, ...], full: tuple[int, ...], axis: int,
                  offset: int) -> tvm.tirx.PrimFunc:
    """``write_into`` for a strided slice, through TVMScript (module docstring)."""
    name, dtype = func.params[-1].name, func.params[-1].ty.dtype
    text = func.script()
    signature = re.search(rf"\b{re.escape(name)}: T\.Buffer\(\([\d, ]+\), \"{dtype}\"\)\):", text)
    if signature is None:
        raise RuntimeError(f"cannot find the output parameter {name!r} of the kernel to write in place")
    strides = row_major_strides(full)
    text = text[:signature.start()] + f"{name}_full: T.Buffer({full}, \"{dtype}\")):" + text[signature.end():]
    attrs = text.find("T.func_attr(", signature.end())
    body = text.index("\n", attrs if attrs >= 0 else signature.end())
    view = (f"\n    {name} = T.decl_buffer({shape}, \"{dtype}\", data={name}_full.data, strides={strides}, "
            f"elem_offset={offset * strides[axis]})")
    return tvm.script.from_source(text[:body] + view + text[body:])


def copy_kernel(shape: Sequence[int], dtype: str = "float32") -> tvm.tirx.PrimFunc:
    """A scheduled PrimFunc copying a tensor of stored ``shape`` and ``dtype`` (for ``write_into``: a copied
    input)."""
    x = te.placeholder(tuple(shape), dtype, name="x")
    y = te.compute(x.shape, lambda *i: x(*i), name="copy")
    return schedule_generic(te.create_prim_func([x, y]).without_attr("global_symbol"))


def written_inputs(op: Op) -> list[str]:
    """The inputs of in-place concat ``op`` (an owner or a view) whose producers write their slices."""
    return [value for value in op.inputs if value not in op.attrs.get(COPIED, ())]


def _in_place_concat(op: Op) -> bool:
    kind = get_kind(op.kind) if op.role == "tunable" else None
    return isinstance(kind, LayoutKind) and kind.in_place


def _writer(op: Op | None) -> bool:
    return (op is not None and op.role == "tunable" and isinstance(get_kind(op.kind), KernelKind)
            and not op.layout_free and len(op.shape) == 4)


def mark_in_place(ops: list[Op], outputs: list[str]) -> None:
    """Mark the concat families that can run in place (module docstring): a family runs in place when at least
    one input of its owner is a kernel's 4-D output that only the family reads, once."""
    readers: dict[str, set[str]] = defaultdict(set)
    for op in ops:
        for value in op.inputs:
            readers[value].add(op.name)
    for value in outputs:
        readers[value].add("")
    by_name = {op.name: op for op in ops}
    concats = [op for op in ops if _in_place_concat(op)]

    def extends(longer: Op, shorter: Op) -> bool:
        return len(longer.inputs) > len(shorter.inputs) and longer.inputs[: len(shorter.inputs)] == shorter.inputs

    owners = [op for op in concats if not any(extends(other, op) for other in concats)]
    views: dict[str, list[Op]] = defaultdict(list)
    for op in concats:
        extending = [owner for owner in owners if extends(owner, op)]
        if len(extending) == 1:  # a prefix of two owners belongs to neither
            views[extending[0].name].append(op)
    for owner in owners:
        family = {owner.name} | {view.name for view in views[owner.name]}
        copied = tuple(value for value in owner.inputs
                       if not (_writer(by_name.get(value)) and owner.inputs.count(value) == 1
                               and readers[value] <= family))
        if len(copied) == len(owner.inputs):
            continue
        owner.attrs[IN_PLACE] = True
        if copied:
            owner.attrs[COPIED] = copied
        if views[owner.name]:
            owner.attrs[VIEWS] = tuple(view.name for view in views[owner.name])
        for view in views[owner.name]:
            view.attrs.update({IN_PLACE: True, VIEW_OF: owner.name})
            if set(view.inputs) & set(copied):
                view.attrs[COPIED] = tuple(value for value in view.inputs if value in copied)
