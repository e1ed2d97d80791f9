"""Conversions between an activation's fp32 and bf16 values, fused with its layout transform: what an edge costs
where its two ends disagree on precision (``search.layouts``: a layout of ``bf16`` storage), as export runs it and
the cost layer times it. To bf16 the values are rounded to nearest (ties to even); back to fp32, exactly."""

from __future__ import annotations

from collections.abc import Sequence

import tvm
from tvm import te

from search.layouts import BF16, layout
from search.lower import schedule_generic
from search.templates.common import rounded, widened


def converts(src: str, dst: str) -> bool:
    """Whether moving a value from layout ``src`` to ``dst`` changes its precision."""
    return layout(src).storage != layout(dst).storage


def conversion_kernel(shape: Sequence[int], src: str, dst: str) -> tvm.tirx.PrimFunc:
    """A scheduled PrimFunc ``(data, out)``: the activation of logical ``shape`` stored in ``src``, written in
    ``dst`` with its values converted, one pass (scheduled as export schedules a layout transform)."""
    source, target = layout(src), layout(dst)
    data = te.placeholder(source.physical_shape(shape), source.dtype, name="data")
    to_logical, to_source = target.logical_coordinates(), source.stored_coordinates()

    def element(*index):
        value = data[to_source(*to_logical(*index))]
        return rounded(value) if target.storage == BF16 else widened(value)

    out = te.compute(target.physical_shape(shape), element, name="convert")
    return schedule_generic(te.create_prim_func([data, out]).without_attr("global_symbol"))
