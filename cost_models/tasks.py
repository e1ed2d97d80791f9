"""What the cost layer measures: a template kernel or a layout transform, each with a canonical cache key and the
PrimFunc that gets timed for it.

The key holds only what determines the timing (kind, workload, layouts, knobs, epilogue; a bf16 or int8 kernel's
generation), never where the task came from, so the same workload on two nodes or in two models is measured once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any

import numpy as np
import tvm
from tvm import relax

from cost_models.cache import CostRecord, canonical
from search.conversions import conversion_kernel, converts
from search.errors import SearchError
from search.followers import get_follower
from search.kinds import KINDS, LayoutKind, kernel_kind
from search.layouts import ACTIVATION_AXES, layout
from search.lower import schedule_legalised
from search.templates import bf16, int8
from search.templates.workloads import KernelSpec, epilogue_key

TRANSFORM_DTYPE = "float32"
FREE = CostRecord(0.0, 0.0, 0)  # the cost of a transform between identical layouts, which is never measured


@dataclass(frozen=True)
class KernelTask:
    """Time the template kernel its kind builds for ``spec`` on random arguments."""

    spec: KernelSpec

    @property
    def free(self) -> bool:
        return False

    @cached_property
    def key(self) -> str:
        spec = self.spec
        return canonical(
            {
                "kind": spec.workload.kind,
                "workload": asdict(spec.workload),
                "in_layout": spec.in_layout,
                "out_layout": spec.out_layout,
                "knobs": [list(pair) for pair in spec.knobs],
                "epilogue": epilogue_key(spec.epilogue),
                **({"bf16_version": bf16.VERSION} if bf16.is_bf16(spec.knobs) else {}),
                **({"int8_version": int8.VERSION} if int8.is_int8(spec.knobs) else {}),
            }
        )

    def primfunc(self, target: tvm.target.Target) -> tvm.tirx.PrimFunc:
        return kernel_kind(self.spec.workload.kind).build(self.spec, target)


@dataclass(frozen=True)
class TransformTask:
    """Time re-laying out an activation of logical ``shape`` (NCHW, or the (rows, features) of ``NC``) from ``src``
    to ``dst``, as export runs it.

    Export emits ``R.layout_transform`` and ``search.lower`` legalises and schedules it; ``primfunc`` does the same
    to a one-op module. Between layouts of fp32 and bf16 values it is a conversion fused with the transform
    (``search.conversions``). A transform between identical layouts is ``free``: it costs 0 and is never measured.
    """

    shape: tuple[int, ...]
    src: str
    dst: str

    def __post_init__(self) -> None:
        shape = tuple(int(extent) for extent in self.shape)
        if len(shape) not in ACTIVATION_AXES:
            raise SearchError(f"a layout transform needs a logical NCHW or NC shape, got {self.shape}")
        object.__setattr__(self, "shape", shape)
        layout(self.src).check(shape)
        layout(self.dst).check(shape)

    @property
    def free(self) -> bool:
        return self.src == self.dst

    @cached_property
    def key(self) -> str:
        return canonical(
            {"kind": "layout_transform", "shape": list(self.shape), "src": self.src, "dst": self.dst,
             "dtype": TRANSFORM_DTYPE}
        )

    def primfunc(self, target: tvm.target.Target) -> tvm.tirx.PrimFunc:
        """The legalised transform (or the conversion), scheduled for ``target``."""
        if converts(self.src, self.dst):
            return conversion_kernel(self.shape, self.src, self.dst)
        src, dst = layout(self.src), layout(self.dst)
        data = relax.Var("data", relax.TensorType(src.physical_shape(self.shape), src.dtype))
        bb = relax.BlockBuilder()
        with bb.function("main", [data]):
            out = bb.emit(relax.op.layout_transform(data, index_map=src.index_map(dst)))
            bb.emit_func_output(out)
        lowered = schedule_legalised(bb.get(), target)
        (func,) = [f for f in lowered.functions.values() if isinstance(f, tvm.tirx.PrimFunc)]
        return func


def _follower_key(kind: str, attrs: tuple[tuple[str, Any], ...]) -> list:
    """A follower in a chain's key: its kind, attributes and, once raised, its revision."""
    revision = get_follower(kind).revision
    return [kind, dict(attrs)] + ([revision] if revision else [])


