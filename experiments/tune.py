"""The whole loop: measure a model's candidate space, solve the cost problem, export and check the plan, time it
against the uniform baselines in the same process, and calibrate the costs on the plans' in-network profiles.

``tune(model, out, ...)`` writes ``plan.json``, ``problem.json``, ``summary.json`` and the ``artifact/`` directory;
the measured problem alone is ``experiments.extraction.extract``.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments.budget import budget_for, solve_within
from experiments.calibrate import (
    PROFILE_RUNS,
    Round,
    Unpriced,
    check_drift,
    keep_network_times,
    predict,
    window_factors,
)
from experiments.extraction import Extracted, extract
from experiments.phases import PhaseClock
from experiments.solving import Solved, make_solvers, solve_all
from experiments.timing import PlanExports, predicted_cost, time_plans, timing_line, unsteady_text
from experiments.tune_summary import (
    PICTURE,
    TUNED_ARTIFACT,
    PlanResult,
    format_summary,
    solver_label,
    summary,
    time_spent,
)
from search.errors import SearchError

if TYPE_CHECKING:
    import tvm

    from cost_models.drift import Drift
    from cost_models.sources import CostSource
    from experiments.timing import TimedPlans
    from search.plan import Plan


REPLACED = "replaced"
"""The label under which a calibration round's new plan is timed beside the plan it would replace."""


@dataclass(frozen=True)
class TimedPass:
    """One pass of the loop: a problem solved, every solver's plan and the baselines exported and timed (``plans``
    by label: ``solver_label(name)`` or the baseline's name), and the drift check after it (None without one)."""

    extracted: Extracted
    solved: Solved
    plans: dict[str, Plan]
    timed: TimedPlans
    drift: Drift | None

    @property
    def best_plan(self) -> Plan:
        return self.plans[solver_label(self.solved.best)]


