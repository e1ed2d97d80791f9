"""Activation layouts: NCHW, NHWC and NCHW{c}c, their physical shapes, numpy conversions and TVM index maps.

Every activation has a logical NCHW shape ``(n, c, h, w)``; a layout says how it is stored:
``NCHW`` as is, ``NHWC`` channels last, ``NCHW{c}c`` as ``(n, C // c, h, w, c)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from search.errors import SearchError

BLOCK_SIZES = (4, 8, 16, 32, 64)
_BLOCKED = re.compile(r"NCHW(\d+)c")


class LayoutError(SearchError):
    """An unknown layout, or one that does not fit a tensor."""


def block_size(layout: str) -> int | None:
    """The channel block of ``NCHW{c}c`` (None for NCHW and NHWC); raises for unknown layouts."""
    if layout in ("NCHW", "NHWC"):
        return None
    match = _BLOCKED.fullmatch(layout)
    if not match or int(match.group(1)) < 1:
        raise LayoutError(f"unknown layout {layout!r}; expected NCHW, NHWC or NCHW<c>c")
    return int(match.group(1))


def check_layout(layout: str, channels: int) -> None:
    """Raise ``LayoutError`` unless ``layout`` can hold ``channels`` channels."""
    c = block_size(layout)
    if c is not None and channels % c:
        raise LayoutError(f"layout {layout} needs channels divisible by {c}, tensor has {channels}")


def candidate_layouts(channels: int, blocks: Sequence[int] = BLOCK_SIZES) -> list[str]:
    """NCHW, NHWC and every NCHW{c}c whose block divides ``channels``."""
    return ["NCHW", "NHWC"] + [f"NCHW{c}c" for c in blocks if channels % c == 0]


def physical_shape(shape: Sequence[int], layout: str) -> tuple[int, ...]:
    """Stored shape of a tensor with logical NCHW ``shape`` in ``layout``."""
    n, c, h, w = shape
    check_layout(layout, c)
    block = block_size(layout)
    if layout == "NCHW":
        return (n, c, h, w)
    if layout == "NHWC":
        return (n, h, w, c)
    return (n, c // block, h, w, block)


def from_nchw(array: np.ndarray, layout: str) -> np.ndarray:
    """Re-lay out a logical NCHW numpy array into ``layout``."""
    n, c, h, w = array.shape
    check_layout(layout, c)
    if layout == "NCHW":
        return np.ascontiguousarray(array)
    if layout == "NHWC":
        return np.ascontiguousarray(array.transpose(0, 2, 3, 1))
    block = block_size(layout)
    return np.ascontiguousarray(array.reshape(n, c // block, block, h, w).transpose(0, 1, 3, 4, 2))


def to_nchw(array: np.ndarray, layout: str) -> np.ndarray:
    """Inverse of ``from_nchw``."""
    if layout == "NCHW":
        return np.ascontiguousarray(array)
    if layout == "NHWC":
        return np.ascontiguousarray(array.transpose(0, 3, 1, 2))
    block_size(layout)
    n, cb, h, w, block = array.shape
    return np.ascontiguousarray(array.transpose(0, 1, 4, 2, 3).reshape(n, cb * block, h, w))


def _to_logical(layout: str) -> Callable[..., tuple]:
    if layout == "NCHW":
        return lambda n, c, h, w: (n, c, h, w)
    if layout == "NHWC":
        return lambda n, h, w, c: (n, c, h, w)
    block = block_size(layout)
    return lambda n, cb, h, w, ci: (n, cb * block + ci, h, w)


def _from_logical(layout: str) -> Callable[..., tuple]:
    if layout == "NCHW":
        return lambda n, c, h, w: (n, c, h, w)
    if layout == "NHWC":
        return lambda n, c, h, w: (n, h, w, c)
    block = block_size(layout)
    return lambda n, c, h, w: (n, c // block, h, w, c % block)


def ndim(layout: str) -> int:
    """Number of stored axes: 4, or 5 for NCHW{c}c."""
    return 4 if block_size(layout) is None else 5


def index_map(src: str, dst: str):
    """A ``tvm.tirx.IndexMap`` from ``src``'s stored axes to ``dst``'s, for ``relax.op.layout_transform``."""
    from tvm.tirx import IndexMap

    to_logical, from_logical = _to_logical(src), _from_logical(dst)
    return IndexMap.from_func(lambda *axes: from_logical(*to_logical(*axes)), ndim=ndim(src))
