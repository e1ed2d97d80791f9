"""A kernel that writes its output into a slice of a larger tensor: how a concat runs in place.

``write_into(func, full_shape, axis, offset)`` rebinds the last parameter of a scheduled PrimFunc (its output) to a
strided view of a tensor of ``full_shape``, starting ``offset`` elements along stored axis ``axis``; export calls it
with ``relax.call_tir_inplace`` on the concatenated tensor, so the kernel's schedule is unchanged and the concat
copies nothing. TVM 0.27's TIR offers no buffer substitution from Python, so the rebinding goes through TVMScript:
the output parameter becomes the full tensor and the old name is declared as the view (``T.decl_buffer`` with the
full tensor's strides and an element offset).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import tvm


def row_major_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Element strides of a dense row-major tensor of ``shape``."""
    strides, step = [], 1
    for extent in reversed(shape):
        strides.insert(0, step)
        step *= int(extent)
    return tuple(strides)


def write_into(func: tvm.tirx.PrimFunc, full_shape: Sequence[int], axis: int, offset: int) -> tvm.tirx.PrimFunc:
    """``func`` with its output written into ``[..., offset : offset + n, ...]`` (along ``axis``) of a row-major
    float32 tensor of ``full_shape``, which replaces the output parameter; every other axis of the output must span
    the full tensor's."""
    name = func.params[-1].name
    text = func.script()
    signature = re.search(rf"\b{re.escape(name)}: T\.Buffer\(\(([\d, ]+)\), \"float32\"\)\):", text)
    if signature is None:
        raise RuntimeError(f"cannot find the output parameter {name!r} of the kernel to write in place")
    shape = tuple(int(extent) for extent in signature.group(1).split(",") if extent.strip())
    full = tuple(int(extent) for extent in full_shape)
    if len(shape) != len(full) or any(a != b for i, (a, b) in enumerate(zip(shape, full)) if i != axis) \
            or offset + shape[axis] > full[axis]:
        raise RuntimeError(f"an output of shape {shape} is no slice of {full} along axis {axis} at {offset}")
    strides = row_major_strides(full)
    text = text[:signature.start()] + f"{name}_full: T.Buffer({full}, \"float32\")):" + text[signature.end():]
    attrs = text.find("T.func_attr(", signature.end())
    body = text.index("\n", attrs if attrs >= 0 else signature.end())
    view = (f"\n    {name} = T.decl_buffer({shape}, \"float32\", data={name}_full.data, strides={strides}, "
            f"elem_offset={offset * strides[axis]})")
    return tvm.script.from_source(text[:body] + view + text[body:])
