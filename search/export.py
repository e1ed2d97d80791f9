"""Export a plan: validate it, emit the planned Relax module, compile it and check it against the stock NCHW build.

``export(mod_or_graph, plan, target=..., threads=...)`` returns a ``CompiledPlan``; ``CompiledPlan.save(dir)`` writes
the artifact directory that ``search.artifact.load_artifact`` reads back (``save_artifact``: all of it or nothing).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import tempfile
import weakref
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import tvm
from tvm import relax

from search.artifact import quiet_tvm_log, random_arrays
from search.calibrated import calibrated
from search.emit import emit_module
from search.errors import SearchError
from search.graph import OpGraph, extract_graph
from search.host import make_target
from search.isa import UNITS
from search.lower import lower_and_compile
from search.numerics import relative_error
from search.plan import Plan, validate
from search.precision import DEFAULT_MAX_ERROR
from search.runtime import DEFAULT_RUNTIME, RuntimeSettings, export_options
from search.templates.common import sized_for, unit

TOLERANCE = 1e-3
"""Largest accepted ``max|out - ref| / max|ref|`` of a plan against the stock build. On ssd_resnet50_512 float32
reordering reaches 2.6e-4 (the nhwc baseline; MetaSchedule's own build 2.4e-4, the error spread over every output,
mean 5e-6), while a wrong layout or kernel gives errors of order 1."""
LIBRARY = "model.so"


def random_inputs(graph: OpGraph, seed: int) -> list[np.ndarray]:
    """Random arrays for the model inputs (``search.artifact.random_arrays``)."""
    return random_arrays([shape for _, shape in graph.inputs], seed, graph.input_dtypes)


def input_manifest(graph: OpGraph) -> dict[str, dict]:
    """The manifest's ``input_shapes`` and ``input_dtypes`` (what ``Artifact.random_inputs`` draws from)."""
    return {"input_shapes": {name: list(shape) for name, shape in graph.inputs},
            "input_dtypes": {name: dtype for (name, _), dtype in zip(graph.inputs, graph.input_dtypes, strict=True)}}


