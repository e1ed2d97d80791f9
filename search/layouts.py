"""Data layouts as values: ``Layout.parse("NCHW16c")`` once, then its blocks, shapes, numpy conversions and index maps.

A layout says how a tensor is stored, axis by axis, outermost first: an upper-case letter is a *primal* axis (``N``,
``C``, ``H``, ``W``), ``<size><letter>`` a block of ``size`` consecutive elements of that primal axis (``16c``), stored
inside the primal axis's remaining part. Activations are ``NCHW``, ``NHWC`` or ``NCHW{c}c``; the rows of a linear layer
(2-D, or 3-D viewed as (batch x tokens, features)) ``NC`` or ``CN{c}c`` (feature blocks outermost, each block of every
row contiguous). A layout stores fp32 values unless its name ends in ``.bf16`` (``NCHW16c.bf16``): bf16 values, as their
bit patterns (``search.bf16_bits``), which bf16 kernels read and write and conversions on the edges turn into fp32
(``search.conversions``). A tensor's *logical* shape lists its primal axes in canonical order (``N``, ``C``, ``D``,
``H``, ``W``, then any other letter in stored order): ``(n, c, h, w)`` for every activation layout, ``(rows, features)``
for every row layout. TVM-free; ``index_map`` imports TVM.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from search.bf16_bits import STORAGE, from_bf16_bits, to_bf16_bits
from search.errors import SearchError

BLOCK_SIZES = (4, 8, 16, 32, 64)
CANONICAL = "NCDHW"  # logical order of the primal axes that have one
ACTIVATION_AXES = {2: "NC", 4: "NCHW"}  # the logical axes of activations, by rank
_TOKEN = re.compile(r"([A-Z])|(\d+)([a-z])")
BF16 = "bf16"  # the suffix of a layout storing bf16 values
DTYPES = {"fp32": "float32", BF16: STORAGE}  # a layout's storage -> the dtype of its buffers


class LayoutError(SearchError):
    """An unknown layout, or one that does not fit a tensor."""


@dataclass(frozen=True)
class Layout:
    """A parsed layout: ``axes`` in stored order, each ``(letter, block)``: a primal axis ``("C", None)`` or a block
    of one ``("C", 16)``; ``storage`` the values' precision, ``fp32`` or ``bf16``."""

    name: str
    axes: tuple[tuple[str, int | None], ...]
    storage: str = "fp32"

    @staticmethod
    @functools.cache
    def parse(name: str) -> Layout:
        """The layout called ``name``; ``LayoutError`` unless every primal axis appears once, every block is a
        positive size of a primal axis that appears, and no axis has two blocks."""
        error = LayoutError(f"unknown layout {name!r}; expected e.g. NCHW, NHWC, NCHW16c, NC or NCHW16c.bf16")
        if not isinstance(name, str) or not name:
            raise error
        axes_name, dot, storage = name.partition(".")
        if not axes_name or (dot and storage != BF16):
            raise error
        axes, position = [], 0
        for match in _TOKEN.finditer(axes_name):
            if match.start() != position:
                raise error
            position = match.end()
            primal, size, letter = match.groups()
            axes.append((primal, None) if primal else (letter.upper(), int(size)))
        primals = [letter for letter, block in axes if block is None]
        blocks = [letter for letter, block in axes if block is not None]
        if (position != len(axes_name) or len(set(primals)) != len(primals) or len(set(blocks)) != len(blocks)
                or not set(blocks) <= set(primals) or any(block == 0 for _, block in axes)):
            raise error
        return Layout(name, tuple(axes), storage if dot else "fp32")

    def __str__(self) -> str:
        return self.name

    @property
    def dtype(self) -> str:
        """The dtype of a buffer in this layout: ``float32``, or ``uint16`` for bf16 bit patterns."""
        return DTYPES[self.storage]

    # ------------------------------------------------------------------------------------------------ structure
    @property
    def ndim(self) -> int:
        """Stored axes: 4 for NCHW and NHWC, 5 for NCHW16c."""
        return len(self.axes)

    @functools.cached_property
    def logical(self) -> str:
        """The primal axes in logical order: ``NCHW`` for every activation layout."""
        primals = [letter for letter, block in self.axes if block is None]
        known = [letter for letter in CANONICAL if letter in primals]
        return "".join(known + [letter for letter in primals if letter not in CANONICAL])

    def block(self, letter: str = "C") -> int | None:
        """The block size of primal axis ``letter`` (None when it is not blocked)."""
        return next((block for axis, block in self.axes if axis == letter and block is not None), None)

    def stored_axis(self, letter: str) -> int:
        """Position of primal axis ``letter`` (its outer part, when blocked) among the stored axes."""
        return self.axes.index((letter, None))

    # ------------------------------------------------------------------------------------------------ shapes
    def _extents(self, shape: Sequence[int]) -> dict[str, int]:
        if len(shape) != len(self.logical):
            raise LayoutError(f"layout {self.name} holds {len(self.logical)}-D tensors ({self.logical}), "
                              f"got shape {tuple(shape)}")
        return dict(zip(self.logical, (int(extent) for extent in shape)))

    def check(self, shape: Sequence[int]) -> None:
        """``LayoutError`` unless a tensor of logical ``shape`` can be stored in this layout (blocks divide)."""
        extents = self._extents(shape)
        for letter, block in self.axes:
            if block is not None and extents[letter] % block:
                what = "channels" if letter == "C" else f"axis {letter}"
                raise LayoutError(f"layout {self.name} needs {what} divisible by {block}, tensor has "
                                  f"{extents[letter]}")

    def fits(self, shape: Sequence[int]) -> bool:
        """Whether ``check(shape)`` passes."""
        try:
            self.check(shape)
        except LayoutError:
            return False
        return True

    def physical_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        """Stored shape of a tensor of logical ``shape``."""
        self.check(shape)
        extents = self._extents(shape)
        return tuple(block if block is not None else extents[letter] // (self.block(letter) or 1)
                     for letter, block in self.axes)

    def prefix_contiguous(self, shape: Sequence[int]) -> bool:
        """Whether the first channels of a tensor of logical ``shape`` (whole channel blocks) are the start of its
        memory: every stored axis outside the channels' outer one has extent 1 (batch 1 in NCHW and NCHW{c}c)."""
        outer = self.physical_shape(shape)[: self.stored_axis("C")]
        return all(extent == 1 for extent in outer)

    # ------------------------------------------------------------------------------------------------ numpy
    def _split(self, extents: dict[str, int]) -> tuple[list[int], list[tuple[str, int | None]]]:
        """The logical axes with every blocked one split into (outer, block): shape and axis names."""
        shape, names = [], []
        for letter in self.logical:
            block = self.block(letter)
            if block is None:
                shape.append(extents[letter])
                names.append((letter, None))
            else:
                shape += [extents[letter] // block, block]
                names += [(letter, None), (letter, block)]
        return shape, names

    def from_logical(self, array: np.ndarray) -> np.ndarray:
        """``array`` (logical shape) re-laid out into this layout (bf16: rounded, as bit patterns)."""
        self.check(array.shape)
        split, names = self._split(self._extents(array.shape))
        order = [names.index(axis) for axis in self.axes]
        stored = np.ascontiguousarray(array.reshape(split).transpose(order))
        return to_bf16_bits(stored) if self.storage == BF16 else stored

    def to_logical(self, array: np.ndarray) -> np.ndarray:
        """Inverse of ``from_logical``: a stored array back in logical shape (bf16: as float32 values)."""
        if array.ndim != self.ndim:
            raise LayoutError(f"layout {self.name} stores {self.ndim}-D arrays, got shape {array.shape}")
        extents = {letter: 1 for letter in self.logical}
        for (letter, _), extent in zip(self.axes, array.shape):
            extents[letter] *= int(extent)
        _, names = self._split(extents)
        stored = list(self.axes)
        logical = np.ascontiguousarray(array.transpose([stored.index(axis) for axis in names]))
        logical = from_bf16_bits(logical) if self.storage == BF16 else logical
        return logical.reshape([extents[letter] for letter in self.logical])

    # ------------------------------------------------------------------------------------------------ index maps
    def logical_coordinates(self) -> Callable[..., tuple]:
        """``(stored indices) -> (logical indices)``; works on ints and TVM expressions alike."""
        blocks = {letter: block for letter, block in self.axes if block is not None}
        position = {axis: i for i, axis in enumerate(self.axes)}

        def coordinates(*idx):
            out = []
            for letter in self.logical:
                outer = idx[position[(letter, None)]]
                out.append(outer * blocks[letter] + idx[position[(letter, blocks[letter])]] if letter in blocks
                           else outer)
            return tuple(out)

        return coordinates

    def stored_coordinates(self) -> Callable[..., tuple]:
        """``(logical indices) -> (stored indices)``; works on ints and TVM expressions alike."""
        logical = self.logical

        def coordinates(*idx):
            value = dict(zip(logical, idx))
            blocks = {letter: block for letter, block in self.axes if block is not None}
            return tuple(value[letter] % block if block is not None
                         else value[letter] // blocks[letter] if letter in blocks else value[letter]
                         for letter, block in self.axes)

        return coordinates

    def index_map(self, dst: Layout):
        """A ``tvm.tirx.IndexMap`` from this layout's stored axes to ``dst``'s, for ``relax.op.layout_transform``."""
        from tvm.tirx import IndexMap

        if dst.logical != self.logical:
            raise LayoutError(f"no index map from {self.name} to {dst.name}: different axes")
        to_logical, to_dst = self.logical_coordinates(), dst.stored_coordinates()
        return IndexMap.from_func(lambda *axes: to_dst(*to_logical(*axes)), ndim=self.ndim)


def layout(name: str | Layout) -> Layout:
    """``name`` parsed (a ``Layout`` passes through)."""
    return name if isinstance(name, Layout) else Layout.parse(name)


def storage_of(name: str) -> str:
    """What layout ``name`` stores, ``fp32`` or ``bf16``, from its name alone (any kernel's layout name, a
    layout-free kernel's view included)."""
    return BF16 if name.endswith(f".{BF16}") else "fp32"


def stored_as(name: str, storage: str) -> str:
    """The layout with ``name``'s axes storing ``storage`` (``fp32`` or ``bf16``) values: ``NCHW16c`` <->
    ``NCHW16c.bf16``."""
    axes = name.partition(".")[0]
    return axes if storage == "fp32" else layout(f"{axes}.{storage}").name


def activation_shape(shape: Sequence[int]) -> tuple[int, ...] | None:
    """The logical shape a value of ``shape`` has as an activation: a 4-D one as is, a 2-D one as is, a 3-D one
    (batch, tokens, features) as the rows of a linear layer (batch x tokens, features); None for other ranks."""
    shape = tuple(int(extent) for extent in shape)
    if len(shape) == 3:
        return (shape[0] * shape[1], shape[2])
    return shape if len(shape) in ACTIVATION_AXES else None


def fixed_layout(shape: Sequence[int]) -> str:
    """The layout fixed ops, model inputs and outputs store an activation of ``shape`` in: NCHW (4-D) or NC."""
    return "NCHW" if len(shape) == 4 else "NC"


def activation_layout(name: str, shape: Sequence[int]) -> Layout:
    """``name`` parsed and checked to store an activation of ``shape`` (``NC`` / ``NCHW`` axes, blocks dividing; a
    3-D shape as ``activation_shape`` views it); ``LayoutError`` naming what is wrong otherwise."""
    parsed = layout(name)
    logical = activation_shape(shape)
    axes = ACTIVATION_AXES.get(len(logical)) if logical is not None else None
    if parsed.logical != axes:
        raise LayoutError(f"unknown layout {name!r} for a {len(shape)}-D activation: its axes are {parsed.logical}, "
                          f"not {axes}")
    parsed.check(logical)
    return parsed


def row_layouts(blocks: Sequence[int] = BLOCK_SIZES) -> list[str]:
    """The layouts of a linear layer's rows: NC, and CN{c}c for c in ``blocks``."""
    return ["NC"] + [f"CN{c}c" for c in blocks]


def searchable_layouts() -> list[str]:
    """Every layout the built-in kinds can run: NCHW, NHWC and NCHW{c}c for c in ``BLOCK_SIZES``, and the row
    layouts."""
    return ["NCHW", "NHWC"] + [f"NCHW{c}c" for c in BLOCK_SIZES] + row_layouts()


def candidate_layouts(channels: int, blocks: Sequence[int] = BLOCK_SIZES) -> list[str]:
    """NCHW, NHWC and every NCHW{c}c whose block divides ``channels``."""
    return ["NCHW", "NHWC"] + [f"NCHW{c}c" for c in blocks if channels % c == 0]


def nearest_layout(name: str, *channels: int) -> str:
    """``name`` if its channel block divides every channel count; else the largest smaller block dividing them all;
    else NCHW."""
    block = layout(name).block()
    if block is None:
        return name
    fitting = [b for b in BLOCK_SIZES if b <= block and all(c % b == 0 for c in channels)]
    return f"NCHW{max(fitting)}c" if fitting else "NCHW"


def view_block(name: str, channels: int) -> int:
    """The channel block of an activation layout's *blocked view* ``(n, C // b, h, w, b)``, on which the kernel
    templates compute: the layout's block, 1 for NCHW, ``channels`` for NHWC."""
    parsed = layout(name)
    if parsed.block() is not None:
        return parsed.block()
    return channels if parsed.axes[-1] == ("C", None) else 1
