"""Compile a saved plan, or a uniform baseline, for the network it was made for (``tessera export``)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from search.plan import UNIFORM, Plan
from search.runtime import DEFAULT_RUNTIME, RuntimeSettings

if TYPE_CHECKING:
    from search.export import CompiledPlan
    from search.graph import OpGraph
    from search.zoo.shapes import ShapesLike


def export_plan(model: str, plan: str | Path | Plan, *, batch: int | None = None, image_size: int | None = None,
                input_shape: ShapesLike = None, threads: int = 1, seed: int | None = None,
                runtime: RuntimeSettings = DEFAULT_RUNTIME, max_error: float | None = None,
                calibration_data: str | Path | None = None) -> CompiledPlan:
    """Compile ``plan`` for ``model`` and check it against the stock build; ``CompiledPlan.save(dir)`` writes it.

    Parameters
    ----------
    model : str
        A zoo name or ``.onnx`` path.
    plan : str, Path or Plan
        A plan file (``tessera solve --out``, ``tune``'s ``plan.json``), a ``Plan``, or a uniform baseline's name
        (``search.plan.UNIFORM``: nchw, nhwc, nchw8c, nchw16c).
    batch, image_size, input_shape
        The network's input; when none is given, the plan's recorded ones (``Plan.args``), else the model's own.
    threads : int
        Cores to compile for.
    seed : int, optional
        Seed of the weights and of the check's input (default: the plan's, else 0).
    runtime : RuntimeSettings
        The thread pool the library runs its parallel loops on (``search.runtime``).
    max_error : float, optional
        The largest relative output error the numerical check accepts (``search.export.export``'s default: fp32's
        for an fp32 plan, ``search.precision.DEFAULT_MAX_ERROR`` with bf16 or int8 operators).
    calibration_data : str or Path, optional
        A ``.npz`` of the model's inputs (``search.activation_ranges.load_calibration``) the check runs on instead of
        the random input: a plan with int8 nodes is quantised for inputs like these (its ``ranges``), which random
        ones need not resemble.

    Warns
    -----
    UserWarning
        When the plan's knobs were chosen for another vector unit than the host's (the code is still correct).

    Examples
    --------
    >>> export_plan("resnet18", "tuned/plan.json").save("build/")  # doctest: +SKIP
    """
    from search.activation_ranges import load_calibration
    from search.export import check_inputs, export
    from search.host import make_target
    from search.plan import baseline_plan
    from search.precision import check_max_error
    from search.templates.common import unit

    saved = plan if isinstance(plan, Plan) else None if str(plan) in UNIFORM else Plan.load(plan)
    seed = seed if seed is not None else (saved.args.get("seed", 0) if saved else 0)
    graph, model_args = plan_network(model, saved, batch=batch, image_size=image_size, input_shape=input_shape,
                                     seed=seed)
    chosen = saved or baseline_plan(graph, str(plan))
    plan = Plan(chosen.choices, model, model_args, chosen.vector_unit, chosen.ranges)
    if plan.vector_unit and plan.vector_unit != unit().name:
        warnings.warn(f"the plan's knobs were chosen for {plan.vector_unit}, this host has {unit().name}: compiled "
                      f"with the plan's sizing (correct, maybe slower here; tune on this host for its own)",
                      stacklevel=2)
    max_error = check_max_error(max_error)
    checked_on = None if calibration_data is None else check_inputs(
        graph, make_target(threads), load_calibration(calibration_data, graph))
    return export(graph, plan, threads=threads, seed=seed, runtime=runtime, max_error=max_error, checked_on=checked_on)


def plan_network(model: str, plan: Plan | None, *, batch: int | None = None, image_size: int | None = None,
                 input_shape: ShapesLike = None, seed: int | None = None) -> tuple[OpGraph, dict]:
    """The operator graph of ``model`` and its load arguments, at the input shape given, else at the one ``plan``
    recorded (``Plan.args``), else at the model's own; ``seed`` defaults to the plan's, else 0."""
    from experiments.extraction import load_network

    recorded = plan.args if plan is not None else {}
    shape = {"batch": batch, "image_size": image_size, "input_shape": input_shape}
    if all(value is None for value in shape.values()):  # nothing said of the shape: the plan's
        keys = ("input_shape",) if "input_shape" in recorded else ("batch", "image_size")
        shape = {key: recorded.get(key) for key in keys}
    graph, _, args = load_network(model, **shape, seed=recorded.get("seed", 0) if seed is None else seed)
    return graph, args
