"""The whole loop: measure a model's candidate space, solve the cost problem, export and check the plan, and time it
against the uniform baselines in the same process.

``extract(model, ...)`` measures what the cost cache lacks and returns the ``solvers.Problem``; ``tune(model, out,
...)`` does everything and writes ``plan.json``, ``problem.json``, ``summary.json`` and the ``artifact/`` directory.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cost_models.cache import DEFAULT_CACHE, DEFAULT_TIMING
from experiments.calibrate import (
    PROFILE_RUNS,
    Round,
    check_drift,
    keep_network_times,
    predict,
    predict_with_offsets,
    window_factors,
)
from experiments.timing import predicted_cost, time_plans, timing_line
from search.errors import SearchError

if TYPE_CHECKING:
    import tvm

    from cost_models.drift import Drift
    from cost_models.sources import CostSource
    from search.graph import OpGraph
    from search.plan import Plan
    from search.zoo.shapes import ShapesLike
    from solvers.problem import Problem

TUNED_ARTIFACT = "artifact"
PICTURE = "plan.svg"
TRANSFORMS = ("shared", "pairwise")


def usable_cores() -> int:
    """Cores this process may run on."""
    return len(os.sched_getaffinity(0))


def use_threads(threads: int | None) -> int:
    """Validate ``threads`` (None: every usable core) and put it into ``TVM_NUM_THREADS``.

    TVM sizes its thread pool once per process, from that variable, when the runtime first runs something; call this
    before then.
    """
    cores = usable_cores()
    threads = cores if threads is None else threads
    if not isinstance(threads, int) or isinstance(threads, bool) or not 1 <= threads <= cores:
        raise SearchError(f"threads must be an integer from 1 to the {cores} usable cores, got {threads!r}")
    os.environ["TVM_NUM_THREADS"] = str(threads)
    return threads


@dataclass(frozen=True)
class Extracted:
    """A measured problem and how it was made: the graph, the model's name and load arguments, and measurement
    counts (``tasks`` distinct measurements needed, ``new`` of them measured now, ``failed`` failures)."""

    graph: OpGraph
    problem: Problem
    model: str
    args: dict[str, Any]
    tasks: int
    new: int
    failed: int
    seconds: float

    def plan(self, solution: Any) -> Plan:
        """A solver's solution of this problem as the ``search.plan.Plan`` that ``search.export.export`` compiles
        (the auxiliary transform nodes left out, the model's name and load arguments recorded)."""
        from search.plan import plan_from_assignment

        return plan_from_assignment(solution.assignment, self.model, self.args,
                                    auxiliary=self.problem.meta.get("auxiliary", ()))


def load_network(model: str | tvm.IRModule, name: str | None = None, *, batch: int | None = None,
                 image_size: int | None = None, seed: int = 0, input_shape: ShapesLike = None):
    """(graph, name, args) of a zoo name / .onnx path (see ``search.zoo.load_model`` for the shape arguments), or of
    a Relax module (labelled ``name``). ``args`` are what reloads the same network: ``batch``, ``image_size`` (of
    the first input) and ``seed``, and ``input_shape`` (as text) when it was given."""
    from search.graph import extract_graph
    from search.zoo import input_shapes, load_model

    shapes = input_shapes(input_shape)
    if isinstance(model, str):
        mod = load_model(model, batch=batch, image_size=image_size, seed=seed, input_shape=shapes)
        label = name or model
    else:
        mod, label = model, name or "model"
    graph = extract_graph(mod)
    shape = graph.inputs[0][1]
    given = {"input_shape": [str(s) for s in shapes]} if shapes else {}
    return graph, label, {"batch": int(shape[0]), "image_size": int(shape[-1]), "seed": seed, **given}


def extract(
    model: str | tvm.IRModule,
    *,
    name: str | None = None,
    batch: int | None = None,
    image_size: int | None = None,
    input_shape: ShapesLike = None,
    seed: int = 0,
    threads: int | None = None,
    space_size: int | None = None,
    layouts: Sequence[str] | str | None = None,
    cache: str | Path = DEFAULT_CACHE,
    costs: CostSource | str = "measured",
    transforms: str = "shared",
    progress: Callable[[Any], None] | None = None,
    address: str | None = None,
    key_by_node: bool = False,
    baselines: Sequence[str] | None = None,
) -> Extracted:
    """Measure (what ``cache`` lacks of) ``model``'s candidate space and build its cost problem.

    Parameters
    ----------
    model : str or tvm.IRModule
        A zoo name or .onnx path (loaded with ``batch``, ``image_size`` or ``input_shape``, and ``seed``; see
        ``search.zoo.load_model``), or a Relax module in the zoo's vocabulary, labelled ``name``.
    threads : int, optional
        Runtime threads kernels are timed with (default: every usable core); set before TVM starts its thread pool.
    space_size, layouts, baselines
        See ``search.space.tuning_space`` (defaults ``DEFAULT_SPACE_SIZE``, ``DEFAULT_LAYOUTS`` and the uniform
        plans ``tune`` times).
    cache : path
        The sqlite cost cache, created if missing.
    costs : CostSource or str
        Where costs come from (``cost_models.sources``): a source's name, ``"measured"`` by default, or a source
        with its parameters, such as ``XGBoostSource("model.json")``.
    transforms : {"shared", "pairwise"}
        How layout transforms are priced (``cost_models.pricing``): each conversion once, as the module runs it (the
        default: auxiliary nodes with hard constraints, which the auto solver proves and the pbqp and greedy
        heuristics handle less well), or every read on its own (pairwise: smaller problems; it overcounts a value read
        several times in one layout).
    progress : callable, optional
        Receives the cost provider's progress events (see ``experiments.progress.ProgressBar``).
    address : str, optional
        ``HOST:PORT`` of a Ray cluster to measure on (``cost_models.cluster_costs``): the tasks the cache lacks are
        built and timed on its nodes offering the ``timing_slot`` resource, every result written into ``cache`` here
        as it arrives; joined with Ray's token authentication once the network is loaded.
    key_by_node : bool
        With ``address``: nodes whose CPU or versions differ from this machine's time too, for records kept under
        their own context (the problem uses this machine's only); without it they are refused.

    Raises
    ------
    SearchError
        Unknown model, bad sizes, threads, layouts or space size; ``key_by_node`` without ``address``.
    CostSourceError
        An unknown cost source or one that cannot open: a bad parameter, an unusable cache or model file, a cluster
        that cannot be joined or measured on (``cost_models.cluster.ClusterError``).
    """
    from cost_models.cluster import Cluster
    from cost_models.pricing import build_problem
    from cost_models.sources import cost_source, refuse_cluster
    from search import space as spaces
    from search.host import make_target

    source = cost_source(costs)
    if transforms not in TRANSFORMS:
        raise SearchError(f"transforms must be one of {', '.join(TRANSFORMS)}, got {transforms!r}")
    if key_by_node and address is None:
        raise SearchError("key_by_node (--key-by-node) applies to measuring on a cluster; give its address (--address)")
    cluster = {} if address is None else {"cluster": Cluster(address, key_by_node)}
    if cluster:
        refuse_cluster(source)
    threads = use_threads(threads)
    layouts = spaces.parse_layouts(spaces.DEFAULT_LAYOUTS if layouts is None else layouts)
    space_size = spaces.check_space_size(spaces.DEFAULT_SPACE_SIZE if space_size is None else space_size)
    tally = _Tally(progress)
    graph, label, args = load_network(model, name, batch=batch, image_size=image_size, seed=seed,
                                      input_shape=input_shape)  # a bad model file is refused before a cache is made
    space = spaces.tuning_space(graph, layouts=layouts, space_size=space_size,
                                baselines=spaces.BASELINES if baselines is None else baselines)
    meta = {"model": label, "args": args, "threads": threads, "layouts": list(layouts), "space_size": space_size,
            "transforms": transforms}
    with source.open(cache, make_target(threads), threads, tally, **cluster) as provider:
        start = time.perf_counter()
        problem = build_problem(graph, space, tally.wrap(provider.measure), meta=meta, shared=transforms == "shared")
        problem.meta["costs"] = source.provenance(provider)
    return Extracted(graph, problem, label, args, tally.tasks, tally.new, tally.failed, time.perf_counter() - start)


class _Tally:
    """Counts what a provider's ``measure`` was asked (``tasks``), measured anew (``new``, from its progress events)
    and returned as failed (``failed``, cached failures included); forwards progress events."""

    def __init__(self, forward: Callable[[Any], None] | None) -> None:
        self.forward, self.tasks, self.new, self.failed, self._done = forward, 0, 0, 0, 0

    def __call__(self, event: Any) -> None:
        if event.done == 0:  # a new ``measure`` call (the hybrid source makes one per round)
            self._done = 0
        self.new += event.done - self._done
        self._done = event.done
        if self.forward is not None:
            self.forward(event)

    def wrap(self, measure: Callable[[list[Any]], list[Any]]) -> Callable[[list[Any]], list[Any]]:
        def counted(tasks: list[Any]) -> list[Any]:
            records = measure(tasks)
            self.tasks, self.failed = len(tasks), sum(not record.ok for record in records)
            return records

        return counted


# ---------------------------------------------------------------------------------------------------- tune
def solver_names(solver: str | Sequence[str]) -> tuple[str, ...]:
    """``"pbqp"``, ``"pbqp,ilp"`` or a sequence of names as a tuple of distinct names."""
    names = tuple(n.strip() for n in (solver.split(",") if isinstance(solver, str) else solver))
    if not names or not all(names):
        raise SearchError(f"no solver named in {solver!r}")
    if len(set(names)) != len(names):
        raise SearchError(f"a solver is named twice in {solver!r}")
    return names


def tune(
    model: str | tvm.IRModule,
    out: str | Path,
    *,
    solver: str | Sequence[str] = "auto",
    time_limit: float | None = None,
    repeat: int = 10,
    calibrate: int = 1,
    echo: Callable[[str], None] = print,
    **extract_args: Any,
) -> dict[str, Any]:
    """Measure, solve, export, check and time ``model``'s plans and the uniform baselines; with ``calibrate``,
    profile them inside the network and re-solve on calibrated costs (``experiments.calibrate``).

    Parameters
    ----------
    model : str or tvm.IRModule
        As ``extract`` (which also takes every other keyword: name, batch, image_size, input_shape, seed, threads,
        space_size, layouts, cache, costs, progress).
    out : path
        Directory for ``problem.json``, ``plan.json`` and its picture ``plan.svg`` (``experiments.show``),
        ``summary.json`` and the exported ``artifact/``.
    solver : str or sequence of str
        One or more ``solvers`` solvers by name (``"pbqp,ilp"``). Each solver's plan is exported, checked and timed
        in the same interleaved rounds as the baselines (identical plans once); the lowest-cost plan is *the* plan
        (``plan.json``, ``artifact/``) and, with several solvers, each one's is also ``plans/<solver>.json``. With
        several solvers, one that finds no plan is reported and the others go on.
    time_limit : float, optional
        Seconds each solver may spend (default: the solver's own).
    repeat : int
        Rounds of the interleaved end-to-end latency measurement (see ``interleaved_latency``).
    calibrate : int
        Calibration rounds at most (default 1; 0: none, the plans predicted by isolated timings alone); they stop when
        the solvers' plan no longer changes. The default is what predicted the networks measured within 5%
        (docs/measurements.md). Every plan's
        predicted latency is then its calibrated problem cost plus the unpriced time of the other plans, carried to
        the machine's speed of the last timing where that came after the last round (``window``: how the baselines
        timed in both moved; ``predicted_calibration_window_ms`` before it), and ``summary["calibration"]`` lists
        each round's predictions and measurements.
    echo : callable
        Receives each printed line of the summary.

    Returns
    -------
    dict
        The summary written to ``summary.json``.

    Raises
    ------
    SearchError, SolverError
        Bad input, no solver finding a finite-cost plan, or a plan failing the numerical check.
    """
    from experiments.show import draw_plan
    from search.host import make_target
    from solvers.base import make_solver

    if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 1:
        raise SearchError(f"repeat must be a positive integer, got {repeat!r}")
    if not isinstance(calibrate, int) or isinstance(calibrate, bool) or calibrate < 0:
        raise SearchError(f"calibrate must be a non-negative integer (rounds), got {calibrate!r}")
    chosen = [make_solver(name, **({} if time_limit is None else {"time_limit": time_limit}))
              for name in solver_names(solver)]
    extracted = extract(model, **extract_args)
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    extracted.problem.save(directory / "problem.json")
    echo(f"solving with {', '.join(solver.name for solver in chosen)}")
    solutions, errors = _solve_all(extracted.problem, chosen)
    best = min(solutions, key=lambda name: solutions[name].cost)
    plans = _save_plans(extracted, solutions, best, directory)
    keep = {f"solver:{best}": directory / TUNED_ARTIFACT}
    check = extract_args if calibrate else None
    results, load, profiles, drift = _timed(extracted, plans, repeat=repeat, keep=keep, profile=calibrate > 0,
                                            check=check, echo=echo)
    rounds, measured_first, skipped, round_plans = [], extracted, None, plans
    for index in range(1, calibrate + 1):
        if drift.disturbed:
            skipped = f"{drift.describe()}, twice running: those profiles were not kept"
            echo(f"warning: calibration stopped: {skipped}")
            break
        echo(f"calibration round {index}: the profiles' in-network times priced into the problem, solved again")
        extracted, solutions, round_ = _calibration_round(index, model, extracted, plans, results, profiles, chosen,
                                                          extract_args, drift.ratio)
        rounds.append(round_)
        round_plans = plans
        if not round_.plan_changed:
            break
        best = min(solutions, key=lambda name: solutions[name].cost)
        plans = _save_plans(extracted, solutions, best, directory)
        keep = {f"solver:{best}": directory / TUNED_ARTIFACT}
        results, load, profiles, drift = _timed(extracted, plans, repeat=repeat, keep=keep, profile=index < calibrate,
                                                check=check, echo=echo)
        extracted.problem.save(directory / "problem.json")
    if rounds:
        extracted = replace(extracted, tasks=measured_first.tasks, new=measured_first.new,
                            failed=measured_first.failed, seconds=measured_first.seconds)
        predicted = predict_with_offsets(extracted.problem, plans, rounds[-1].offset_ms)
        measured = {label: result["latency"]["median_ms"] for label, result in results.items()}
        window = window_factors(plans, measured, round_plans, rounds[-1].measured_ms)
        for label, result in results.items():
            result["predicted_isolated_ms"] = predicted_cost(measured_first.problem, plans[label])
            result["predicted_calibration_window_ms"] = predicted[label]
            result["window"] = window[label]
            result["predicted_ms"] = predicted[label] * window[label]
    baselines = {name: results.pop(name) for name in list(results) if not name.startswith("solver:")}
    per_solver = {name: {**_solution_dict(solution), **results[f"solver:{name}"]} for name, solution in
                  solutions.items()}
    for entry in per_solver.values():
        entry["speedup"] = {name: result["latency"]["median_ms"] / entry["latency"]["median_ms"]
                            for name, result in baselines.items()}
    tuned = results[f"solver:{best}"]
    for result in baselines.values():
        result["speedup"] = result["latency"]["median_ms"] / tuned["latency"]["median_ms"]
    summary = _summary(extracted, solutions[best], tuned, baselines, make_target(extracted.problem.meta["threads"]),
                       directory)
    summary["load_average_1min"] = {"before_latency": load[0], "after_latency": load[1]}
    if calibrate:
        summary["calibration"] = {"rounds": [r.to_dict() for r in rounds],
                                  "converged": bool(rounds) and not rounds[-1].plan_changed, "skipped": skipped}
        summary["drift"] = {"ratio": drift.ratio, "disturbed": drift.disturbed, "kernels": len(drift.times)}
    if len(chosen) > 1:
        summary["solvers"] = {**per_solver, **{name: {"solver": name, "error": error} for name, error in
                                               errors.items()}}
    draw_plan(directory / "plan.json", directory / PICTURE, graph=extracted.graph)
    _write_json(directory / "summary.json", summary)
    for line in format_summary(summary):
        echo(line)
    return summary


def _timed(extracted: Extracted, plans: dict[str, Any], *, repeat: int, keep: dict[str, Path], profile: bool,
           check: dict[str, Any] | None, echo: Callable[[str], None]) -> tuple[dict, list, dict, Drift | None]:
    """``time_plans`` (profiling with ``profile``), then with ``check`` (the extraction's arguments) the drift check
    of ``experiments.calibrate``: a disturbed window is timed (and profiled) once more. The drift is None without
    ``check``."""
    echo(timing_line(plans, repeat, profile))
    runs = PROFILE_RUNS if profile else 0
    results, load, profiles = time_plans(extracted, plans, repeat=repeat, keep=keep, profile_runs=runs)
    if check is None:
        return results, load, profiles, None
    source, cache = _measured_source(check), check.get("cache", DEFAULT_CACHE)
    drift = check_drift(extracted, plans, source, cache)
    if drift.disturbed:
        again = "timing and profiling the plans again" if profile else "timing the plans again"
        echo(f"warning: {drift.describe()}: the machine is slower than when the costs were measured; {again}")
        results, load, profiles = time_plans(extracted, plans, repeat=repeat, keep=keep, profile_runs=runs)
        drift = check_drift(extracted, plans, source, cache)
    return results, load, profiles, drift


def _measured_source(extract_args: dict[str, Any]) -> Any:
    """The measured source with the timing method the extraction's costs used (the default unless they say)."""
    from cost_models.sources import MeasuredSource, cost_source

    return MeasuredSource(getattr(cost_source(extract_args.get("costs", "measured")), "timing", DEFAULT_TIMING))


def _calibration_round(index: int, model: Any, extracted: Extracted, plans: dict[str, Any],
                       results: dict[str, dict[str, Any]], profiles: dict[str, Any], chosen: list,
                       extract_args: dict[str, Any], drift: float) -> tuple[Extracted, dict[str, Any], Round]:
    """Keep the profiles' in-network times, price the problem again with the calibrated source, predict the
    measured plans and solve again: the calibrated extraction, the solutions, and the round (whether the best plan
    changed; see ``experiments.calibrate``)."""
    from cost_models.sources import CalibratedSource

    source = _measured_source(extract_args)
    measured = {label: result["latency"]["median_ms"] for label, result in results.items()}
    keep_network_times(extracted, plans, profiles, measured, source, extract_args.get("cache", DEFAULT_CACHE))
    timing = source.timing
    calibrated = extract(model, **{**extract_args, "costs": CalibratedSource(timing)})
    predicted, offsets = predict(calibrated.problem, plans, measured)
    solutions, _ = _solve_all(calibrated.problem, chosen)
    best = min(solutions, key=lambda name: solutions[name].cost)
    chosen_plan = calibrated.plan(solutions[best])
    current = plans[f"solver:{best}"] if f"solver:{best}" in plans else next(
        plan for label, plan in plans.items() if label.startswith("solver:"))
    stats = calibrated.problem.meta["costs"].get("calibration", {})
    round_ = Round(index, predicted, measured, offsets, stats, chosen_plan.choices != current.choices, drift)
    return calibrated, solutions, round_


def _solve_all(problem: Problem, chosen: list) -> tuple[dict[str, Any], dict[str, str]]:
    """Each solver's solution (with the LP bound) by name, and the error of each that found no plan. A single
    solver's failure is raised; with several, only all of them failing is."""
    from solvers import solve
    from solvers.base import SolverError

    solutions, errors = {}, {}
    for instance in chosen:
        try:
            solution = solve(problem, instance, bound=True)
            if not solution.assignment:
                raise SolverError(f"{instance.name} found no finite-cost plan (status: {solution.status})")
        except SolverError as exc:
            if len(chosen) == 1:
                raise
            errors[instance.name] = str(exc)
            continue
        solutions[instance.name] = solution
    if not solutions:
        raise SolverError("no solver found a plan: " + "; ".join(f"{n}: {e}" for n, e in errors.items()))
    return solutions, errors


def _save_plans(extracted: Extracted, solutions: dict[str, Any], best: str, directory: Path) -> dict[str, Any]:
    """Every plan to export and time: ``solver:<name>`` per solver and the uniform baselines by name."""
    from search.plan import BASELINES, baseline_plan

    plans = {f"solver:{name}": extracted.plan(solution) for name, solution in solutions.items()}
    plans[f"solver:{best}"].save(directory / "plan.json")
    if len(solutions) > 1:
        (directory / "plans").mkdir(exist_ok=True)
        for name in solutions:
            plans[f"solver:{name}"].save(directory / "plans" / f"{name}.json")
    for name in BASELINES:
        plans[name] = baseline_plan(extracted.graph, name, extracted.model, extracted.args)
    return plans


def _solution_dict(solution) -> dict[str, Any]:
    return {key: value for key, value in solution.to_dict().items() if key != "assignment"}


def _summary(extracted: Extracted, solution, tuned, baselines, target, directory: Path) -> dict[str, Any]:
    import tvm

    problem = extracted.problem
    return {
        "model": extracted.model,
        "args": extracted.args,
        "input_shapes": {name: list(shape) for name, shape in extracted.graph.inputs},
        "threads": problem.meta["threads"],
        "target": {"kind": target.kind.name, "mcpu": str(target.attrs.get("mcpu", "")),
                   "num-cores": int(target.attrs.get("num-cores", 0))},
        "versions": {"tessera": importlib.metadata.version("tessera"), "tvm": tvm.__version__,
                     "python": platform.python_version()},
        "problem": {"nodes": problem.num_nodes, "edges": len(problem.edges),
                    "candidates": sum(problem.domain_sizes), "layouts": problem.meta["layouts"],
                    "space_size": problem.meta["space_size"]},
        "measurements": {**problem.meta["costs"], "tasks": extracted.tasks, "new": extracted.new,
                         "cached": extracted.tasks - extracted.new - problem.meta["costs"].get("predicted", 0),
                         "failed": extracted.failed, "seconds": extracted.seconds},
        "solver": _solution_dict(solution),
        "plan": tuned,
        "baselines": baselines,
        "files": {"problem": str(directory / "problem.json"), "plan": str(directory / "plan.json"),
                  "artifact": str(directory / TUNED_ARTIFACT), "picture": str(directory / PICTURE)},
    }


def _shapes(shapes: dict[str, list[int]]) -> str:
    return ", ".join(f"{name} {'x'.join(map(str, shape))}" for name, shape in shapes.items())


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g} ms"


