"""Parametrised x86 kernel templates: conv2d (any NCHW / NHWC / NCHW{c}c pair), depthwise conv2d, dense and
batch_matmul.

Each module has ``supported_layouts``, ``knob_space``, ``pack_weight`` and ``build`` (a scheduled PrimFunc whose
arguments are ``data, weight, [bias], [residual], out`` in the spec's physical layouts); batch_matmul multiplies two
activations (``a, w, out``) and packs nothing. The operator kinds of ``search.kinds`` use them. ``workloads`` holds
the records a kernel is described by.
"""

from __future__ import annotations

from search.isa import AVX512, HOST
from search.templates.workloads import (
    BatchMatmulWorkload,
    Conv2DWorkload,
    DenseWorkload,
    Epilogue,
    KernelSpec,
    Knobs,
)

# Part of every cached timing's context. Bump it whenever a template's code (or search/lower.py's schedule of layout
# transforms) changes what it generates, or cost_models/timer.py changes how a kernel is timed, so timings taken the
# old way are no longer reused. 2: the timer stopped re-pinning the thread pool before every timing. 3: the templates
# are sized for the host's vector unit (search/isa.py); an AVX-512 host generates what version 2 did, so keeps it.
TEMPLATE_VERSION = "2" if HOST is AVX512 else "3"

__all__ = [
    "BatchMatmulWorkload",
    "Conv2DWorkload",
    "DenseWorkload",
    "Epilogue",
    "KernelSpec",
    "Knobs",
    "TEMPLATE_VERSION",
]
