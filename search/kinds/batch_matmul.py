"""The ``batch_matmul`` kind: a matmul of two activations (attention's scores and context), run by the template in
``search.templates.batch_matmul`` on their logical 3-D view."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tvm import relax

from search.bindings import Bindings
from search.kinds.base import Match, TemplateKind
from search.kinds.features import Extents, tiled_kernel_features
from search.kinds.registry import register
from search.relax_exprs import static_shape
from search.templates import batch_matmul as template
from search.templates.workloads import BatchMatmulWorkload, Epilogue, KernelSpec


@register
class BatchMatmulKind(TemplateKind):
    """``a @ w`` with a (..., m, k) and w (..., k, n) both activations of rank >= 3 and equal leading dimensions (no
    broadcasting). The kernel runs on the leading dimensions flattened into one batch axis (a transformer's batch x
    heads) and export reshapes around it for free. It absorbs no epilogue, and its tensors take no part in layout
    decisions (``layout_free``): its one layout pair names the row-major 3-D view. Its cost-model features are a dense
    layer's on the flattened (batch x m, k) rows, the second operand counted as one (k, n) weight."""

    name = "batch_matmul"
    template = template
    absorbs = False
    layout_free = True
    workload_type = BatchMatmulWorkload
    epilogues = (Epilogue(bias=False),)
    examples = (BatchMatmulWorkload(3, 7, 5, 9), BatchMatmulWorkload(2, 8, 16, 32))

    def match(self, bindings: Bindings, index: int) -> Match | None:
        if bindings.op_name(index) != "relax.matmul":
            return None
        a, w = bindings.value(index).args
        if not all(isinstance(x, relax.Var) and bindings.const(x) is None for x in (a, w)):
            return None
        a_shape, w_shape = static_shape(a), static_shape(w)
        if a_shape is None or w_shape is None or len(a_shape) < 3 or len(w_shape) != len(a_shape):
            return None
        if a_shape[:-2] != w_shape[:-2] or a_shape[-1] != w_shape[-2]:
            return None
        return Match((index,), (a, w))

    def baseline(self, op, name: str) -> tuple[str, str]:
        return template.LAYOUT, template.LAYOUT

    def workload(self, op) -> BatchMatmulWorkload:
        (*batch, m, k), n = op.input_shapes[0], op.shape[-1]
        return BatchMatmulWorkload(int(np.prod(batch)), m, k, n)

    def in_shape(self, workload: BatchMatmulWorkload) -> tuple[int, ...]:
        return (workload.batch, workload.m, workload.k)

    def out_shape(self, workload: BatchMatmulWorkload) -> tuple[int, ...]:
        return (workload.batch, workload.m, workload.n)

    def activations(self, spec: KernelSpec) -> tuple[tuple[str, tuple[int, ...]], ...]:
        wl = spec.workload
        return ("in", self.in_shape(wl)), ("in", (wl.batch, wl.k, wl.n))

    def pack(self, spec: KernelSpec, params: dict[str, np.ndarray]) -> list[np.ndarray]:
        return []

    def random_params(self, workload: BatchMatmulWorkload, epilogue: Epilogue, rng: np.random.Generator
                      ) -> dict[str, np.ndarray]:
        return {}

    def reference(self, spec: KernelSpec, inputs: Sequence[np.ndarray], params: dict[str, np.ndarray]
                  ) -> np.ndarray:
        a, w = inputs
        return a @ w

    def features(self, spec: KernelSpec) -> dict[str, float]:
        wl = spec.workload
        extents = Extents(wl.batch * wl.m, wl.k, 1, 1, wl.n, 1, 1)
        return tiled_kernel_features(spec, extents, wl.k, dict(spec.knobs).get("n_bn", 1), layouts=False)
