"""The int8 side of the dot-product templates (``search.templates.dot``): unsigned 8-bit data, signed 8-bit weights
and int32 sums, on AMX-INT8 tiles (``tdpbusd``) or AVX-512 VNNI dot products (``vpdpbusd``).

Quantisation, as a kernel applies it:

- data: one ``Quantisation`` per tensor, from the range its values take on calibration inputs (``quantisation``):
  ``q = clamp(round(x / scale) + zero, 0, 255)``, rounded to nearest even in fp32 (``quantised``: multiplied by
  ``1 / scale``); the padding is ``zero``, so that a zero of the input is a zero of the sum;
- weights: per output channel, symmetric, ``q = round(w / s)`` with ``s = max |w| / 127`` (``quantised_weights``); an
  activation in the weights' place (a batched matmul's second operand) per tensor, from its range (``signed_scale``);
- sums: ``out = act(scale x s[o] x (sum - zero x sum_k q_w[o, k]) + bias[o] + residual)``, the first factor the
  kernel's per-channel ``scale`` and the correction folded into its bias (``constants``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tvm

from search.errors import SearchError
from search.precision import AMX, DOT, INT8_KNOB
from search.templates import dot
from search.templates.workloads import Knobs

VERSION = 1
"""Part of an int8 kernel's cache key: bump it whenever these kernels change what they generate."""
RANGE = "input_range"
"""The parameter of an int8 node holding its inputs' ranges on calibration inputs: (low, high) of each input it
quantises, in order (``KernelKind.int8_inputs``)."""
INT8 = dot.DotProduct(
    INT8_KNOB, "uint8", "int8", "int32",
    {AMX: "tessera_int8_conv_row_amx", DOT: "tessera_int8_conv_row_dot"},
    {AMX: "tessera_int8_conv_rows_amx", DOT: "tessera_int8_conv_rows_dot"})


def is_int8(knobs: Knobs) -> bool:
    return INT8_KNOB in dict(knobs)


def settings_on_any_cpu() -> list[Knobs]:
    """Every int8 setting, whether or not this CPU runs it (AMX first)."""
    return [((INT8_KNOB, value),) for value in INT8.functions]


@dataclass(frozen=True)
class Quantisation:
    """How a tensor's fp32 values map to unsigned 8 bits: ``q = round(x / scale) + zero``."""

    scale: float
    zero: int


def quantisation(low: float, high: float) -> Quantisation:
    """The quantisation of values in ``[low, high]`` (widened to hold 0): 255 steps over the range, ``zero`` the
    step of 0 (0 when no value is negative)."""
    if not (np.isfinite(low) and np.isfinite(high)) or low > high:
        raise SearchError(f"an activation range must be finite with low <= high, got [{low}, {high}]")
    low, high = min(float(low), 0.0), max(float(high), 0.0)
    scale = float(np.float32((high - low) / 255)) if high > low else 1.0
    return Quantisation(scale, int(np.clip(np.rint(-low / scale), 0, 255)))


def input_ranges(params: dict[str, np.ndarray], count: int = 1) -> list[tuple[float, float]]:
    """The ranges of an int8 node's first ``count`` inputs (``params[RANGE]``); SearchError without them."""
    values = [float(v) for v in np.asarray(params.get(RANGE, ()), np.float64).reshape(-1)]
    if len(values) < 2 * count:
        raise SearchError(f"an int8 kernel needs the range of each of its {count} quantised input(s) ({RANGE}) from "
                          f"calibration, got {values}")
    return [(values[2 * i], values[2 * i + 1]) for i in range(count)]


def input_quantisation(params: dict[str, np.ndarray]) -> Quantisation:
    """The quantisation of an int8 node's (first) input from its recorded range (``params[RANGE]``)."""
    return quantisation(*input_ranges(params)[0])


def signed_scale(low: float, high: float) -> float:
    """The scale of values in ``[low, high]`` quantised to signed bytes, symmetric: ``max(|low|, |high|) / 127``
    (1 for a range of zeros)."""
    quantisation(low, high)  # the same checks
    peak = max(abs(float(low)), abs(float(high)))
    return float(np.float32(peak / 127)) if peak > 0 else 1.0


def signed_quantised_data(values: np.ndarray, scale: float) -> np.ndarray:
    """``values`` quantised to signed bytes as a kernel does (``signed_quantised``), as int8."""
    steps = np.rint(np.asarray(values, np.float32) * np.float32(1 / scale))
    return np.clip(steps, -127, 127).astype(np.int8)


def signed_quantised(value: tvm.tirx.PrimExpr, inverse: tvm.tirx.PrimExpr) -> tvm.tirx.PrimExpr:
    """``value`` (fp32) times ``inverse`` (1 / scale), rounded to nearest even and clamped to [-127, 127], as int8."""
    steps = tvm.tirx.nearbyint(value * inverse)
    return tvm.tirx.max(tvm.tirx.min(steps, tvm.tirx.const(127, "float32")), tvm.tirx.const(-127, "float32")).astype(
        "int8")


def quantised_data(values: np.ndarray, q: Quantisation) -> np.ndarray:
    """``values`` quantised as a kernel's ``pack`` does (fp32 arithmetic), as uint8."""
    steps = np.rint(np.asarray(values, np.float32) * np.float32(1 / q.scale))
    return np.clip(steps + np.float32(q.zero), 0, 255).astype(np.uint8)


def quantised(value: tvm.tirx.PrimExpr, quant: tvm.te.Tensor) -> tvm.tirx.PrimExpr:
    """``value`` (fp32) quantised with ``quant`` = (1 / scale, zero), as uint8."""
    steps = tvm.tirx.nearbyint(value * quant[0]) + quant[1]
    return tvm.tirx.max(tvm.tirx.min(steps, tvm.tirx.const(255, "float32")), tvm.tirx.const(0, "float32")).astype(
        "uint8")


def quantised_weights(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """OIHW fp32 weights -> (int8 weights, their scale per output channel)."""
    weight = np.asarray(weight, np.float64)
    peak = np.abs(weight.reshape(len(weight), -1)).max(axis=1)
    scale = np.where(peak > 0, peak / 127, 1.0)
    q = np.clip(np.rint(weight / scale[:, None, None, None]), -127, 127).astype(np.int8)
    return q, scale


def constants(q_weight: np.ndarray, weight_scale: np.ndarray, bias: np.ndarray | None, data: Quantisation
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A kernel's float32 ``scale`` and ``bias`` per output channel (``data.scale x s[o]``; ``bias[o]`` minus the
    data's zero times the channel's weights) and its ``quant`` = (1 / scale, zero)."""
    scale = data.scale * weight_scale
    sums = q_weight.reshape(len(q_weight), -1).astype(np.int64).sum(axis=1)
    offset = (0 if bias is None else np.asarray(bias, np.float64)) - data.zero * scale * sums
    quant = np.array([1 / data.scale, data.zero], np.float32)
    return scale.astype(np.float32), np.asarray(offset, np.float32), quant
