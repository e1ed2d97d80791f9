"""The ranges an int8 kernel's input takes on the user's calibration inputs, found by running the fp32 network.

A calibration file is a ``.npz`` with one array per model input, by the input's name: either one sample (the
input's shape) or several (``(samples, *shape)``), the same number for every input, of the input's dtype kind (any
float for a float input, any integer for an index input). ``input_ranges`` runs the network in NCHW on every sample
(tessera's own fp32 kernels at their default settings, the graph's outputs replaced by the values the int8-capable
operators read) and takes each value's range: its minimum and maximum (``minmax``), or the 0.01st and 99.99th
percentiles of all its samples' values (``percentile``: a few outliers do not stretch the 255 steps);
``search.calibrated.calibrated`` records them in the operators' parameters, where their kernels find them and where the
candidate space looks for which operators may run in int8.
"""

from __future__ import annotations

import dataclasses
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from search.calibrated import int8_capable
from search.errors import SearchError
from search.graph import OpGraph
from search.kinds import get_kind

METHODS = ("minmax", "percentile")
PERCENTILE = 99.99
"""The ``percentile`` method's upper percentile (the lower one is 100 minus it)."""


def load_calibration(path: str | Path, graph: OpGraph) -> list[list[np.ndarray]]:
    """The samples of the calibration file ``path``: per sample, the model's inputs in order; SearchError (one line)
    for a file that is no ``.npz``, a missing or unknown input name, a shape that is neither the input's nor
    ``(samples, *shape)``, a dtype of another kind, or inputs with different numbers of samples."""
    where = f"calibration data {path}"
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except FileNotFoundError:
        raise SearchError(f"{where}: no such file") from None
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise SearchError(f"{where}: not a .npz of arrays ({exc})") from None
    names = [name for name, _ in graph.inputs]
    missing, unknown = [n for n in names if n not in arrays], sorted(set(arrays) - set(names))
    if missing or unknown:
        raise SearchError(f"{where}: " + "; ".join(
            part for part in (missing and f"no array for input(s) {', '.join(missing)}",
                              unknown and f"unknown array(s) {', '.join(unknown)}") if part)
            + f" (the model's inputs: {', '.join(names)})")
    samples: dict[str, np.ndarray] = {}
    for (name, shape), dtype in zip(graph.inputs, graph.input_dtypes, strict=True):
        array, shape = arrays[name], tuple(shape)
        if np.dtype(dtype).kind in "iu" and array.dtype.kind not in "iu" or (
                np.dtype(dtype).kind == "f" and array.dtype.kind != "f"):
            raise SearchError(f"{where}: input {name} is {array.dtype}, but the model reads {dtype}")
        if array.shape == shape:
            array = array[None]
        elif array.shape[1:] != shape:
            raise SearchError(f"{where}: input {name} has shape {array.shape}; expected {shape} or "
                              f"(samples, {', '.join(map(str, shape))})")
        if not np.all(np.isfinite(array)):
            raise SearchError(f"{where}: input {name} holds NaN or infinite values")
        samples[name] = array.astype(dtype)
    counts = {len(array) for array in samples.values()}
    if len(counts) > 1:
        raise SearchError(f"{where}: the inputs have different numbers of samples "
                          f"({', '.join(f'{n}: {len(a)}' for n, a in samples.items())})")
    return [[samples[name][i] for name in names] for i in range(counts.pop())]


def input_ranges(graph: OpGraph, samples: Sequence[Sequence[np.ndarray]], target, method: str = "minmax"
                 ) -> dict[str, tuple[float, float]]:
    """Each int8-capable operator's input ranges on ``samples`` (``load_calibration``), by ``method``: (low, high)
    of each input its int8 kernels quantise, one after the other."""
    from search.emit import emit_module
    from search.export import run_vm
    from search.lower import compile_module
    from search.plan import baseline_plan, validate

    if method not in METHODS:
        raise SearchError(f"calibration method must be one of {', '.join(METHODS)}, got {method!r}")
    readers = [op for op in graph.tunable if int8_capable(op)]
    read = {op.name: op.inputs[: get_kind(op.kind).int8_inputs] for op in readers}
    values = list(dict.fromkeys(value for inputs in read.values() for value in inputs))
    if not values or not samples:
        return {}
    tapped = dataclasses.replace(graph, outputs=tuple(values), output_is_tuple=True)
    emitted = emit_module(tapped, validate(baseline_plan(graph, "nchw"), graph), target)
    executable = compile_module(emitted.module, target)
    seen: dict[str, list[np.ndarray]] = {value: [] for value in values}
    for sample in samples:
        for value, out in zip(values, run_vm(executable, list(sample)), strict=True):
            seen[value].append(out.reshape(-1))
    ranges = {}
    for value, parts in seen.items():
        flat = np.concatenate(parts)
        if method == "minmax":
            ranges[value] = (float(flat.min()), float(flat.max()))
        else:
            ranges[value] = (float(np.percentile(flat, 100 - PERCENTILE)), float(np.percentile(flat, PERCENTILE)))
    return {name: tuple(bound for value in inputs for bound in ranges[value]) for name, inputs in read.items()}
