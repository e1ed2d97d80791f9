"""The bounds on a generated problem's size, checked before its arrays are allocated."""

from __future__ import annotations

from typing import Any

import numpy as np

from solvers.problem import ProblemError

MAX_NODES = 100_000
"""The most nodes (``nodes``, or layers in all ``blocks``) a generator builds."""
MAX_CANDIDATES = 1_000
"""The most candidates per tunable operator."""
MAX_ENTRIES = 10**7
"""The most cost entries (node costs and edge matrix entries; about 80 MB as floats) in a generated problem: a
request for more is refused before its arrays are allocated."""


def check_sizes(*, seed: Any, blocks: Any = (1,), **counts: Any) -> None:
    """Raise ``ProblemError`` unless every count is a positive integer (``nodes`` at most ``MAX_NODES``,
    ``candidates`` at most ``MAX_CANDIDATES``), ``seed`` a non-negative one and ``blocks`` a non-empty sequence of
    positive integers (at most ``MAX_NODES`` in all)."""
    limits = {"nodes": MAX_NODES, "candidates": MAX_CANDIDATES}
    for what, value in counts.items():
        if not _is_int(value) or value < 1:
            raise ProblemError(f"{what} must be a positive integer, got {value!r}")
        if value > limits.get(what, value):
            raise ProblemError(f"{what} must be at most {limits[what]:,}, got {value:,}")
    if not _is_int(seed) or seed < 0:
        raise ProblemError(f"seed must be a non-negative integer, got {seed!r}")
    if not blocks or not all(_is_int(n) and n >= 1 for n in blocks):
        raise ProblemError(f"blocks must be a non-empty sequence of positive integers, got {blocks!r}")
    if sum(blocks) > MAX_NODES:
        raise ProblemError(f"blocks must hold at most {MAX_NODES:,} layers in all, got {sum(blocks):,}")


def check_entries(generator: str, entries: int) -> None:
    """Raise ``ProblemError`` when a problem of ``generator`` would hold more than ``MAX_ENTRIES`` cost entries."""
    if entries > MAX_ENTRIES:
        raise ProblemError(f"{generator}: the problem would hold {entries:,} cost entries or more, above the limit "
                           f"of {MAX_ENTRIES:,}; ask for fewer nodes or candidates")


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)
