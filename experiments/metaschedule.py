"""TVM MetaSchedule as a peer: tune a zoo network's stock NCHW build for a wall-clock budget and save the result as
a tessera artifact (``tessera run`` and ``experiments.peers`` time it like a plan).

The whole module is tuned (``relax_integration.extract_tasks``, the gradient task scheduler, the evolutionary search
with the XGBoost cost model, MetaSchedule's defaults) until ``budget_seconds`` of wall clock have passed: the last
measure callback stops tuning once the deadline is reached and every batch sent out has been committed to the
database, so nothing is cut short mid-measurement and every task has records (the warm-up round, one batch per task,
always completes; on large networks it takes longer than the budget). Candidates are built in this process
(``InProcessBuilder``: TVM 0.27's ``LocalBuilder`` workers spend ~19 s importing before each build and time out) and
timed by MetaSchedule's ``LocalRunner``.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import json
import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import tvm
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
from tvm.s_tir.meta_schedule.builder.local_builder import default_build, default_export
from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

from experiments.extraction import load_network
from search.errors import SearchError
from search.export import (
    LIBRARY,
    TOLERANCE,
    CompiledPlan,
    input_manifest,
    random_inputs,
    run_vm,
    write_library,
)
from search.host import make_target
from search.numerics import relative_error
from search.plan import Plan
from search.threads import use_threads

TRIALS_PER_ITERATION = 32
"""Candidates measured per task per round (MetaSchedule's default is 64; fewer keep the deadline tight)."""


@derived_object
class InProcessBuilder(PyBuilder):
    """Builds each candidate in the tuning process with MetaSchedule's default build and export functions."""

    def build(self, build_inputs):
        results = []
        for item in build_inputs:
            try:
                with warnings.catch_warnings():  # default_build calls the deprecated tvm.build
                    warnings.simplefilter("ignore", DeprecationWarning)
                    library = default_build(item.mod, item.target, None)
                results.append(BuilderResult(default_export(library), None))
            except Exception as exc:  # a candidate that fails to build is a failed trial, as in LocalBuilder
                results.append(BuilderResult(None, f"{type(exc).__name__}: {exc}"))
        return results


class DeadlinePassed(Exception):
    """Raised by :class:`Deadline` to stop MetaSchedule's task scheduler."""


@derived_object
class Deadline(PyMeasureCallback):
    """Stops tuning once ``deadline`` (a ``time.monotonic`` value) has passed and no other task's batch is still
    waiting to be committed; counts measured trials.

    Raising is the only safe stop: terminating tasks from a measure callback trips the gradient scheduler's
    ``!task->is_terminated`` check when the callback runs for the task it is about to pick. Raising while other
    tasks' batches are pending (the warm-up round sends every task's batch before joining any) would drop them, and a
    task without a record in the database is compiled unscheduled: one untuned resnet50 ran at 3.8 s.
    """

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.trials = 0
        self.passed = False

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results) -> None:
        self.trials += len(runner_results)
        pending = any(record.measure_candidates is not None
                      for i, record in enumerate(task_scheduler.tasks_) if i != task_id)
        if time.monotonic() >= self.deadline and not pending:
            self.passed = True
            raise DeadlinePassed("tuning budget spent")


def _import_tensor_intrinsics() -> None:
    """Import ``tvm.s_tir.tensor_intrin`` (MetaSchedule's tune contexts do) in seconds, not minutes.

    Each of its ~500 TVMScript functions calls ``inspect.stack()``, and for every frame of the import machinery (files
    named ``<frozen importlib...>``, which no module owns) ``inspect.getmodule`` scans all of ``sys.modules``: minutes
    in a process that has loaded Ray, MLflow or PyTorch (docs/experiments.md). Naming those frames' modules in
    inspect's file-to-module cache first makes each lookup one dictionary hit (the frames have no source either way).
    """
    for name in ("importlib._bootstrap", "importlib._bootstrap_external"):
        inspect.modulesbyfile.setdefault(f"<frozen {name}>", name)
    import tvm.s_tir.tensor_intrin  # noqa: F401


