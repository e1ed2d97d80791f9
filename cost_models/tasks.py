"""What the cost layer measures: a template kernel or a layout transform, each with a canonical cache key and the
PrimFunc that gets timed for it.

The key holds only what determines the timing (kind, workload, layouts, knobs, epilogue), never where the task came
from, so the same workload on two nodes or in two models is measured once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import tvm
from tvm import relax

from cost_models.cache import CostRecord, canonical
from search.errors import SearchError
from search.layouts import check_layout, index_map, physical_shape
from search.lower import schedule_legalised
from search.templates import Conv2DWorkload, KernelSpec, build_kernel

TRANSFORM_DTYPE = "float32"
FREE = CostRecord(0.0, 0.0, 0)  # the cost of a transform between identical layouts, which is never measured


def kernel_kind(spec: KernelSpec) -> str:
    """``conv2d``, ``depthwise_conv2d`` or ``dense``."""
    if not isinstance(spec.workload, Conv2DWorkload):
        return "dense"
    return "depthwise_conv2d" if spec.workload.is_depthwise else "conv2d"


@dataclass(frozen=True)
class KernelTask:
    """Time the template kernel ``build_kernel(spec, target)`` on random arguments."""

    spec: KernelSpec

    @property
    def free(self) -> bool:
        return False

    @property
    def key(self) -> str:
        spec = self.spec
        return canonical(
            {
                "kind": kernel_kind(spec),
                "workload": asdict(spec.workload),
                "in_layout": spec.in_layout,
                "out_layout": spec.out_layout,
                "knobs": [list(pair) for pair in spec.knobs],
                "epilogue": asdict(spec.epilogue),
            }
        )

    def primfunc(self, target: tvm.target.Target) -> tvm.tirx.PrimFunc:
        return build_kernel(self.spec, target)


@dataclass(frozen=True)
class TransformTask:
    """Time re-laying out a float32 activation of logical NCHW ``shape`` from ``src`` to ``dst``, as export runs it.

    Export emits ``R.layout_transform`` and ``search.lower`` legalises and schedules it; ``primfunc`` does the same
    to a one-op module. A transform between identical layouts is ``free``: it costs 0 and is never measured.
    """

    shape: tuple[int, int, int, int]
    src: str
    dst: str

    def __post_init__(self) -> None:
        shape = tuple(int(extent) for extent in self.shape)
        if len(shape) != 4:
            raise SearchError(f"a layout transform needs a logical NCHW shape, got {self.shape}")
        object.__setattr__(self, "shape", shape)
        check_layout(self.src, shape[1])
        check_layout(self.dst, shape[1])

    @property
    def free(self) -> bool:
        return self.src == self.dst

    @property
    def key(self) -> str:
        return canonical(
            {"kind": "layout_transform", "shape": list(self.shape), "src": self.src, "dst": self.dst,
             "dtype": TRANSFORM_DTYPE}
        )

    def primfunc(self, target: tvm.target.Target) -> tvm.tirx.PrimFunc:
        """The legalised, scheduled transform (legalisation does not depend on ``target``)."""
        data = relax.Var("data", relax.TensorType(physical_shape(self.shape, self.src), TRANSFORM_DTYPE))
        bb = relax.BlockBuilder()
        with bb.function("main", [data]):
            out = bb.emit(relax.op.layout_transform(data, index_map=index_map(self.src, self.dst)))
            bb.emit_func_output(out)
        lowered = schedule_legalised(bb.get())
        (func,) = [f for f in lowered.functions.values() if isinstance(f, tvm.tirx.PrimFunc)]
        return func


Task = KernelTask | TransformTask
