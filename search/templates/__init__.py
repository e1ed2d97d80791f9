"""Parametrised x86 kernel templates: conv2d (any NCHW / NHWC / NCHW{c}c pair), depthwise conv2d and dense.

``build_kernel(spec, target)`` returns a scheduled PrimFunc whose arguments are
``data, weight, [bias], [residual], out`` in the spec's physical layouts; ``pack_weight`` / ``pack_bias`` re-lay out
numpy parameters for it once, ahead of time.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import tvm

from search.errors import SearchError
from search.isa import AVX512, HOST
from search.templates import conv2d, dense, depthwise
from search.templates.workloads import Conv2DWorkload, DenseWorkload, Epilogue, KernelSpec, Knobs

# Part of every cached timing's context. Bump it whenever a template's code (or search/lower.py's schedule of layout
# transforms) changes what it generates, or cost_models/timer.py changes how a kernel is timed, so timings taken the
# old way are no longer reused. 2: the timer stopped re-pinning the thread pool before every timing. 3: the templates
# are sized for the host's vector unit (search/isa.py); an AVX-512 host generates what version 2 did, so keeps it.
TEMPLATE_VERSION = "2" if HOST is AVX512 else "3"

__all__ = [
    "Conv2DWorkload",
    "DenseWorkload",
    "Epilogue",
    "KernelSpec",
    "Knobs",
    "TEMPLATE_VERSION",
    "build_kernel",
    "knob_space",
    "pack_bias",
    "pack_weight",
    "supported_layouts",
]


def _template(workload: Conv2DWorkload | DenseWorkload) -> ModuleType:
    if isinstance(workload, DenseWorkload):
        return dense
    if not isinstance(workload, Conv2DWorkload):
        raise SearchError(f"no template for workload {workload!r}")
    return depthwise if workload.is_depthwise else conv2d


def _checked(spec: KernelSpec) -> ModuleType:
    template = _template(spec.workload)
    if (spec.in_layout, spec.out_layout) not in template.supported_layouts(spec.workload):
        raise SearchError(
            f"no {template.__name__.rsplit('.', 1)[-1]} kernel for layouts {spec.in_layout} -> {spec.out_layout} "
            f"on {spec.workload}"
        )
    return template


def supported_layouts(workload: Conv2DWorkload | DenseWorkload) -> list[tuple[str, str]]:
    """The (in_layout, out_layout) pairs ``build_kernel`` accepts for ``workload``."""
    return _template(workload).supported_layouts(workload)


def knob_space(spec: KernelSpec, size: int | None = None) -> list[Knobs]:
    """Knob settings for ``spec``'s layouts (its own knobs are ignored), default first, at most ``size``."""
    return _checked(spec).knob_space(spec, size)


def build_kernel(spec: KernelSpec, target: tvm.target.Target) -> tvm.tirx.PrimFunc:
    """The scheduled PrimFunc ``out = act(op(data, weight) + bias + residual)``; SearchError if unsupported."""
    return _checked(spec).build(spec, target)


def pack_weight(spec: KernelSpec, weight: np.ndarray) -> np.ndarray:
    """Conv: OIHW, dense: (out, in) -> the layout ``build_kernel``'s weight argument expects."""
    return _checked(spec).pack_weight(spec, np.asarray(weight))


def pack_bias(spec: KernelSpec, bias: np.ndarray) -> np.ndarray:
    """(C,) -> the bias argument (every template reads a contiguous (C,) vector)."""
    _checked(spec)
    return np.ascontiguousarray(bias, dtype=spec.workload.dtype).reshape(-1)