def _fused(mod: tvm.IRModule, target: tvm.target.Target) -> tvm.IRModule:
    """``mod`` lowered to fused TIR functions exactly as ``compile_relax`` prepares it, so that the tasks extracted
    from it are the ones the database is applied to."""
    from tvm import relax

    passes = [*relax.pipeline.library_dispatch_passes(target), relax.transform.LegalizeOps(),
              relax.transform.AnnotateTIROpPattern(), relax.transform.FoldConstant(), relax.transform.FuseOps(),
              relax.transform.FuseTIR()]
    with target, tvm.transform.PassContext(opt_level=3):
        return tvm.transform.Sequential(passes)(mod)


def tune_metaschedule(
    model: str | tvm.IRModule,
    out: str | Path,
    *,
    budget_seconds: float,
    threads: int,
    batch: int = 1,
    image_size: int | None = None,
    seed: int = 0,
    work_dir: str | Path | None = None,
    trials_per_iteration: int = TRIALS_PER_ITERATION,
    population: int = 512,
) -> dict[str, Any]:
    """Tune ``model`` (a zoo name, an .onnx path or a Relax module) with MetaSchedule for ``budget_seconds``,
    compile, check against the stock build and save the artifact to ``out``; returns its manifest (with a
    ``metaschedule`` entry: budget, seconds, trials, tasks).

    TVM's pool runs ``threads`` threads for the runner's measurements. ``work_dir`` (default: a temporary
    directory) keeps MetaSchedule's database and logs. The gradient task scheduler first tries every task once
    (a warm-up round of ``trials_per_iteration`` candidates per task that is not cut short), so a budget shorter
    than that round is overrun. ``population``: the evolutionary search's population per task (MetaSchedule's
    default 512).
    """
    if not budget_seconds > 0:
        raise SearchError(f"budget must be positive seconds, got {budget_seconds!r}")
    use_threads(threads)
    graph, label, args = load_network(model, batch=batch, image_size=image_size, seed=seed)
    mod = graph.module
    target = make_target(threads)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tessera-ms-") as scratch:
        work = str(work_dir or scratch)
        extracted = ms.relax_integration.extract_tasks(_fused(mod, target), target)
        _import_tensor_intrinsics()
        contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
            extracted, work_dir=work, seed=seed, num_threads=threads,
            strategy=ms.search_strategy.EvolutionarySearch(population_size=population,
                                                           init_min_unmeasured=min(50, population)))
        deadline = Deadline(start + budget_seconds)
        database = ms.database.JSONDatabase(work_dir=work)
        try:
            ms.tune_tasks(
                tasks=contexts, task_weights=weights, work_dir=work, max_trials_global=10**7,
                num_trials_per_iter=trials_per_iteration, builder=InProcessBuilder(), database=database,
                runner=ms.runner.LocalRunner(timeout_sec=60),
                measure_callbacks=[*ms.MeasureCallback.create("default"), deadline])
        except Exception:  # the deadline's exception comes back through TVM's FFI, possibly re-typed
            if not deadline.passed:
                raise
        tuned_seconds = time.monotonic() - start
        executable = ms.relax_integration.compile_relax(database, mod, target, params=None)
    inputs = random_inputs(graph, seed)
    library, path = write_library(executable)  # checked as the artifact will hold it
    try:
        error = relative_error(run_vm(library, inputs), run_vm(tvm.compile(mod, target=target), inputs))
        if not error <= TOLERANCE:
            raise SearchError(f"MetaSchedule build of {label} failed the numerical check: relative error {error:.3g}")
        manifest = {
            "model": label, "args": args, "batch": args["batch"],
            **input_manifest(graph),
            "target": {"kind": "llvm", "mcpu": str(target.attrs.get("mcpu", "")), "num-cores": threads},
            "threads": threads, "tvm_version": tvm.__version__,
            "tessera_version": importlib.metadata.version("tessera"),
            "numerical_check": {"passed": True, "relative_error": error, "tolerance": TOLERANCE, "seed": seed},
            "library": LIBRARY,
            "metaschedule": {"budget_seconds": budget_seconds, "tuning_seconds": tuned_seconds,
                             "total_seconds": time.monotonic() - start, "trials": deadline.trials,
                             "tasks": len(contexts)},
        }
        CompiledPlan(library, Plan({}, label, args), path, manifest).save(out)
    finally:
        shutil.rmtree(path.parent, ignore_errors=True)
    (Path(out) / "metaschedule.json").write_text(json.dumps(manifest["metaschedule"], indent=2) + "\n")
    return manifest

