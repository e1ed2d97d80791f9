"""Lower an emitted module: legalise (softmax, exp, erf and tanh in their fast forms), fuse the chains of non-template
operators, schedule them (reductions along the innermost axis, as softmax and layer norm, with vectorised partial
sums or TVM's dlight CPU rule; everything else by a simple parallel, vectorised schedule), check that the template
kernels survive the default Relax pipeline unchanged, and compile.

The CPU default pipeline of ``tvm.compile`` does not fuse, so ``call_tir`` kernels stay separate PrimFuncs unless
fused here; the check compares every kernel body after the pipeline with the body its kind's ``build`` returned.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import tvm
import tvm_ffi
from tvm import relax
from tvm.s_tir import dlight

from search.bindings import op_name
from search.row_reductions import schedule_rows
from search.templates.common import unit

SCHEDULED = "tir.is_scheduled"
MIN_PARALLEL = 4  # fuse leading spatial loops until at least this many parallel iterations
MAX_VECTOR = 64  # longest loop vectorised whole
OPAQUE = 8  # relax's OpPatternKind kOpaque: FuseOps fuses nothing into or out of such a function
CALLS = ("relax.call_tir", "relax.call_tir_inplace")  # a PrimFunc call; in place: a kernel writing into a concat


def schedule_generic(func: tvm.tirx.PrimFunc) -> tvm.tirx.PrimFunc:
    """Inline what a fused function computes on the way (elementwise producers into their consumers), then
    parallelise the leading spatial loops of every remaining block and vectorise its innermost spatial loop: last in
    a purely spatial block, moved inside the reduction loops of a reduction (a pooling window over an NCHW{c}c
    channel block or NHWC's channels: 0.79 ms serial, 0.08 ms vectorised on NCHW16c 1x288x35x35)."""
    sch = tvm.s_tir.Schedule(func)
    for block in sch.get_child_blocks(sch.get_sblock("root"))[:-1]:
        try:
            sch.compute_inline(block)
        except (RuntimeError, OSError, ValueError):  # a reduction, or a block others cannot take in
            continue
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        loops = sch.get_loops(block)
        spatial = sum(1 for iv in sch.get(block).iter_vars if iv.iter_type == 0)
        spatial = min(spatial, len(loops))
        if spatial == 0:
            continue
        if 1 < spatial < len(loops) and _contiguous_lanes(sch, block, loops[spatial - 1], spatial - 1):
            vector, outer = loops[spatial - 1], loops[: spatial - 1]
            if int(sch.get(vector).extent) > MAX_VECTOR:  # NHWC's channels: a vector's worth at a time
                rest, vector = sch.split(vector, [None, unit().lanes])
                outer = [*outer, rest]
            sch.reorder(*loops[spatial:], vector)  # a reduction: its window loops go outside
        else:
            vector = loops[spatial - 1] if spatial == len(loops) and spatial > 1 else None
            outer = loops[: spatial - 1] if vector is not None else loops[:spatial]
        count, take = 1, 0
        for loop in outer:
            take += 1
            count *= int(sch.get(loop).extent)
            if count >= MIN_PARALLEL:
                break
        if take:
            sch.parallel(sch.fuse(*outer[:take]) if take > 1 else outer[0])
        if vector is not None and 2 <= int(sch.get(vector).extent) <= MAX_VECTOR:
            sch.vectorize(vector)
    return sch.mod["main"].with_attr(SCHEDULED, True)


def _reduces_innermost(func: tvm.tirx.PrimFunc) -> bool:
    """Whether a block of ``func`` reduces along the last axis of what it reads (softmax's max and sum, layer norm's
    mean), the pattern ``dlight.cpu.Reduction`` schedules well; pooling windows and channel blocks are not."""
    sch = tvm.s_tir.Schedule(func)
    for block in (sch.get(b) for b in sch.get_child_blocks(sch.get_sblock("root"))):
        reduce = [iv.var for iv in block.iter_vars if iv.iter_type == tvm.tirx.IterVar.CommReduce]
        if any(r.region[-1].min.same_as(v) for r in block.reads for v in reduce):
            return True
    return False


def schedule_function(func: tvm.tirx.PrimFunc, target: tvm.target.Target, *, partial: bool = True
                      ) -> tvm.tirx.PrimFunc:
    """``func`` scheduled: where it reduces along its innermost axis, by ``search.row_reductions`` (only if
    ``partial``) where its rows split into whole vectors, else by ``dlight.cpu.Reduction`` where that rule applies;
    otherwise generically."""
    if _reduces_innermost(func):
        try:
            rows = schedule_rows(func) if partial else None
        except (RuntimeError, OSError, ValueError):  # a ScheduleError: try the next schedule
            rows = None
        if rows is not None:
            return rows
        try:
            with target:
                sch = dlight.cpu.Reduction().apply(func, target, False)
        except (RuntimeError, OSError, ValueError):  # the rule's own ScheduleErrors: take the generic schedule
            sch = None
        if isinstance(sch, tvm.s_tir.Schedule):
            return sch.mod["main"].with_attr(SCHEDULED, True)
    return schedule_generic(func)


def _contiguous_lanes(sch: tvm.s_tir.Schedule, block, loop, index: int) -> bool:
    """Whether ``loop`` (bound to the block's iter var ``index``) is worth vectorising inside a reduction: a loop of
    at most MAX_VECTOR iterations or a multiple of the vector lanes that only ever indexes the last dimension of what
    the block reads, alone (a channel block or NHWC's channels, not a window)."""
    extent = int(sch.get(loop).extent)
    if extent < 2 or (extent > MAX_VECTOR and extent % unit().lanes):
        return False
    var = sch.get(block).iter_vars[index].var
    reads = sch.get(block).reads
    return bool(reads) and all(r.region[-1].min.same_as(var) for r in reads)


@dataclass(frozen=True)
class Call:
    """One PrimFunc call of the lowered ``main``, in execution order: the function's name (the symbol the VM runs)
    and the names of the bindings of the emitted module it computes (several when they were fused)."""

    symbol: str
    bindings: tuple[str, ...]


def _calls(legalised: tvm.IRModule, fused: tvm.IRModule, merged: tvm.IRModule) -> list[Call]:
    """The PrimFunc calls of ``merged["main"]`` (after FuseTIR), with the bindings of ``legalised["main"]`` (before
    FuseOps) each one computes: each member of a fused function is the binding of ``legalised`` that calls the same
    PrimFunc on the same values (FuseOps renames a group's last member, and one function serves every group of the
    same operators on the same shapes, named after the first). FuseTIR turns each call of a fused function into a call
    of a PrimFunc of the same name, so the two call sequences correspond one to one."""
    calls_of: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for binding in (b for block in legalised["main"].body.blocks for b in block.bindings):
        if op_name(binding.value) in CALLS:
            calls_of[_signature(binding.value, {})].append(binding.var.name)
    renamed: dict[str, str] = {}  # a group's value in fused["main"] -> the binding it is in legalised["main"]
    before = []
    for binding in (b for block in fused["main"].body.blocks for b in block.bindings):
        value = binding.value
        if op_name(value) in CALLS:
            before.append((value.args[0].name_hint, (binding.var.name,)))
        elif isinstance(value, relax.Call) and isinstance(fused.functions.get(value.op), relax.Function):
            function = fused[value.op]
            names = {param.name: renamed.get(_name(arg), _name(arg)) for param, arg in zip(function.params,
                                                                                             value.args)}
            members = []
            for member in (b for block in function.body.blocks for b in block.bindings):
                found = calls_of.get(_signature(member.value, names), []) if op_name(member.value) in CALLS else []
                names[member.var.name] = found[0] if len(found) == 1 else member.var.name
                members.append(names[member.var.name])
            renamed[binding.var.name] = members[-1]
            before.append((value.op.name_hint, tuple(members)))
    after = [b.value.args[0].name_hint for block in merged["main"].body.blocks for b in block.bindings
             if op_name(b.value) in CALLS]
    if [symbol for symbol, _ in before] != after:
        raise RuntimeError("FuseTIR changed the sequence of calls: cannot say what each call computes")
    return [Call(symbol, members) for symbol, members in before]


def _name(expr: relax.Expr) -> str:
    return getattr(expr, "name", "")  # a relax.Var; a constant: ""


def _signature(value: relax.Expr, names: dict[str, str]) -> tuple[str, ...]:
    """A PrimFunc call as the callee's name and its arguments' names (a fused function's parameter: ``names``, the
    value its caller passed)."""
    args = value.args[1].fields if isinstance(value.args[1], relax.Tuple) else [value.args[1]]
    return (value.args[0].name_hint, *(names.get(_name(arg), _name(arg)) for arg in args))


def _fuse(mod: tvm.IRModule) -> tuple[tvm.IRModule, tvm.IRModule, tvm.IRModule]:
    """``mod`` with fast math, legalised; then fused: after FuseOps (relax functions per group) and after FuseTIR
    (PrimFuncs). Fast math: softmax, exp, erf and tanh as TVM's ``fast_*`` forms, which vectorise (the templates'
    GELU epilogues use the same rational erf and tanh)."""
    mod = relax.transform.LegalizeOps()(relax.transform.FastMathTransform()(mod))
    marked = tvm.IRModule(dict(mod.functions), attrs=mod.attrs)
    for gvar, func in mod.functions.items():
        if isinstance(func, tvm.tirx.PrimFunc) and func.attrs.get(SCHEDULED, False):
            marked[gvar] = func.with_attr("op_pattern", OPAQUE)
    fused = relax.transform.FuseOps()(relax.transform.AnnotateTIROpPattern()(marked))
    return marked, fused, relax.transform.FuseTIR()(fused)


def schedule_legalised(mod: tvm.IRModule, target: tvm.target.Target) -> tvm.IRModule:
    """Legalise ``mod``, fuse chains of injective and elementwise operators (a concat with the BatchNorm and ReLU
    after it, a pooling with the scale, shift and ReLU after it) into one function each, and schedule every
    PrimFunc not already marked scheduled. The template kernels are marked opaque, so nothing fuses into them."""
    return _scheduled(_fuse(mod)[2], target)


def _scheduled(mod: tvm.IRModule, target: tvm.target.Target) -> tvm.IRModule:
    updated = tvm.IRModule(dict(mod.functions), attrs=mod.attrs)
    for gvar, func in mod.functions.items():
        if isinstance(func, tvm.tirx.PrimFunc) and not func.attrs.get(SCHEDULED, False):
            try:
                updated[gvar] = schedule_function(func, target)
            except (RuntimeError, OSError, ValueError):  # ScheduleError, or tvm-ffi's errors for odd loop nests
                continue  # leave it unscheduled: correct, just serial
    return updated


def lower_and_compile(mod: tvm.IRModule, kernels: dict[str, tvm.tirx.PrimFunc], target: tvm.target.Target
                      ) -> tuple[Any, list[Call]]:
    """Compile ``mod`` after checking each kernel in ``kernels`` (name -> built PrimFunc) is kept as built; returns
    the executable and its PrimFunc calls in execution order (which bindings of ``mod`` each computes).

    Raises
    ------
    RuntimeError
        If the pipeline dropped, fused or rewrote a template kernel (a bug, not a user error).
    """
    legalised, fused, merged = _fuse(mod)
    calls = _calls(legalised, fused, merged)
    return _compiled(merged, kernels, target), calls


def compile_module(mod: tvm.IRModule, target: tvm.target.Target) -> Any:
    """``lower_and_compile``'s executable alone, for a module returning intermediate values: its calls are not named
    (fusion does not keep the sequence that names them) and its kernels not checked (those whose results it no longer
    returns are dropped)."""
    return _compiled(_fuse(mod)[2], {}, target)


def _compiled(merged: tvm.IRModule, kernels: dict[str, tvm.tirx.PrimFunc], target: tvm.target.Target) -> Any:
    """The executable of ``merged`` (fused), each template kernel in ``kernels`` checked to be kept as built."""
    scheduled = _scheduled(merged, target)
    with target:
        lowered = relax.get_pipeline("default")(scheduled)
    functions = {gvar.name_hint: func for gvar, func in lowered.functions.items()}
    for name, func in kernels.items():
        kept = functions.get(name)
        if kept is None or not tvm_ffi.structural_equal(kept.body, func.body):
            raise RuntimeError(f"the compile pipeline changed template kernel {name}")
    return tvm.compile(lowered, target=target, relax_pipeline=None)
