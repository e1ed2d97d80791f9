"""Softmax and layer norm along the innermost axis of ``(rows, cols)`` "NC" data: TOPI's computation (softmax in its
fast form, with the scale before it inlined), scheduled by ``search.lower.schedule_function``, as export schedules
the same operators when they run as fixed ops.

One knob, ``partial``: 1 keeps one partial sum per vector lane (``search.row_reductions``; offered where a row is
several whole vectors), 0 takes TVM's ``dlight.cpu.Reduction`` rule (a scalar sum per row), or the generic schedule
where that rule does not apply.
"""

from __future__ import annotations

import tvm
from tvm import te, topi

from search.lower import schedule_function
from search.templates.common import knob_product, resolve_knobs, unit
from search.templates.workloads import KernelSpec, Knobs, RowWorkload, SoftmaxWorkload

LAYOUT = "NC"


def supported_layouts(workload: RowWorkload) -> list[tuple[str, str]]:
    return [(LAYOUT, LAYOUT)]


def _choices(spec: KernelSpec) -> dict[str, list[int]]:
    lanes, cols = unit().lanes, spec.workload.cols
    return {"partial": [1, 0] if cols % lanes == 0 and cols > lanes else [0]}


def knob_space(spec: KernelSpec, size: int | None = None) -> list[Knobs]:
    return knob_product(_choices(spec), size)


def _compute(workload: RowWorkload) -> list[te.Tensor]:
    """The placeholders (data, then gamma and beta of a layer norm) and the output."""
    shape = (workload.rows, workload.cols)
    data = te.placeholder(shape, workload.dtype, name="data")
    if isinstance(workload, SoftmaxWorkload):
        scaled = data if workload.scale == 1.0 else te.compute(
            shape, lambda r, c: data[r, c] * tvm.tirx.const(workload.scale, workload.dtype), name="scaled")
        return [data, topi.nn.fast_softmax(scaled, axis=-1)]
    gamma = te.placeholder((workload.cols,), workload.dtype, name="gamma")
    beta = te.placeholder((workload.cols,), workload.dtype, name="beta")
    return [data, gamma, beta, topi.nn.layer_norm(data, gamma, beta, [-1], workload.epsilon)]


def build(spec: KernelSpec, target: tvm.target.Target) -> tvm.tirx.PrimFunc:
    knobs = resolve_knobs(spec.knobs, _choices(spec))
    sch = tvm.s_tir.Schedule(te.create_prim_func(_compute(spec.workload)))
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        if sch.get(block).name_hint == "scaled":
            sch.compute_inline(block)
    return schedule_function(sch.mod["main"], target, partial=bool(knobs["partial"])).without_attr("global_symbol")
