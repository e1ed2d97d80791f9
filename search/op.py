"""One operator of the graph tessera searches over (``search.graph``): tunable, follower or fixed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

INPUT_DTYPES = ("float32", "int32", "int64")
"""The dtypes a graph's inputs may have: float32 data, integer indices into tables (token ids)."""


@dataclass(frozen=True, eq=False)
class Op:
    """One operator of the graph.

    Attributes
    ----------
    name : str
        Stable name, ``<kind>_<index>`` (e.g. ``conv2d_3``); plans refer to tunable ops by it.
    kind : str
        For a tunable op the name of its kind (``conv2d``, ``concat``, ...); a follower's (``relu``, ``clip``,
        ``sigmoid``, ``channel_scale``, ``channel_shift``, the poolings); for a fixed op the Relax name of its
        operator (``reshape``, ``nn.softmax``, ``concat`` of 2-D tensors, ``call_tir``, ...), ``tuple`` or
        ``tuple_item``.
    role : str
        ``tunable`` (a registered kind), ``follower`` or ``fixed``.
    inputs : tuple of str
        Names of the values read: other ops or model inputs. A conv's residual is its second input.
    input_shapes : tuple of tuple of int
        Logical (NCHW / NC) shapes of the inputs (``()`` for a tuple).
    shape : tuple of int
        Logical shape of the output (``()`` for a tuple).
    attrs : dict
        Operator attributes (conv: strides, padding, dilation, groups, kernel, bias, residual, activation; pools: the
        Relax pool attributes; clip: min, max).
    params : dict of str to numpy.ndarray
        Constant operands: ``weight`` (OIHW for convs, (out, in) for dense) and ``bias`` ((C,)) when fused;
        ``value`` ((C,)) of channel_scale / channel_shift.
    input_sides : tuple of str
        For a tunable op, which of its layouts each input must arrive in: ``in``, or ``out`` for a residual.
    layout_free : bool
        A tunable op of a ``layout_free`` kind (``batch_matmul``): its tensors are logical arrays, read and written as
        a fixed op's are, whatever their rank.
    bindings : tuple of str
        Names of the Relax bindings this op replaces (for messages).
    call : relax.Expr or None
        The original expression of a fixed op (a call, a tuple or a tuple item), re-emitted as is at export.
    """

    name: str
    kind: str
    role: str
    inputs: tuple[str, ...]
    input_shapes: tuple[tuple[int, ...], ...]
    shape: tuple[int, ...]
    attrs: dict[str, Any] = field(default_factory=dict)
    params: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    input_sides: tuple[str, ...] = ()
    layout_free: bool = False
    bindings: tuple[str, ...] = ()
    call: Any = field(default=None, repr=False)