def tune(
    model: str | tvm.IRModule,
    out: str | Path,
    *,
    solver: str | Sequence[str] = "auto",
    time_limit: float | None = None,
    repeat: int = 10,
    calibrate: int = 1,
    baselines: Sequence[str] | None = None,
    costs: str | CostSource | None = None,
    echo: Callable[[str], None] = print,
    **extract_args: Any,
) -> dict[str, Any]:
    """Measure, solve, export, check and time ``model``'s plans and the uniform baselines; with ``calibrate``,
    profile them inside the network and re-solve on calibrated costs (``experiments.calibrate``). Returns the
    summary written to ``summary.json`` (``experiments.tune_summary``); raises ``SearchError`` or ``SolverError``
    for bad input, no solver finding a finite-cost plan, or a plan failing the numerical check.

    ``model`` and every other keyword (name, batch, image_size, input_shape, seed, threads, space_size, layouts,
    precision, max_error, cache, progress, ...) are ``extract``'s; with bf16 candidates (``precision`` bf16
    or auto) every plan is held to ``max_error`` (default ``search.precision.DEFAULT_MAX_ERROR``; see
    ``experiments.budget``). ``out`` receives ``problem.json``, ``plan.json``, its picture ``plan.svg``,
    ``summary.json`` (written last) and the exported ``artifact/``, or, should the tune fail or be interrupted, nothing
    (see ``_complete_or_absent``). ``solver`` names one or more solvers (``"pbqp,ilp"``), each given
    ``time_limit`` seconds if set: each one's plan is exported, checked and timed in the same interleaved rounds as the
    baselines; the lowest-cost plan is *the* plan, and with several solvers each one's is also ``plans/<solver>.json``
    (one that finds no plan is reported, the others go on). ``repeat``: rounds of the interleaved timing
    (``experiments.timing``). ``calibrate``: calibration rounds at most (0: the plans are predicted by isolated
    timings alone; docs/fidelity.md has the default's figures); they stop when the plan no longer changes or when a
    new plan, timed beside the one it would replace, runs slower (that one is then kept), and every plan's
    prediction is then its calibrated cost plus its unpriced time, its calls priced by the profiled calls of the
    other plans (``experiments.calibrate.Unpriced``), carried to the machine's speed of the last timing
    (``window``). ``baselines``: the uniform plans timed beside the solvers' (names of ``search.plan.UNIFORM``;
    default ``search.plan.BASELINES``, none: ``()``), their candidates also measured. ``costs``: a cost source or its
    name (``cost_models.sources``; default: ``selective`` where tessera ships a model for the host's vector unit, else
    ``measured``). The summary's ``time`` says where the run's wall time went, by phase (``experiments.phases``).
    ``echo`` receives each printed line.
    """
    from cost_models.sources import cost_source, default_source
    from experiments.show import draw_plan
    from solvers.problem import write_json_atomic

    started, clock = time.perf_counter(), PhaseClock()
    _check_counts(repeat, calibrate)
    chosen = make_solvers(solver, time_limit)
    source = cost_source(default_source() if costs is None else costs)
    extract_args = {**extract_args, "baselines": baselines, "costs": source}
    with clock.phase("measure"):
        extracted = extract(model, **extract_args)
    with _complete_or_absent(Path(out)) as directory, PlanExports(extracted) as exports:
        extracted.problem.save(directory / "problem.json")
        if line := _selective_line(source, extracted):
            echo(line)
        if extracted.int8_note:
            echo(f"note: {extracted.int8_note}")
        echo(f"solving with {', '.join(instance.name for instance in chosen)}")
        budget = budget_for(extracted)

        def solve(problem_of: Extracted) -> Solved:
            with clock.phase("solve"):
                if budget is None:
                    return solve_all(problem_of.problem, chosen)
                return solve_within(problem_of, lambda problem: solve_all(problem, chosen), budget, echo)

        first = _timed_pass(extracted, solved=solve(extracted), directory=directory, exports=exports, repeat=repeat,
                            profile=calibrate > 0, check=calibrate > 0, echo=echo, clock=clock)
        last, rounds, round_pass, skipped = _calibrate(first, model, solve, extract_args, directory, exports,
                                                       repeat=repeat, rounds=calibrate, echo=echo, clock=clock)
        with clock.phase("report"):
            report = _report(first, last, rounds, round_pass, directory)
            if budget is not None:
                report["budget"] = budget.to_dict()
            if calibrate:
                report["calibration"] = {"rounds": [r.to_dict() for r in rounds],
                                         "converged": bool(rounds) and not rounds[-1].plan_changed,
                                         "skipped": skipped}
            draw_plan(directory / "plan.json", directory / PICTURE, graph=extracted.graph,
                      error=report["plan"]["relative_error"])
        report["time"] = time_spent(clock, time.perf_counter() - started, extracted.spent)
        write_json_atomic(directory / "summary.json", report)
        for line in format_summary(report):
            echo(line)
    return report


@contextlib.contextmanager
def _complete_or_absent(directory: Path) -> Iterator[Path]:
    """``directory`` for a tune's output: created if missing and, should the tune fail or be interrupted, removed
    again if this run created it. An earlier output's ``summary.json`` (written last, the mark of a complete output)
    is removed first, so that a half-written output never has one."""
    created = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "summary.json").unlink(missing_ok=True)
    try:
        yield directory
    except BaseException:
        if created:
            shutil.rmtree(directory, ignore_errors=True)
        raise


def _selective_line(source: CostSource, extracted: Extracted) -> str | None:
    """What selective measurement with the shipped model measured, in one line (None for other sources)."""
    from cost_models.sources import SelectiveSource
    from search.isa import HOST

    if not isinstance(source, SelectiveSource) or source.model is not None:
        return None
    return (f"costs: selective, with the cost model tessera ships for {HOST.name} hosts: the candidates that can win "
            f"measured, {extracted.costs.get('predicted', 0)} of {extracted.tasks} tasks predicted (--costs measured "
            "measures every one)")