def run_vm(executable, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Run ``main`` of a compiled executable / loaded library; outputs as a flat list of numpy arrays."""
    dev = tvm.cpu()
    vm = relax.VirtualMachine(executable, dev)
    result = vm["main"](*[tvm.runtime.tensor(array, dev) for array in inputs])
    if hasattr(result, "numpy"):
        return [result.numpy()]
    return [item.numpy() for item in result]


def reference_outputs(graph: OpGraph, target: tvm.target.Target, seed: int) -> list[np.ndarray]:
    """The stock NCHW build's outputs on ``random_inputs(graph, seed)``: what ``export`` checks a plan against."""
    return run_vm(tvm.compile(graph.module, target=target), random_inputs(graph, seed))


@dataclass(frozen=True)
class CheckInputs:
    """Inputs a plan's numerical check runs on instead of the random one: per sample, the model's inputs and the
    stock NCHW build's outputs on them (``check_inputs``)."""

    inputs: list[list[np.ndarray]]
    outputs: list[list[np.ndarray]]


def check_inputs(graph: OpGraph, target: tvm.target.Target, samples: list[list[np.ndarray]]) -> CheckInputs:
    """``samples`` (the calibration inputs, ``search.activation_ranges.load_calibration``) with the stock build's
    outputs on each."""
    stock = tvm.compile(graph.module, target=target)
    return CheckInputs([list(sample) for sample in samples], [run_vm(stock, list(sample)) for sample in samples])


def _top1_changed(outputs: list[list[np.ndarray]], reference: list[list[np.ndarray]]) -> float | None:
    """The share of the samples' rows whose arg-max (top-1 class) differs from the reference's, for a classifier (a
    first output of shape (batch, classes), classes > 1); None otherwise."""
    if not reference or reference[0][0].ndim != 2 or reference[0][0].shape[1] < 2:
        return None
    changed = [np.argmax(out[0], axis=1) != np.argmax(ref[0], axis=1) for out, ref in zip(outputs, reference)]
    return float(np.mean(np.concatenate(changed)))


@dataclass(frozen=True)
class CompiledPlan:
    """A compiled, numerically checked plan: ``library``, the shared library written once (``write_library``; the
    folder of one that ``export`` made goes with this object), ``executable``, that library loaded; ``manifest`` is
    what ``save`` writes to ``manifest.json``."""

    executable: Any
    plan: Plan
    library: Path
    manifest: dict[str, Any] = field(default_factory=dict)

    def save(self, directory: str | Path) -> Path:
        """Write ``model.so``, ``plan.json`` and ``manifest.json`` into ``directory`` (created if needed)."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.library, out / LIBRARY)
        self.plan.save(out / "plan.json")
        (out / "manifest.json").write_text(json.dumps(self.manifest, indent=2) + "\n")
        return out


def write_library(executable: Any) -> tuple[Any, Path]:
    """``executable`` written as a shared library into a new temporary folder (the caller removes it; nothing is left
    if writing or loading fails), and loaded: the numerical check runs the code a user's artifact will hold, without
    compiling it a second time in memory."""
    running = set(psutil.Process().children(recursive=True))
    folder = Path(tempfile.mkdtemp(prefix="tessera-library-"))
    try:
        with quiet_tvm_log():
            executable.export_library(str(folder / LIBRARY), **export_options())
            loaded = tvm.runtime.load_module(str(folder / LIBRARY))
    except BaseException:  # interrupted: the compiler TVM started goes on writing into the folder until it ends
        psutil.wait_procs(set(psutil.Process().children(recursive=True)) - running, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return loaded, folder / LIBRARY


def save_artifact(compiled: CompiledPlan, directory: str | Path) -> Path:
    """``compiled.save`` into ``directory`` through a temporary directory beside it, removed in any case: the files
    are moved into place only once all are written, so a failure to write them leaves ``directory`` as it was."""
    out = Path(directory)
    if out.exists() and not out.is_dir():
        raise SearchError(f"{out} is a file; name a directory to write the artifact into")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.", dir=out.parent) as scratch:
        written = compiled.save(Path(scratch) / "artifact")
        if not out.exists():
            os.replace(written, out)
        else:  # an earlier artifact: its files replaced one by one, any others left alone
            for item in written.iterdir():
                os.replace(item, out / item.name)
    return out


def export(
    mod_or_graph: tvm.IRModule | OpGraph,
    plan: Plan,
    *,
    target: tvm.target.Target | None = None,
    threads: int = 1,
    seed: int = 0,
    reference: list[np.ndarray] | None = None,
    runtime: RuntimeSettings = DEFAULT_RUNTIME,
    max_error: float | None = None,
    checked_on: CheckInputs | None = None,
) -> CompiledPlan:
    """Compile ``plan`` for a model and check it against the model's stock NCHW build.

    Parameters
    ----------
    mod_or_graph : tvm.IRModule or OpGraph
        The model (a graph keeps its source module, which is the numerical reference).
    plan : Plan
        A candidate for every tunable node (validated before anything is compiled). The templates are sized for the
        plan's ``vector_unit`` (its knobs were chosen for it; the code is correct on either unit), else the host's.
    target : tvm.target.Target, optional
        Defaults to ``make_target(threads)``.
    threads : int
        Cores the target is compiled for (recorded in the manifest).
    seed : int
        Seed of the random input used by the numerical check.
    reference : list of numpy.ndarray, optional
        ``reference_outputs(graph, target, seed)`` when several plans of one graph are exported (it compiles the
        stock module); computed here if None.
    runtime : RuntimeSettings
        How the library runs its parallel loops (``search.runtime``; recorded in the manifest, applied when loaded).
    max_error : float, optional
        The largest relative error the numerical check accepts; default ``TOLERANCE`` for an fp32 plan,
        ``search.precision.DEFAULT_MAX_ERROR`` for a plan with bf16 or int8 operators.
    checked_on : CheckInputs, optional
        Inputs to check on (``check_inputs``: the calibration samples) instead of the random one: the error is the
        largest over them, and for a classifier the share of rows whose top-1 class changes is recorded.

    Raises
    ------
    SearchError
        For an invalid plan, or when the output differs from the reference by more than ``max_error`` (relative to
        the reference's largest magnitude).
    """
    graph = mod_or_graph if isinstance(mod_or_graph, OpGraph) else extract_graph(mod_or_graph)
    if plan.ranges:  # an int8 node's kernel is quantised over its input's range
        graph = calibrated(graph, plan.ranges)
    target = target or make_target(threads)
    vector_unit = UNITS[plan.vector_unit] if plan.vector_unit else unit()
    with sized_for(vector_unit):
        chosen = validate(plan, graph)
        emitted = emit_module(graph, chosen, target)
        executable, calls = lower_and_compile(emitted.module, emitted.kernels, target)
    if reference is None and checked_on is None:
        reference = reference_outputs(graph, target, seed)
    tolerance = max_error if max_error is not None else DEFAULT_MAX_ERROR if plan.reduced_nodes else TOLERANCE
    library, path = write_library(executable)
    try:
        if checked_on is None:
            error, check = relative_error(run_vm(library, random_inputs(graph, seed)), reference), {"seed": seed}
        else:
            outputs = [run_vm(library, sample) for sample in checked_on.inputs]
            error = max(relative_error(out, ref) for out, ref in zip(outputs, checked_on.outputs))
            check = {"samples": len(outputs), "top1_changed": _top1_changed(outputs, checked_on.outputs)}
        if not error <= tolerance:
            raise SearchError(f"numerical check failed: relative error {error:.3g} > {tolerance:g} against the "
                              f"stock NCHW build (plan for {plan.model or 'the model'})")
        manifest = {
            "model": plan.model,
            "args": plan.args,
            "batch": graph.inputs[0][1][0],
            **input_manifest(graph),
            "target": {"kind": target.kind.name, "mcpu": str(target.attrs.get("mcpu", "")),
                       "num-cores": int(target.attrs.get("num-cores", threads))},
            "threads": int(threads),
            "runtime": runtime.to_dict(),
            "vector_unit": vector_unit.name,
            "tvm_version": tvm.__version__,
            "tessera_version": importlib.metadata.version("tessera"),
            "kernels": len(emitted.kernels),
            "kernel_symbols": sorted(emitted.kernels),
            "layout_transforms": emitted.transforms,
            "numerical_check": {"passed": True, "relative_error": error, "tolerance": tolerance, **check},
            "bf16_nodes": plan.bf16_nodes,
            "bf16_values": plan.bf16_values,
            "int8_nodes": plan.int8_nodes,
            "ranges": dict(plan.ranges),
            "library": LIBRARY,
            "calls": [{"symbol": call.symbol, "computes": [asdict(emitted.origins[name]) for name in call.bindings
                                                           if name in emitted.origins]} for call in calls],
        }
        compiled = CompiledPlan(library, plan, path, manifest)
        weakref.finalize(compiled, shutil.rmtree, path.parent, ignore_errors=True)
    except BaseException:  # the check failed or the command was interrupted before the folder had its finalizer
        shutil.rmtree(path.parent, ignore_errors=True)
        raise
    return compiled

