"""What the bf16 kernel templates (``conv2d_bf16``, ``dense_bf16``) share: the knob, the rounding of fp32 data to
bf16 in TIR, the parallel loop of micro-kernel calls (``search.microkernels``), and the schedule of a whole-tensor
pass.

Each such kernel is three stages: ``pack`` rounds the fp32 input (read in its layout) to bf16 into blocks of
``BLOCK`` channels, zero-padded; ``acc`` calls the micro-kernel once per row of output pixels (or rows of a linear
layer) and block of ``LANES`` output channels, in parallel, writing fp32 ``(..., LANES)`` blocks; ``out`` is the fused
epilogue, written in the output layout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import tvm
from tvm import te

from search.errors import SearchError
from search.precision import AMX, DOT, KNOB, STORAGE, to_bf16_bits
from search.templates.common import padded, unit
from search.templates.workloads import KernelSpec, Knobs

BLOCK = 32  # input channels per block: one 64-byte row of bf16
LANES = 16  # output channels per block: one 64-byte row of fp32
CHUNK = 64  # rows of a matmul per call: four AMX tiles of 16 rows, in two passes sharing each weight tile
# Part of a bf16 kernel's cache key (``cost_models.tasks``): bump it whenever these kernels (their templates or the
# micro-kernels) change what they generate, so that their old timings are not reused and the fp32 ones still are.
# 2: a stride-1 convolution runs its output rows as one run of pixels per call; a strided 1x1 one packs what it reads.
VERSION = 2
FUNCTIONS = {AMX: "tessera_bf16_conv_row_amx", DOT: "tessera_bf16_conv_row_dot"}


def is_bf16(knobs: Knobs) -> bool:
    return KNOB in dict(knobs)


def instruction_unit(spec: KernelSpec) -> int:
    """The spec's bf16 knob value; SearchError unless it is the one knob and a known value."""
    knobs = dict(spec.knobs)
    if set(knobs) != {KNOB} or knobs[KNOB] not in FUNCTIONS:
        raise SearchError(f"a bf16 kernel takes the one knob {KNOB}={AMX} or {KNOB}={DOT}, got {spec.knobs}")
    return knobs[KNOB]


def pack_weights(weight: np.ndarray) -> np.ndarray:
    """OIHW -> bf16 ``(O' // LANES, I' // BLOCK, kh, kw, BLOCK // 2, LANES, 2)``: for each block of output channels,
    each block of input channels and tap, ``BLOCK // 2`` rows of (output channel, pair of input channels), as the
    micro-kernels read them; O' and I' zero-padded to whole blocks."""
    o, i, kh, kw = weight.shape
    zeros = np.zeros((padded(o, LANES), padded(i, BLOCK), kh, kw), np.float32)
    zeros[:o, :i] = weight
    blocked = zeros.reshape(-1, LANES, zeros.shape[1] // BLOCK, BLOCK // 2, 2, kh, kw)
    return to_bf16_bits(blocked.transpose(0, 2, 5, 6, 3, 1, 4))


def rounded(value: tvm.tirx.PrimExpr) -> tvm.tirx.PrimExpr:
    """``value`` (fp32) rounded to bf16 (to nearest, ties to even), as its bits (``STORAGE``)."""
    bits = tvm.tirx.reinterpret("uint32", value)
    half, one = tvm.tirx.const(0x7FFF, "uint32"), tvm.tirx.const(1, "uint32")
    return ((bits + half + ((bits >> 16) & one)) >> 16).astype(STORAGE)


def row_calls(
    packed: te.Tensor,
    weight: te.Tensor,
    shape: Sequence[int],
    spec: KernelSpec,
    calls: int,
    offsets: Callable[[tvm.tirx.Var], tuple[tvm.tirx.PrimExpr, tvm.tirx.PrimExpr, tvm.tirx.PrimExpr]],
    scalars: Callable[[tvm.tirx.Var], Sequence[tvm.tirx.PrimExpr]],
) -> te.Tensor:
    """The fp32 tensor ``acc`` of ``shape``: ``calls`` calls of the spec's micro-kernel in a parallel loop, call
    ``i`` reading ``packed`` and ``weight`` and writing ``acc`` at the element offsets ``offsets(i)``, with the
    micro-kernel's integer arguments ``scalars(i)`` (see ``microkernels.cc``). A call that finds its instructions
    missing raises an error."""
    from search import microkernels

    function = FUNCTIONS[instruction_unit(spec)]
    microkernels.load()  # for a numerical check compiled in memory; libraries link them (``link_options``)

    def body(ins, outs):
        x, k, out = ins[0], ins[1], outs[0]
        index = tvm.tirx.Var("row", "int32")
        x_offset, k_offset, out_offset = offsets(index)
        call = tvm.tirx.call_extern("int32", function, x.access_ptr("r", offset=x_offset),
                                    k.access_ptr("r", offset=k_offset), out.access_ptr("w", offset=out_offset),
                                    *scalars(index))
        message = tvm.ir.StringImm(f"{function}: this CPU lacks its instructions")
        check = tvm.tirx.AssertStmt(call == 0, tvm.ir.StringImm("RuntimeError"), [message])
        return tvm.tirx.For(index, 0, calls, tvm.tirx.ForKind.PARALLEL, check)

    buffers = [tvm.tirx.decl_buffer(t.shape, t.dtype, name=name) for t, name in ((packed, "x"), (weight, "k"))]
    return te.extern(list(shape), [packed, weight], body, name="acc", dtype="float32", in_buffers=buffers,
                     out_buffers=[tvm.tirx.decl_buffer(list(shape), "float32", name="conv")])


def schedule_pass(sch: tvm.s_tir.Schedule, name: str, outer: int) -> None:
    """A pass over a whole tensor: the ``outer`` outer loops fused and run in parallel, the innermost vectorised (in
    vectors of the host's lanes where it is a multiple of them; shorter: whole; else not)."""
    loops = sch.get_loops(sch.get_sblock(name))
    sch.parallel(sch.fuse(*loops[:outer]))
    inner = loops[-1]
    extent = int(sch.get(inner).extent)
    if extent > unit().lanes and extent % unit().lanes == 0:
        inner = sch.split(inner, [None, unit().lanes])[1]
    if extent % unit().lanes == 0 or extent < unit().lanes:  # else left scalar: no ragged vectors
        sch.vectorize(inner)