def _check_counts(repeat: int, calibrate: int) -> None:
    if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 1:
        raise SearchError(f"repeat must be a positive integer, got {repeat!r}")
    if not isinstance(calibrate, int) or isinstance(calibrate, bool) or calibrate < 0:
        raise SearchError(f"calibrate must be a non-negative integer (rounds), got {calibrate!r}")


def _calibrate(first: TimedPass, model: Any, solve: Callable[[Extracted], Solved], extract_args: dict[str, Any],
               directory: Path, exports: PlanExports, *, repeat: int, rounds: int, echo: Callable[[str], None],
               clock: PhaseClock) -> tuple[TimedPass, list[Round], TimedPass, str | None]:
    """Up to ``rounds`` calibration rounds from the first pass: the last pass (its problem and solutions the
    calibrated ones), the rounds, the pass the last round calibrated on, and why calibration stopped on a disturbed
    machine (None if it did not)."""
    current, done, calibrated_on = first, [], first
    for index in range(1, rounds + 1):
        if current.drift.disturbed:
            skipped = f"{current.drift.describe()}, twice running: those profiles were not kept"
            echo(f"warning: calibration stopped: {skipped}")
            return current, done, calibrated_on, skipped
        echo(f"calibration round {index}: the profiles' in-network times priced into the problem, solved again")
        with clock.phase("calibration"):
            extracted, solved, round_ = _calibration_round(index, model, current, solve, extract_args)
        done.append(round_)
        calibrated_on = current
        if not round_.plan_changed:  # the plans as timed, predicted and reported on the calibrated problem
            return replace(current, extracted=extracted, solved=solved), done, calibrated_on, None
        replaced = current.plans.get(solver_label(solved.best), current.best_plan)
        timed = _timed_pass(extracted, solved=solved, directory=directory, exports=exports, repeat=repeat,
                            profile=index < rounds, check=True, echo=echo, clock=clock, replaced=replaced)
        extracted.problem.save(directory / "problem.json")
        current, done[-1] = _faster_of(timed, replaced, round_, directory, exports, clock)
        if done[-1].kept_replaced:  # the summary's round line says so
            return current, done, calibrated_on, None
    return current, done, calibrated_on, None


def _faster_of(timed: TimedPass, replaced: Plan, round_: Round, directory: Path, exports: PlanExports,
               clock: PhaseClock) -> tuple[TimedPass, Round]:
    """The pass that timed a round's new plans beside the plan the best one would replace (``REPLACED``), without
    that entry: as timed where the new plan ran faster, else with the replaced plan back in the best solver's place
    (its solution the same choices costed on the new problem, saved as ``plan.json`` and the artifact); and the
    round with both latencies (``Round.side_by_side_ms``)."""
    from cost_models.pricing import plan_assignment

    best = solver_label(timed.solved.best)
    timings = {label: timing for label, timing in timed.timed.timings.items() if label != REPLACED}
    side_by_side = {"new": timings[best].median_ms, "replaced": timed.timed.timings[REPLACED].median_ms}
    round_ = replace(round_, side_by_side_ms=side_by_side)
    plans = {label: plan for label, plan in timed.plans.items() if label != REPLACED}
    profiles = {label: profile for label, profile in timed.timed.profiles.items() if label != REPLACED}
    calls = {label: computes for label, computes in timed.timed.calls.items() if label != REPLACED}
    solved = timed.solved
    if round_.kept_replaced:
        problem, name = timed.extracted.problem, timed.solved.best
        assignment = plan_assignment(problem, replaced.choices)
        solution = replace(solved.solutions[name], assignment=assignment, cost=problem.evaluate(assignment),
                           status="feasible")
        solved = replace(solved, solutions={**solved.solutions, name: solution})
        plans[best], timings[best] = replaced, timed.timed.timings[REPLACED]
        calls[best] = timed.timed.calls[REPLACED]
        profiles.pop(best, None)  # the new plan's: the rounds end here
        _save_best(plans[solver_label(solved.best)], solved, directory, exports, clock)
    return replace(timed, solved=solved, plans=plans, timed=replace(timed.timed, timings=timings, profiles=profiles,
                                                                    calls=calls)), round_


