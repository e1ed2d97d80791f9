"""Precision as an axis of the candidate space: a kernel computes in fp32, in bfloat16 (bf16 data and weights, fp32
accumulation and output) or in int8 (unsigned 8-bit data, signed 8-bit weights, int32 sums, fp32 output).

A bf16 candidate carries the knob ``bf16`` with the instructions it runs on: ``AMX`` (AMX-BF16 tiles) or ``DOT``
(AVX-512 BF16 dot products); an int8 one the knob ``int8`` (AMX-INT8 tiles or AVX-512 VNNI dot products); without
either a candidate is fp32, so fp32 names and cache keys are what they were. What a search may use is a
``PRECISIONS`` choice: ``fp32``, ``bf16`` or ``int8`` (every operator whose kind has such a kernel) or ``auto`` (any,
per operator). An int8 kernel needs the range of its input on calibration inputs (``search.activation_ranges``), so
only calibrated operators have int8 candidates. A host without the instructions offers no such settings: ``auto``
leaves them out there and ``bf16`` or ``int8`` is refused (``check_precision``).
"""

from __future__ import annotations

from collections.abc import Iterable

from search.errors import SearchError
from search.host import host
from search.templates.workloads import Knobs

KNOB = "bf16"
AMX, DOT = 1, 2
INSTRUCTIONS = {AMX: "amx_bf16", DOT: "avx512_bf16"}
"""The CPU flag each bf16 setting needs."""
INT8_KNOB = "int8"
INT8_INSTRUCTIONS = {AMX: "amx_int8", DOT: "avx512_vnni"}
"""The CPU flag each int8 setting (knob ``int8``: unsigned 8-bit data, signed 8-bit weights, int32 sums) needs."""
PRECISIONS = ("fp32", "bf16", "int8", "auto")
REDUCED = ("bf16", "int8")
"""The precisions below fp32, most accurate first."""
TOLERANCE = 2e-2
"""A bf16 kernel's relative error against its float64 reference (bf16 keeps 8 significant bits: 2**-9 per rounded
operand, sums of thousands of products in fp32)."""
INT8_TOLERANCE = 5e-2
"""An int8 kernel's relative error against its float64 reference on data spanning its quantisation's range (255 steps
of the data, 127 of each output channel's weights, exact integer sums)."""
DEFAULT_MAX_ERROR = 2e-2
"""A search's error budget when none is given: a plan's largest relative output error against the fp32 build."""


def check_max_error(max_error: object) -> float | None:
    """``max_error`` (None, or a positive finite number: a plan's largest relative output error against the fp32
    build) as a float; SearchError otherwise."""
    if max_error is None:
        return None
    if isinstance(max_error, bool) or not isinstance(max_error, (int, float)) or not 0 < max_error < float("inf"):
        raise SearchError(f"max error must be a positive number (relative to the fp32 output), got {max_error!r}")
    return float(max_error)


def precision_of(knobs: Knobs) -> str:
    """``"bf16"`` or ``"int8"`` for a setting with that knob, else ``"fp32"``."""
    knobs = dict(knobs)
    return "bf16" if knobs.get(KNOB) else "int8" if knobs.get(INT8_KNOB) else "fp32"


def bf16_settings(features: Iterable[str] | None = None) -> list[Knobs]:
    """The bf16 settings a CPU with ``features`` (default: this host's) runs, AMX first."""
    have = host().features if features is None else set(features)
    return [((KNOB, unit),) for unit, flag in INSTRUCTIONS.items() if flag in have]


def int8_settings(features: Iterable[str] | None = None) -> list[Knobs]:
    """The int8 settings a CPU with ``features`` (default: this host's) runs, AMX first."""
    have = host().features if features is None else set(features)
    return [((INT8_KNOB, unit),) for unit, flag in INT8_INSTRUCTIONS.items() if flag in have]


def check_precision(precision: str, features: Iterable[str] | None = None) -> str:
    """``precision`` if it is one of ``PRECISIONS`` and the CPU (default: this host) can run it; SearchError naming
    the missing instruction sets otherwise."""
    if precision not in PRECISIONS:
        raise SearchError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision == "bf16" and not bf16_settings(features):
        raise SearchError(f"precision bf16 needs {' or '.join(INSTRUCTIONS.values())}, which this CPU "
                          f"({host().cpu}) does not have")
    if precision == "int8" and not int8_settings(features):
        raise SearchError(f"precision int8 needs {' or '.join(INT8_INSTRUCTIONS.values())}, which this CPU "
                          f"({host().cpu}) does not have")
    return precision


def by_precision(space: list[Knobs], precision: str, size: int | None = None) -> list[Knobs]:
    """The settings of a knob space a search with ``precision`` uses: ``fp32`` its first ``size`` fp32 settings,
    ``bf16`` (``int8``) the first bf16 (int8) setting of each algorithm (settings that differ in more than the
    precision's knob: direct and Winograd), on the host's fastest instructions (its fp32 ones where it has none),
    ``auto`` all of these. The other such settings (dot products on a host with AMX) stay valid settings of a
    plan."""
    fp32 = [knobs for knobs in space if precision_of(knobs) == "fp32"][:size]
    firsts = {name: _first_of_each_algorithm([knobs for knobs in space if precision_of(knobs) == name])
              for name in REDUCED}
    if precision == "fp32":
        return fp32
    if precision in firsts:
        return firsts[precision] or fp32
    return [*fp32, *firsts["bf16"], *firsts["int8"]]


def _first_of_each_algorithm(settings: list[Knobs]) -> list[Knobs]:
    seen, firsts = set(), []
    for knobs in settings:
        algorithm = tuple(item for item in knobs if item[0] not in (KNOB, INT8_KNOB))
        if algorithm not in seen:
            seen.add(algorithm)
            firsts.append(knobs)
    return firsts
