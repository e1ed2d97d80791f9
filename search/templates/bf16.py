"""What the bf16 kernel templates (``conv2d_bf16``, ``dense_bf16``, ``batch_matmul_bf16``) share: the knob, the
rounding of fp32 data to bf16 in TIR, the parallel loop of micro-kernel calls (``search.microkernels``) with the
fused epilogue, and the schedule of a whole-tensor pass.

Each such kernel is two stages: ``pack`` rounds the fp32 input (read in its layout) to bf16 into blocks of ``BLOCK``
channels, zero-padded; ``out`` calls the micro-kernel once per run of output pixels (or rows of a matmul) and block of
``LANES`` output channels, in parallel, each call writing fp32 ``(pixels, LANES)`` into a scratch buffer of its own
and applying the epilogue from it into the output layout.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import tvm
import tvm.sym
from tvm import te

from search.errors import SearchError
from search.layouts import layout
from search.precision import AMX, DOT, KNOB, STORAGE, to_bf16_bits
from search.templates.common import epilogue_value, padded, unit
from search.templates.workloads import KernelSpec, Knobs

Offsets = Callable[[tvm.tirx.Var], tuple[tvm.tirx.Expr, tvm.tirx.Expr]]
Scalars = Callable[[tvm.tirx.Var], Sequence[tvm.tirx.Expr]]
Block = Callable[[tvm.tirx.Var], tvm.tirx.Expr]
Place = Callable[[tvm.tirx.Var, tvm.tirx.Var, tvm.tirx.Expr], tuple[tvm.tirx.Expr | None, tuple]]
BLOCK = 32  # input channels per block: one 64-byte row of bf16
LANES = 16  # output channels per block: one 64-byte row of fp32
CHUNK = 64  # pixels (or rows of a matmul) per call: the AMX micro-kernel's four tiles of 16, sharing each weight tile
# Part of a bf16 kernel's cache key (``cost_models.tasks``): bump it whenever these kernels (their templates or the
# micro-kernels) change what they generate, so that their old timings are not reused and the fp32 ones still are.
# 2: a stride-1 convolution runs its output rows as one run of pixels per call; a strided 1x1 one packs what it reads.
# 3: each call applies the epilogue to its own pixels (no separate pass over the whole output). 4: a row of taps that
# fits one block with the channels (a stem's) is folded into the channels. 5: the AVX-512 BF16 kernel splits a run into
# tiles of even sizes (a row of 7 pixels: one tile of 7, not 4 + 1 + 1 + 1); packing drops the bounds that always hold.
# 6: a strided convolution whose output rows have at most 16 pixels computes four of them per call, one tile each;
# folded taps are packed from a zero-padded copy of the input whose channels are padded to a power of two; a stride-1
# convolution's calls cycle through its weights where they are smaller than an image's input.
VERSION = 6
FUNCTIONS = {AMX: "tessera_bf16_conv_row_amx", DOT: "tessera_bf16_conv_row_dot"}
ROWS_FUNCTIONS = {AMX: "tessera_bf16_conv_rows_amx", DOT: "tessera_bf16_conv_rows_dot"}
"""The micro-kernels of several short runs per call (``microkernels.cc``), by the bf16 knob's value."""


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


def packed(shape: Sequence[int], source: Callable[..., tuple[tvm.tirx.PrimExpr, tvm.tirx.PrimExpr]],
           name: str) -> te.Tensor:
    """The bf16 tensor ``name`` of ``shape``: element ``source(*index) = (value, inside)`` is ``value`` (fp32)
    rounded where ``inside`` holds and zero elsewhere. Both are simplified first for the index's range (a bound that
    always holds dropped, a clamp that never applies removed): a condition or clamp left on the vectorised axis would
    make the pass scalar."""
    def element(*index):
        value, inside = source(*index)
        analyzer = tvm.sym.Analyzer()
        for axis, extent in zip(index, shape):
            analyzer.bind(axis, tvm.ir.Range(0, extent))
        value, inside = analyzer.simplify(value), analyzer.simplify(inside)
        if isinstance(inside, tvm.tirx.IntImm) and inside.value:
            return rounded(value)
        return tvm.tirx.if_then_else(inside, rounded(value), tvm.tirx.const(0, STORAGE))

    return te.compute(tuple(shape), element, name=name)