def _save_best(plan: Plan, solved: Solved, directory: Path, exports: PlanExports, clock: PhaseClock) -> None:
    """``plan``, exported before, as the tune's plan: ``plan.json`` (and ``plans/<solver>.json`` with several
    solvers) and the artifact."""
    plan.save(directory / "plan.json")
    if len(solved.solutions) > 1:
        plan.save(directory / "plans" / f"{solved.best}.json")
    where, _ = exports.export(plan, clock)
    with clock.phase("export"):
        shutil.rmtree(directory / TUNED_ARTIFACT, ignore_errors=True)
        shutil.copytree(where, directory / TUNED_ARTIFACT)


def _timed_pass(extracted: Extracted, *, solved: Solved, directory: Path, exports: PlanExports, repeat: int,
                profile: bool, check: bool, echo: Callable[[str], None], clock: PhaseClock,
                replaced: Plan | None = None) -> TimedPass:
    """Save the solvers' plans, then export (those ``exports`` has not yet), check and time them with the baselines
    and ``replaced`` (labelled ``REPLACED``), profiling with ``profile``; with ``check``, the drift check of
    ``experiments.calibrate``. A disturbed window (the drift check) or an unsteady timing
    (``experiments.timing.UNSTEADY``) is timed (and profiled) once more."""
    plans = _save_plans(extracted, solved, directory)
    baselines = [label for label in plans if label not in _solver_labels(solved)]
    if replaced is not None:
        plans[REPLACED] = replaced
    keep = {solver_label(solved.best): directory / TUNED_ARTIFACT}
    runs = PROFILE_RUNS if profile else 0
    probed = {label: plan for label, plan in plans.items() if label not in baselines}
    echo(timing_line(plans, baselines, repeat, profile, exports, replaced=replaced is not None))
    timed = time_plans(extracted, plans, repeat=repeat, keep=keep, profile_runs=runs, clock=clock, exports=exports)
    drift = _drift(extracted, probed, clock) if check else None
    reasons = [f"{drift.describe()}: the machine is slower than when the costs were measured"] \
        if drift is not None and drift.disturbed else []
    if unsteady := timed.unsteady():
        reasons.append(unsteady_text(unsteady))
    if reasons:
        again = "timing and profiling the plans again" if profile else "timing the plans again"
        echo(f"warning: {'; '.join(reasons)}; {again}")
        timed = time_plans(extracted, plans, repeat=repeat, keep=keep, profile_runs=runs, clock=clock, exports=exports)
        drift = _drift(extracted, probed, clock) if check else None
    return TimedPass(extracted, solved, plans, timed, drift)


def _drift(extracted: Extracted, probed: dict[str, Plan], clock: PhaseClock) -> Drift:
    with clock.phase("drift_check"):
        return check_drift(extracted, probed)


def _calibration_round(index: int, model: Any, current: TimedPass, solve: Callable[[Extracted], Solved],
                       extract_args: dict[str, Any]) -> tuple[Extracted, Solved, Round]:
    """Keep the profiles' in-network times, price the problem again with the calibrated source, predict the
    measured plans and solve again: the calibrated extraction, the solutions, and the round (whether the best plan
    changed; see ``experiments.calibrate``)."""
    from cost_models.sources import cost_source

    measured = current.timed.medians()
    keep_network_times(current.extracted, current.plans, current.timed.profiles, measured,
                       chosen=_solver_labels(current.solved))
    source = cost_source(extract_args["costs"]).calibrated(current.extracted.settings.timing)
    calibrated = extract(model, **{**extract_args, "costs": source})
    unpriced = Unpriced.fit(calibrated.graph, calibrated.problem, current.plans, current.timed.profiles, measured)
    predicted, offsets = predict(calibrated.problem, calibrated.graph, current.plans, current.timed.calls, unpriced)
    solved = solve(calibrated)
    chosen_plan = calibrated.plan(solved.solutions[solved.best])
    previous = current.plans.get(solver_label(solved.best), current.best_plan)
    stats = calibrated.costs.get("calibration", {})
    changed = chosen_plan.choices != previous.choices
    return calibrated, solved, Round(index, predicted, measured, offsets, stats, changed, current.drift.ratio,
                                     calibrated.new, unpriced=unpriced)


