"""Input shapes a user binds a network's inputs to: ``1,3,640,640`` (the only input) or ``NAME=1,3,640,640``.

``input_shapes(value)`` turns what the command line (``--input-shape``, repeatable), an experiment file
(``input_shape``) or a plan's ``args`` hold into a tuple of ``InputShape``; ``str`` of each gives the text back,
so plans record what reloads the same shapes.

>>> [str(s) for s in input_shapes(["x=1,3,48,320", "mask=1,1,48,320"])]
['x=1,3,48,320', 'mask=1,1,48,320']
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from search.errors import SearchError

_FORM = "give D0,D1,... or NAME=D0,D1,... with positive integers, e.g. 1,3,640,640"

MAX_INPUT_ELEMENTS = 2**26
"""The most elements of one model input (256 MiB of float32): a larger input is refused before any network is built,
since its activations would exhaust memory or overflow TVM's 32-bit tensor indices."""


def check_input_size(dims: tuple[int, ...], what: str) -> None:
    """Raise ``SearchError`` naming ``what`` when an input of shape ``dims`` has more than ``MAX_INPUT_ELEMENTS``."""
    elements = math.prod(dims)
    if elements > MAX_INPUT_ELEMENTS:
        raise SearchError(f"{what} has {elements:,} elements, more than the {MAX_INPUT_ELEMENTS:,} (256 MiB of "
                          "float32) tessera takes per input")


@dataclass(frozen=True)
class InputShape:
    """The dimensions of one model input: the input named ``name``, or the only input when ``name`` is None."""

    name: str | None
    dims: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> InputShape:
        """``"1,3,640,640"`` or ``"x=1,3,640,640"``; ``SearchError`` naming the text otherwise."""
        if not isinstance(text, str):
            raise SearchError(f"input shape {text!r} is not a string; {_FORM}")
        name, sep, dims = text.strip().rpartition("=")
        name = name.strip()
        if sep and not name:
            raise SearchError(f"input shape {text!r} has an empty input name; {_FORM}")
        try:
            values = tuple(int(d) for d in dims.split(","))
        except ValueError:
            raise SearchError(f"input shape {text!r} is not a list of dimensions; {_FORM}") from None
        if not all(v > 0 for v in values):
            raise SearchError(f"input shape {text!r} has a dimension below 1; {_FORM}")
        check_input_size(values, f"input shape {text!r}")
        return cls(name or None, values)

    def __str__(self) -> str:
        dims = ",".join(str(d) for d in self.dims)
        return dims if self.name is None else f"{self.name}={dims}"


ShapesLike = str | InputShape | Sequence[str | InputShape] | None
"""What ``input_shapes`` takes: one shape (text or ``InputShape``), several, or None."""


def input_shapes(value: ShapesLike) -> tuple[InputShape, ...]:
    """``value`` (one shape, several, or None for none) as ``InputShape``s.

    Raises
    ------
    SearchError
        A malformed shape, an input named twice, or an unnamed shape beside others.
    """
    if value is None:
        return ()
    items = [value] if isinstance(value, str | InputShape) else list(value)
    shapes = tuple(item if isinstance(item, InputShape) else InputShape.parse(item) for item in items)
    names = [s.name for s in shapes]
    if None in names and len(shapes) > 1:
        raise SearchError(f"input shapes {', '.join(map(str, shapes))}: an unnamed shape binds the only input; "
                          "with several, name each one (NAME=D0,D1,...)")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SearchError(f"input shapes {', '.join(map(str, shapes))}: input {twice[0]!r} is given twice")
    return shapes
