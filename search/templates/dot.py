"""What the dot-product kernel templates (bf16 and int8: ``conv2d_dot``, ``dense_dot``, ``batch_matmul_dot``)
share: the micro-kernels of each precision (``DotProduct``), the packing of data and weights into their blocks, the
parallel loop of micro-kernel calls (``search.microkernels``) with the fused epilogue, and the schedule of a
whole-tensor pass.

Each such kernel is two stages: ``pack`` converts the fp32 input (read in its layout) to the precision's data type into
blocks of 64 bytes of channels, padded; ``out`` calls the micro-kernel once per run of output pixels (or rows of a
matmul) and block of ``LANES`` output channels, in parallel, each call writing its ``(pixels, LANES)`` sums (fp32 or
int32) into a scratch buffer of its own and applying the epilogue from it into the output layout.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import tvm
import tvm.sym
from tvm import te

from search.errors import SearchError
from search.layouts import BF16, layout
from search.templates.common import epilogue_value, padded, rounded, unit, widened
from search.templates.workloads import KernelSpec

Offsets = Callable[[tvm.tirx.Var], tuple[tvm.tirx.Expr, tvm.tirx.Expr]]
Scalars = Callable[[tvm.tirx.Var], Sequence[tvm.tirx.Expr]]
Block = Callable[[tvm.tirx.Var], tvm.tirx.Expr]
Place = Callable[[tvm.tirx.Var, tvm.tirx.Var, tvm.tirx.Expr], tuple[tvm.tirx.Expr | None, tuple]]
LANES = 16  # output channels per block: one 64-byte row of fp32 or int32
CHUNK = 64  # pixels (or rows of a matmul) per call: the AMX micro-kernel's four tiles of 16, sharing each weight tile


@dataclass(frozen=True)
class DotProduct:
    """One precision's micro-kernels (``microkernels.cc``): the knob that selects them, the dtypes of the packed data,
    the packed weights and the sums, and the function of each knob value (``rows``: several short runs per call).
    Integer sums are scaled per output channel before the epilogue (``scaled``)."""

    knob: str
    data: str
    weight: str
    sum: str
    functions: Mapping[int, str]
    rows: Mapping[int, str]

    @property
    def block(self) -> int:
        """Input channels per block: one 64-byte row of the data type."""
        return 64 // np.dtype(self.data).itemsize

    @property
    def group(self) -> int:
        """Input channels per dot-product group: one 32-bit lane."""
        return 4 // np.dtype(self.data).itemsize

    @property
    def scaled(self) -> bool:
        return self.sum != "float32"

    def unit(self, spec: KernelSpec) -> int:
        """The spec's value of this precision's knob; SearchError unless it is the one knob and a known value."""
        knobs = dict(spec.knobs)
        if set(knobs) != {self.knob} or knobs[self.knob] not in self.functions:
            values = " or ".join(f"{self.knob}={value}" for value in self.functions)
            raise SearchError(f"a {self.knob} kernel takes the one knob {values}, got {spec.knobs}")
        return knobs[self.knob]


def blocked_weights(weight: np.ndarray, product: DotProduct) -> np.ndarray:
    """OIHW -> ``(O' // LANES, I' // block, kh, kw, block // group, LANES, group)``: for each block of output
    channels, each block of input channels and tap, ``block // group`` rows of (output channel, group of input
    channels), as the micro-kernels read them; O' and I' zero-padded to whole blocks; the dtype kept."""
    o, i, kh, kw = weight.shape
    block, group = product.block, product.group
    zeros = np.zeros((padded(o, LANES), padded(i, block), kh, kw), weight.dtype)
    zeros[:o, :i] = weight
    blocked = zeros.reshape(-1, LANES, zeros.shape[1] // block, block // group, group, kh, kw)
    return np.ascontiguousarray(blocked.transpose(0, 2, 5, 6, 3, 1, 4))


def packed(shape: Sequence[int], source: Callable[..., tuple[tvm.tirx.PrimExpr, tvm.tirx.PrimExpr]], name: str,
           convert: Callable[[tvm.tirx.PrimExpr], tvm.tirx.PrimExpr], zero: tvm.tirx.PrimExpr) -> te.Tensor:
    """The tensor ``name`` of ``shape``: element ``source(*index) = (value, inside)`` is ``convert(value)`` (from
    fp32) where ``inside`` holds and ``zero`` elsewhere. Both are simplified first for the index's range (a bound
    that always holds dropped, a clamp that never applies removed): a condition or clamp left on the vectorised axis
    would make the pass scalar."""
    def element(*index):
        value, inside = source(*index)
        analyzer = tvm.sym.Analyzer()
        for axis, extent in zip(index, shape):
            analyzer.bind(axis, tvm.ir.Range(0, extent))
        value, inside = analyzer.simplify(value), analyzer.simplify(inside)
        if isinstance(inside, tvm.tirx.IntImm) and inside.value:
            return convert(value)
        return tvm.tirx.if_then_else(inside, convert(value), zero)

    return te.compute(tuple(shape), element, name=name)


def row_calls(packed: te.Tensor, weight: te.Tensor, spec: KernelSpec, out_layout: str, shape: Sequence[int],
              calls: int, offsets: Offsets, scalars: Scalars, pixels: int, block: Block, place: Place,
              product: DotProduct, channel_axis: int = 1, rows: bool = False, name: str = "out",
              offset: tuple[te.Tensor, Callable[[tvm.tirx.Var, tvm.tirx.Expr], list]] | None = None
              ) -> tuple[te.Tensor, list[te.Tensor]]:
    """The output ``name`` of logical ``shape`` in ``out_layout``, and its epilogue's inputs (an integer precision's
    ``scale`` per channel, then bias and residual): ``calls`` calls of the spec's micro-kernel of ``product`` in a
    parallel loop, call ``i`` reading ``packed`` and ``weight`` at the element offsets ``offsets(i)`` with the
    micro-kernel's integer arguments ``scalars(i)`` (``microkernels.cc``; the last is its width) and writing up to
    ``pixels`` rows of ``LANES`` sums into a scratch buffer of its own, from which the epilogue writes them, still in
    cache. Call ``i`` computes block ``block(i)`` of the channels (axis ``channel_axis`` of ``shape``, along which the
    bias runs); its row ``p`` of channel ``c`` is the output element ``place(i, p, c)`` = (valid, logical index),
    dropped where ``valid`` (None: always) is false. A call that finds its instructions missing raises an error.
    ``rows``: the micro-kernel of several short runs per call. ``offset``: a tensor the kernel computes and where call
    ``i``'s channel ``c`` is in it, added to the sums before they are scaled (an integer precision's)."""
    from search import microkernels

    function = (product.rows if rows else product.functions)[product.unit(spec)]
    microkernels.load()  # for a numerical check compiled in memory; libraries link them (``link_options``)
    epilogue, stored = spec.epilogue, layout(out_layout)
    physical, channels = stored.physical_shape(shape), shape[channel_axis]
    at = stored.stored_coordinates()
    extra = ([te.placeholder((channels,), "float32", name="scale")] if product.scaled else []) + (
        [te.placeholder((channels,), "float32", name="bias")] if epilogue.bias else []) + (
        [te.placeholder(physical, stored.dtype, name="residual")] if epilogue.residual else [])
    def loaded(buffer: tvm.tirx.Buffer, where: list) -> tvm.tirx.PrimExpr:  # fp32, from a bf16 layout widened
        value = tvm.tirx.BufferLoad(buffer, where)
        return widened(value) if stored.storage == BF16 else value

    def body(ins, outs):
        x, k, *params = ins
        added = params.pop() if offset is not None else None
        scale = params.pop(0) if product.scaled else None
        bias, residual = (params[0] if epilogue.bias else None), (params[-1] if epilogue.residual else None)
        out, index, pixel, lane = outs[0], *(tvm.tirx.Var(name, "int32") for name in ("call", "pixel", "lane"))
        scratch = tvm.tirx.decl_buffer((pixels * LANES,), product.sum, name="scratch")
        channel = block(index) * LANES + lane
        valid, logical = place(index, pixel, channel)
        where = list(at(*logical))
        value = tvm.tirx.BufferLoad(scratch, [pixel * LANES + lane])
        if added is not None:
            value = value + tvm.tirx.BufferLoad(added, offset[1](index, channel))
        if scale is not None:
            value = value.astype("float32") * tvm.tirx.BufferLoad(scale, [channel])
        value = epilogue_value(epilogue, value, None if bias is None else tvm.tirx.BufferLoad(bias, [channel]),
                               None if residual is None else loaded(residual, where))
        store = tvm.tirx.BufferStore(out, rounded(value) if stored.storage == BF16 else value, where)
        whole = channels % LANES == 0  # else the last block's padded channels are dropped, lane by lane
        lanes = tvm.tirx.For(lane, 0, LANES, tvm.tirx.ForKind.VECTORIZED if whole else tvm.tirx.ForKind.SERIAL,
                             store if whole else tvm.tirx.IfThenElse(channel < channels, store, None))
        loop = tvm.tirx.For(pixel, 0, scalars(index)[-1], tvm.tirx.ForKind.SERIAL,
                            lanes if valid is None else tvm.tirx.IfThenElse(valid, lanes, None))
        x_offset, k_offset = offsets(index)
        result = tvm.tirx.call_extern("int32", function, x.access_ptr("r", offset=x_offset),
                                      k.access_ptr("r", offset=k_offset), scratch.access_ptr("w"), *scalars(index))
        message = tvm.ir.StringImm(f"{function}: this CPU lacks its instructions")
        call = tvm.tirx.AssertStmt(result == 0, tvm.ir.StringImm("RuntimeError"), [message])
        return tvm.tirx.For(index, 0, calls, tvm.tirx.ForKind.PARALLEL,
                            tvm.tirx.SeqStmt([tvm.tirx.AllocBuffer(scratch), call, loop]))

    computed = [] if offset is None else [offset[0]]
    buffers = [tvm.tirx.decl_buffer(t.shape, t.dtype, name=name)
               for t, name in ((packed, "x"), (weight, "k"), *((t, t.op.name) for t in (*extra, *computed)))]
    out = te.extern(list(physical), [packed, weight, *extra, *computed], body, name=name, dtype=stored.dtype,
                    in_buffers=buffers, out_buffers=[tvm.tirx.decl_buffer(list(physical), stored.dtype, name=name)])
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