def row_calls(packed: te.Tensor, weight: te.Tensor, spec: KernelSpec, out_layout: str, shape: Sequence[int],
              calls: int, offsets: Offsets, scalars: Scalars, pixels: int, block: Block, place: Place,
              channel_axis: int = 1, functions: Mapping[int, str] = FUNCTIONS) -> tuple[te.Tensor, list[te.Tensor]]:
    """The output "out" of logical ``shape`` in ``out_layout``, and its epilogue's inputs (bias, residual):
    ``calls`` calls of the spec's micro-kernel in a parallel loop, call ``i`` reading ``packed`` and ``weight`` at
    the element offsets ``offsets(i)`` with the micro-kernel's integer arguments ``scalars(i)`` (``microkernels.cc``;
    the last is its width) and writing up to ``pixels`` rows of ``LANES`` channels into a scratch buffer of its own,
    from which the epilogue writes them, still in cache. Call ``i`` computes block ``block(i)`` of the channels (axis
    ``channel_axis`` of ``shape``, along which the bias runs); its row ``p`` of channel ``c`` is the output element
    ``place(i, p, c)`` = (valid, logical index), dropped where ``valid`` (None: always) is false. A call that finds
    its instructions missing raises an error. ``functions`` names the micro-kernel of each bf16 setting
    (``ROWS_FUNCTIONS``: several short runs per call)."""
    from search import microkernels

    function = functions[instruction_unit(spec)]
    microkernels.load()  # for a numerical check compiled in memory; libraries link them (``link_options``)
    epilogue, stored = spec.epilogue, layout(out_layout)
    physical, channels = stored.physical_shape(shape), shape[channel_axis]
    at = stored.stored_coordinates()
    extra = ([te.placeholder((channels,), "float32", name="bias")] if epilogue.bias else []) + (
        [te.placeholder(physical, "float32", name="residual")] if epilogue.residual else [])

    def body(ins, outs):
        x, k, *params = ins
        bias, residual = (params[0] if epilogue.bias else None), (params[-1] if epilogue.residual else None)
        out, index, pixel, lane = outs[0], *(tvm.tirx.Var(name, "int32") for name in ("call", "pixel", "lane"))
        scratch = tvm.tirx.decl_buffer((pixels * LANES,), "float32", name="scratch")
        channel = block(index) * LANES + lane
        valid, logical = place(index, pixel, channel)
        where = list(at(*logical))
        value = epilogue_value(epilogue, tvm.tirx.BufferLoad(scratch, [pixel * LANES + lane]),
                               None if bias is None else tvm.tirx.BufferLoad(bias, [channel]),
                               None if residual is None else tvm.tirx.BufferLoad(residual, where))
        store = tvm.tirx.BufferStore(out, value, where)
        whole = channels % LANES == 0  # else the last block's padded channels are dropped, lane by lane
        lanes = tvm.tirx.For(lane, 0, LANES, tvm.tirx.ForKind.VECTORIZED if whole else tvm.tirx.ForKind.SERIAL,
                             store if whole else tvm.tirx.IfThenElse(channel < channels, store, None))
        rows = tvm.tirx.For(pixel, 0, scalars(index)[-1], tvm.tirx.ForKind.SERIAL,
                            lanes if valid is None else tvm.tirx.IfThenElse(valid, lanes, None))
        x_offset, k_offset = offsets(index)
        result = tvm.tirx.call_extern("int32", function, x.access_ptr("r", offset=x_offset),
                                      k.access_ptr("r", offset=k_offset), scratch.access_ptr("w"), *scalars(index))
        message = tvm.ir.StringImm(f"{function}: this CPU lacks its instructions")
        call = tvm.tirx.AssertStmt(result == 0, tvm.ir.StringImm("RuntimeError"), [message])
        return tvm.tirx.For(index, 0, calls, tvm.tirx.ForKind.PARALLEL,
                            tvm.tirx.SeqStmt([tvm.tirx.AllocBuffer(scratch), call, rows]))

    buffers = [tvm.tirx.decl_buffer(t.shape, t.dtype, name=name)
               for t, name in ((packed, "x"), (weight, "k"), *((t, t.op.name) for t in extra))]
    out = te.extern(list(physical), [packed, weight, *extra], body, name="out", dtype="float32", in_buffers=buffers,
                    out_buffers=[tvm.tirx.decl_buffer(list(physical), "float32", name="out")])
    return out, extra


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
