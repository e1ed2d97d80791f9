"""Operator kinds: one class per kind of tunable operator behind one interface (``base``), registered by name.

Built in: ``conv2d``, ``depthwise_conv2d``, ``dense``, ``batch_matmul``, ``softmax`` and ``layer_norm`` (kernel
kinds, with templates), ``concat``, ``add``, ``channel_slice`` and ``channel_gate`` (layout kinds). A new kind is one
class and ``@register`` (a ``TemplateKind`` takes its layouts, knobs and PrimFunc from one template module);
``check_kind`` checks it.
"""

# they register themselves
from search.kinds import (  # noqa: F401
    add,
    batch_matmul,
    channel_gate,
    channel_slice,
    concat,
    conv2d,
    dense,
    depthwise,
    rows,
)
from search.kinds.base import IN_PLACE, KernelKind, LayoutKind, Match, OperatorKind, TemplateKind
from search.kinds.checks import check_kernel, check_kind, kind_checks
from search.kinds.registry import KINDS, get_kind, kernel_kind, register

__all__ = [
    "IN_PLACE",
    "KINDS",
    "KernelKind",
    "LayoutKind",
    "Match",
    "OperatorKind",
    "TemplateKind",
    "check_kernel",
    "check_kind",
    "get_kind",
    "kernel_kind",
    "kind_checks",
    "register",
]