def _solver_line(solver: dict[str, Any]) -> str:
    if "error" in solver:
        return f"solver {solver['solver']}: no plan ({solver['error']})"
    gap = "-" if solver["gap"] is None else f"{100 * solver['gap']:.2f}%"
    line = (f"solver {solver['solver']}: cost {_ms(solver['cost'])}, {solver['status']}, gap {gap} "
            f"(lower bound {_ms(solver['lower_bound'])}), {solver['seconds']:.3g} s")
    if "latency" in solver:
        best = min(solver["speedup"].items(), key=lambda item: item[1])
        line += (f"; measured {_ms(solver['latency']['median_ms'])} median (spread "
                 f"{_ms(solver['latency']['spread_ms'])}), {best[1]:.2f}x the best baseline ({best[0]})")
    return line


def _window(result: dict[str, Any]) -> str:
    window = result.get("window", 1.0)
    return "" if window == 1.0 else (f"; {_ms(result['predicted_calibration_window_ms'])} at the calibration "
                                     f"round's speed, the machine x{window:.3f} since")


def _predicted_note(m: dict[str, Any]) -> str:
    if "predicted" not in m:  # a source that predicts nothing (measured)
        return ""
    return f"; {m['source']} costs from {m['model']}: {m['predicted']} of {m['tasks']} tasks predicted"