def _report(first: TimedPass, last: TimedPass, rounds: list[Round], calibrated_on: TimedPass,
            directory: Path) -> dict[str, Any]:
    """The summary of the last pass, with the first pass's measurement counts (the tasks measured counting the
    calibration rounds' too) and, after a drift check, its result."""
    first_counts = {"tasks": first.extracted.tasks, "new": first.extracted.new + sum(r.measured for r in rounds),
                    "failed": first.extracted.failed, "seconds": first.extracted.seconds}
    solved, results = last.solved, _results(first, last, rounds, calibrated_on)
    report = summary(replace(last.extracted, **first_counts), solved.solutions, solved.errors, solved.best, results,
                     last.timed, directory)
    if last.timed.wakeup is not None and calibrated_on.timed is not last.timed \
            and calibrated_on.timed.wakeup is not None:
        report["wakeup"]["calibration"] = {"before_latency": calibrated_on.timed.wakeup[0].to_dict(),
                                           "after_latency": calibrated_on.timed.wakeup[1].to_dict()}
        report["wakeup"]["changed_since_calibration"] = last.timed.machine_changed_from(calibrated_on.timed)
    if last.drift is not None:
        report["drift"] = {"ratio": last.drift.ratio, "disturbed": last.drift.disturbed,
                           "kernels": len(last.drift.times),
                           "probes": [{"key": key, "recorded_ms": then, "now_ms": now}
                                      for key, (then, now) in last.drift.times.items()]}
    return report


def _results(first: TimedPass, last: TimedPass, rounds: list[Round], calibrated_on: TimedPass
             ) -> dict[str, PlanResult]:
    """Each timed plan's final prediction: its problem cost, or with calibration rounds the calibrated cost plus its
    unpriced time as the last round's profiles price it, carried by the window factor to the speed of the last
    timing."""
    timings = last.timed.timings
    if not rounds:
        return {label: PlanResult(timing, timing.predicted_ms) for label, timing in timings.items()}
    predicted, offsets = predict(last.extracted.problem, last.extracted.graph, last.plans, last.timed.calls,
                                 rounds[-1].unpriced)
    window = window_factors(last.plans, last.timed.medians(), calibrated_on.plans, rounds[-1].measured_ms)
    return {label: PlanResult(timing, predicted[label] * window[label],
                              predicted_cost(first.extracted.problem, last.plans[label]), predicted[label],
                              window[label], offsets[label])
            for label, timing in timings.items()}


def _solver_labels(solved: Solved) -> set[str]:
    return {solver_label(name) for name in solved.solutions}


def _save_plans(extracted: Extracted, solved: Solved, directory: Path) -> dict[str, Plan]:
    """Every plan to export and time by label: each solver's (the best one saved as ``plan.json``, and with several
    solvers each as ``plans/<solver>.json``) and the uniform baselines."""
    from search.plan import baseline_plan

    plans = {solver_label(name): extracted.plan(solution) for name, solution in solved.solutions.items()}
    plans[solver_label(solved.best)].save(directory / "plan.json")
    if len(solved.solutions) > 1:
        (directory / "plans").mkdir(exist_ok=True)
        for name in solved.solutions:
            plans[solver_label(name)].save(directory / "plans" / f"{name}.json")
    for name in extracted.baselines:
        plans[name] = baseline_plan(extracted.graph, name, extracted.model, extracted.args)
    return plans
