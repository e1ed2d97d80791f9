"""A toy operator kind written as a user would add one: ``sin`` of a 4-D activation as a template kernel in any
activation layout (input and output alike), with one knob. One class and ``@register``, nothing else in tessera.

Importing this module registers the kind (a worker process that unpickles a ``SinWorkload`` registers it too);
tests that need it registered only while they run use the ``toy_kind`` fixture of ``test_kinds``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tvm
from tvm import te

from search.bindings import Bindings
from search.kinds import KernelKind, Match, register
from search.layouts import candidate_layouts, layout
from search.relax_exprs import static_shape
from search.templates.common import finish, knob_product, resolve_knobs
from search.templates.workloads import Epilogue, KernelSpec


@dataclass(frozen=True)
class SinWorkload:
    shape: tuple[int, int, int, int]
    dtype: str = "float32"

    kind = "sin"


@register
class SinKind(KernelKind):
    name = "sin"
    absorbs = False  # one binding: no epilogue
    workload_type = SinWorkload
    examples = (SinWorkload((1, 8, 3, 5)),)
    epilogues = (Epilogue(bias=False),)

    def match(self, bindings: Bindings, index: int) -> Match | None:
        shape = static_shape(bindings.var(index))
        if bindings.op_name(index) != "relax.sin" or shape is None or len(shape) != 4:
            return None
        return Match((index,), tuple(bindings.activations(index)))

    def workload(self, op) -> SinWorkload:
        return SinWorkload(op.shape)

    def supported_layouts(self, workload):
        return [(name, name) for name in candidate_layouts(workload.shape[1])]

    def in_shape(self, workload):
        return workload.shape

    def out_shape(self, workload):
        return workload.shape

    def knob_space(self, spec: KernelSpec, size=None):
        return knob_product({"vector": [1, 0]}, size)

    def build(self, spec: KernelSpec, target):
        knobs = resolve_knobs(spec.knobs, {"vector": [1, 0]})
        shape = layout(spec.in_layout).physical_shape(spec.workload.shape)
        data = te.placeholder(shape, "float32", name="data")
        out = te.compute(shape, lambda *i: te.sin(data(*i)), name="out")
        sch = tvm.s_tir.Schedule(te.create_prim_func([data, out]))
        loops = sch.get_loops(sch.get_sblock("out"))
        sch.parallel(loops[0])
        if knobs["vector"]:
            sch.vectorize(loops[-1])
        return finish(sch)

    def pack(self, spec, params):
        return []

    def random_params(self, workload, epilogue, rng):
        return {}

    def reference(self, spec, inputs, params):
        return np.sin(inputs[0])