def _round_line(entry: dict[str, Any], solver: str) -> str:
    """One calibration round: each measured plan's prediction error, the calibration factors, the plan's fate."""
    errors = ", ".join(f"{label.removeprefix('solver:')} {100 * (entry['predicted_ms'][label] / ms - 1):+.1f}%"
                       for label, ms in entry["measured_ms"].items())
    factors = ", ".join(f"{kind} x{factor:.2f}" for kind, factor in entry["calibration"].get("factors", {}).items())
    fate = f"{solver} chose another plan" if entry["plan_changed"] else "the plan stays"
    return f"calibration round {entry['index']}: predicted vs measured {errors}; factors {factors or '-'}; {fate}"


def format_summary(summary: dict[str, Any]) -> list[str]:
    """The printed lines of a ``tune`` summary."""
    s, p, m = summary, summary["problem"], summary["measurements"]
    lines = [
        f"{s['model']} (input {_shapes(s['input_shapes'])}, {s['threads']} threads): {p['nodes']} nodes, "
        f"{p['edges']} edges, {p['candidates']} candidates",
        f"measurements: {m['tasks']} needed, {m['new']} new, {m['cached']} from the cache, {m['failed']} failed "
        f"({m['seconds']:.1f} s; cache {m.get('cache', '-')})" + _predicted_note(m),
        *(_solver_line(solver) for solver in s.get("solvers", {s["solver"]["solver"]: s["solver"]}).values()),
    ]
    plan = "plan" if "solvers" not in s else f"plan ({s['solver']['solver']}, the lowest cost)"
    rows = [(plan, s["plan"])] + [(f"baseline {name}", result) for name, result in s["baselines"].items()]
    for label, result in rows:
        latency = result["latency"]
        speedup = f", plan speed-up {result['speedup']:.2f}x" if "speedup" in result else ""
        isolated = f" (isolated timings: {_ms(result['predicted_isolated_ms'])}{_window(result)})" \
            if "predicted_isolated_ms" in result else ""
        lines.append(f"{label}: predicted {_ms(result['predicted_ms'])}{isolated}, measured "
                     f"{_ms(latency['median_ms'])} median (spread {_ms(latency['spread_ms'])}){speedup}")
    load = s["load_average_1min"]
    latency = s["plan"]["latency"]
    pool = "" if latency["runtime_threads"] == latency["threads"] else \
        f" (TVM's thread pool ran {latency['runtime_threads']} threads: it was started before threads were set)"
    lines.append(f"end-to-end latency: {latency['rounds']} interleaved rounds per plan; 1-min load average "
                 f"{load['before_latency']:.2f} -> {load['after_latency']:.2f} on {usable_cores()} cores{pool}")
    for entry in s.get("calibration", {}).get("rounds", []):
        lines.append(_round_line(entry, s["solver"]["solver"]))
    if s.get("calibration", {}).get("skipped"):
        lines.append(f"calibration stopped: {s['calibration']['skipped']}")
    if s.get("drift", {}).get("disturbed"):
        lines.append(f"warning: the latencies above were timed while {s['drift']['kernels']} of the plans' kernels ran "
                     f"x{s['drift']['ratio']:.2f} their recorded time: the machine was disturbed; tune again later")
    extra = ", plans/" if "solvers" in s else ""
    lines.append(f"numerical check of the plan: relative error {s['plan']['relative_error']:.2g}; wrote "
                 f"{Path(s['files']['plan']).parent}: plan.json, {PICTURE}, problem.json, summary.json, "
                 f"{TUNED_ARTIFACT}/{extra}")
    return lines


def _write_json(path: Path, data: dict[str, Any]) -> None:
    from solvers.problem import write_json_atomic

    write_json_atomic(path, data)
