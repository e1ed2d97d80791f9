"""A schedule for functions that reduce rows along their innermost axis (softmax's max and sum, layer norm's mean and
variance): every block runs in parallel over its rows, and each reduction keeps one partial sum per vector lane
(``rfactor`` over the lanes, vectorised), so a row's sum is a few vector additions per lane instead of one scalar
dependency chain the length of the row. TVM's dlight CPU rule leaves that chain scalar (it cannot combine rfactor
with its compute_at); measured against it in docs/kernels.md.
"""

from __future__ import annotations

import tvm

from search.templates.common import unit

SPATIAL, REDUCE = tvm.tirx.IterVar.DataPar, tvm.tirx.IterVar.CommReduce


def schedule_rows(func: tvm.tirx.PrimFunc) -> tvm.tirx.PrimFunc | None:
    """``func`` scheduled as the module docstring says, or None where the pattern does not hold: a block whose iter
    vars are neither spatial nor reduction, or a reduction whose innermost loop is not a reduction over a multiple
    of the vector lanes (longer than one vector)."""
    lanes = unit().lanes
    sch = tvm.s_tir.Schedule(func)
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    for block in blocks:
        kinds = [iv.iter_type for iv in sch.get(block).iter_vars]
        if any(kind not in (SPATIAL, REDUCE) for kind in kinds):
            return None
        spatial = kinds.count(SPATIAL)
        loops = sch.get_loops(block)
        if REDUCE not in kinds:
            _parallel(sch, loops[:-1] if len(loops) > 1 else loops)
            if len(loops) > 1 and int(sch.get(loops[-1]).extent) % lanes == 0:
                sch.vectorize(sch.split(loops[-1], [None, lanes])[1])
            continue
        extent = int(sch.get(loops[-1]).extent)
        if kinds[-1] != REDUCE or len(loops) != len(kinds) or extent % lanes or extent == lanes:
            return None
        partial = sch.rfactor(sch.split(loops[-1], [None, lanes])[1], factor_axis=spatial)
        partial_loops = sch.get_loops(partial)
        sch.vectorize(partial_loops[-1])
        _parallel(sch, partial_loops[:spatial])
        _parallel(sch, sch.get_loops(block)[:spatial])
    return sch.mod["main"].with_attr("tir.is_scheduled", True)


def _parallel(sch: tvm.s_tir.Schedule, loops: list) -> None:
    if loops:
        sch.parallel(sch.fuse(*loops) if len(loops) > 1 else loops[0])