@dataclass(frozen=True)
class ChainTask:
    """Time what a node runs around its kernel, in one layout, as export compiles and runs it: a layout node's own op
    (``head`` a layout kind, ``concat``, ``add``, ``channel_slice``, ``channel_gate``, of activations of logical shapes
    ``inputs``), a kernel's output (``head`` ``output``, its one input) or an in-place concat's copies (``head``
    ``copy``: the inputs but the last copied side by side into a buffer of the last one's shape), and the followers
    export runs right after it (``followers``: (kind, attributes as sorted pairs)), legalised, fused and scheduled by
    ``search.lower`` and timed through the Relax VM, whose own calls are part of the time (as in the network). Inputs
    and output are stored in ``layout`` (bf16 values as their bits where it names them); ``attrs`` are the layout kind's
    ``attributes`` (sorted pairs), in the key only when it has any.
    """

    head: str
    inputs: tuple[tuple[int, ...], ...]
    followers: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]
    layout: str
    attrs: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        layout_head = isinstance(KINDS.get(self.head), LayoutKind)
        if (self.head not in ("output", "copy") and not layout_head) or not self.inputs:
            raise SearchError(f"a chain starts with a layout kind's op, a kernel's output or a copy, got {self.head!r}")
        for shape in self.inputs:
            layout(self.layout).check(shape)

    @property
    def free(self) -> bool:
        return False

    @cached_property
    def key(self) -> str:
        key = {"kind": "chain", "head": self.head, "inputs": [list(s) for s in self.inputs],
               "followers": [_follower_key(kind, attrs) for kind, attrs in self.followers],
               "layout": self.layout, "dtype": TRANSFORM_DTYPE}
        return canonical({**key, "attrs": dict(self.attrs)} if self.attrs else key)

    def module(self) -> tvm.IRModule:
        """``main(inputs...)``: the head, then the followers, every tensor in ``layout``."""
        from search.emit import follower_expr
        from search.kinds import get_kind
        from search.op import Op

        stored = layout(self.layout)
        copies = self.inputs[:-1] if self.head == "copy" else ()
        params = [relax.Var(f"x{i}", relax.TensorType(stored.physical_shape(shape), stored.dtype))
                  for i, shape in enumerate(copies or self.inputs)]
        rng = np.random.default_rng(0)
        bb = relax.BlockBuilder()
        with bb.function("main", params):
            with bb.dataflow():
                channels = self.inputs[-1][1]
                if self.head == "copy":
                    x = self._copies(bb, params)
                elif self.head == "output":
                    x = params[0]
                else:
                    kind, attrs = get_kind(self.head), dict(self.attrs)
                    x = bb.emit(kind.emit(params, stored, attrs))
                    channels = kind.output_shape(self.inputs, attrs)[1]
                for index, (kind, attrs) in enumerate(self.followers):
                    values = {"value": rng.uniform(0.5, 1.5, channels).astype(TRANSFORM_DTYPE)}
                    op = Op(f"f{index}", kind, "follower", (), (), (), dict(attrs), values)
                    x = bb.emit(follower_expr(op, x, self.layout))
                out = bb.emit_output(x)
            bb.emit_func_output(out)
        return bb.get()

    def _copies(self, bb: relax.BlockBuilder, params: list[relax.Var]) -> relax.Var:
        """A buffer of the last input's shape, with the other inputs (``params``) copied into it side by side, as
        an in-place concat copies the inputs no kernel writes (``search.in_place``)."""
        from search.in_place import copy_kernel, write_into

        stored = layout(self.layout)
        full, axis = stored.physical_shape(self.inputs[-1]), stored.stored_axis("C")
        buffer = bb.emit(relax.op.builtin.alloc_tensor(relax.ShapeExpr(full), stored.dtype, 0))
        start = 0
        for i, (param, shape) in enumerate(zip(params, self.inputs)):
            func = write_into(copy_kernel(stored.physical_shape(shape), stored.dtype), full, axis,
                              start // (stored.block() or 1))
            call = relax.call_tir_inplace(bb.add_func(func, f"copy{i}"), [param, buffer], 1,
                                          relax.TensorType(full, stored.dtype))
            buffer, start = bb.emit(call), start + shape[1]
        return buffer


Task = KernelTask | TransformTask | ChainTask
