"""Export, check and time plans end to end: each distinct plan exported and checked once, then all timed in
interleaved rounds in this process (the harness that defines a plan's measured latency), and profiled inside the
network on request."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments.phases import PhaseClock

if TYPE_CHECKING:
    from cost_models.wakeup import Wakeup
    from experiments.extraction import Extracted
    from search.artifact import Artifact
    from search.emit import Origin
    from search.plan import Plan
    from search.profile import Profile


UNSTEADY = 0.10
"""A timing is unsteady where some plan's rounds have a standard deviation of at least this share of their mean
(pyperf's rule for a result that "may be unstable"): on a shared host whose speed switches within seconds, a timing
that spans a switch spreads each plan's rounds between two speeds, unevenly by plan (docs/fidelity.md)."""


def unsteady_shares(latencies: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """Of ``latencies`` (``interleaved_latency``'s figures by label), the labels whose rounds' standard deviation is
    at least ``UNSTEADY`` of their mean, with that share."""
    shares = {label: latency["stdev_ms"] / latency["mean_ms"] for label, latency in latencies.items()
              if latency.get("mean_ms")}
    return {label: share for label, share in shares.items() if share >= UNSTEADY}


def unsteady_text(shares: Mapping[str, float]) -> str:
    """What ``unsteady_shares`` found, in words."""
    return (f"the timing's rounds spread by up to {100 * max(shares.values()):.0f}% of their mean (standard deviation; "
            f"{100 * UNSTEADY:.0f}% or more is unsteady) for {len(shares)} of the plans")


@dataclass(frozen=True)
class PlanTiming:
    """One plan exported, checked against the stock build and timed: its problem cost (``predicted_ms``, None where
    the problem forbids a choice), the numerical check's ``relative_error`` and the interleaved rounds' ``latency``
    (``interleaved_latency``'s figures: ``median_ms``, ``spread_ms``, ...)."""

    predicted_ms: float | None
    relative_error: float
    latency: dict[str, Any]

    @property
    def median_ms(self) -> float:
        return self.latency["median_ms"]


@dataclass(frozen=True)
class TimedPlans:
    """``time_plans``' result: each label's ``PlanTiming`` (labels with identical plans share one), the 1-minute load
    average before and after timing, each distinct plan's profile inside the network when asked for, the
    cross-core wake-up round trip before and after timing (``cost_models.wakeup``; None where not probed), and what
    each label's exported calls compute, in order (``search.profile.listed_calls``)."""

    timings: dict[str, PlanTiming]
    load: tuple[float, float]
    profiles: dict[str, Profile] = field(default_factory=dict)
    wakeup: tuple[Wakeup, Wakeup] | None = None
    calls: dict[str, tuple[tuple[Origin, ...], ...]] = field(default_factory=dict)

    def machine_changed_from(self, other: TimedPlans) -> bool:
        """Whether the cores woke each other at another speed than while ``other``'s plans were timed, steadily:
        each timing's two probes agree and the two timings' do not (the machine was seen to switch for a second and
        back). Timings of two such states do not predict each other."""
        if self.wakeup is None or other.wakeup is None:
            return False
        steady = not self.wakeup[0].changed(self.wakeup[1]) and not other.wakeup[0].changed(other.wakeup[1])
        return steady and self.wakeup[1].changed(other.wakeup[1])

    def medians(self) -> dict[str, float]:
        """The measured latency (median, ms) by label."""
        return {label: timing.median_ms for label, timing in self.timings.items()}

    def unsteady(self) -> dict[str, float]:
        """The labels whose rounds spread by ``UNSTEADY`` or more (``unsteady_shares``)."""
        return unsteady_shares({label: timing.latency for label, timing in self.timings.items()})


def timing_line(plans: Mapping[str, Plan], baselines: list[str], repeat: int, profile: bool,
                exports: PlanExports | None = None, replaced: bool = False) -> str:
    """What ``time_plans`` is about to do (with ``exports``, which already holds some of the plans; ``replaced``: one
    of them is the plan a calibrated one would replace), as one progress line."""
    distinct = {tuple(sorted(plan.choices.items())): plan for plan in plans.values()}
    before = sum(bool(exports and exports.holds(plan)) for plan in distinct.values())
    profiled = ", then profiled inside the network" if profile else ""
    which = f"the solver's and the uniform baselines {', '.join(baselines)}" if baselines else "no baselines"
    if replaced:
        which += ", and the plan the solver's would replace"
    reused = f"; {before} of them exported before" if before else ""
    return (f"exporting and checking {len(distinct)} distinct plans ({which}{reused}), timing them in {repeat} "
            f"interleaved rounds{profiled}")


def predicted_cost(problem: Any, plan: Any) -> float | None:
    """The problem's cost of ``plan`` (ms), None where the problem forbids one of its choices: a baseline runs every
    kernel at its default knobs, also one whose isolated measurement failed (a build that timed out, say)."""
    import math

    from cost_models.pricing import plan_cost

    cost = plan_cost(problem, plan.choices)
    return cost if math.isfinite(cost) else None


class PlanExports:
    """Plans of one extraction exported and checked, each distinct plan once, into a temporary directory that lives
    as long as this (a context manager): what the passes of one tune share, with the stock build's outputs every
    export is checked against, computed once. A plan's artifact is always loaded from the path it was first saved
    to (a process that loaded a library keeps using it for that path)."""

    def __init__(self, extracted: Extracted) -> None:
        self.extracted = extracted
        self._scratch = tempfile.TemporaryDirectory(prefix="tessera-plans-")
        self._reference: list | None = None
        self._done: dict[str, tuple[Path, float]] = {}

    def __enter__(self) -> PlanExports:
        return self

    def __exit__(self, *exc: object) -> None:
        self._scratch.cleanup()

    def holds(self, plan: Plan) -> bool:
        """Whether ``plan`` was exported before."""
        return self._key(plan) in self._done

    @staticmethod
    def _key(plan: Plan) -> str:
        return json.dumps(plan.to_dict(), sort_keys=True)

    def export(self, plan: Plan, clock: PhaseClock) -> tuple[Path, float]:
        """The directory of ``plan``'s artifact and its numerical check's relative error, exported now (charged to
        ``clock``'s ``export``) unless it was before."""
        from search.export import export, reference_outputs

        key = self._key(plan)
        if key not in self._done:
            settings = self.extracted.settings
            checked_on = self.extracted.calibration  # the calibration inputs where the search has them
            with clock.phase("export"):
                if self._reference is None and checked_on is None:
                    self._reference = reference_outputs(self.extracted.graph, settings.target, settings.seed)
                compiled = export(self.extracted.graph, plan, target=settings.target, threads=settings.threads,
                                  seed=settings.seed, reference=self._reference, max_error=self.extracted.max_error,
                                  checked_on=checked_on)
                where = compiled.save(Path(self._scratch.name) / f"plan{len(self._done)}")
            self._done[key] = where, compiled.manifest["numerical_check"]["relative_error"]
        return self._done[key]


def time_plans(extracted: Extracted, plans: Mapping[str, Plan], *, repeat: int,
               keep: Mapping[str, Path] | None = None, profile_runs: int = 0, clock: PhaseClock | None = None,
               exports: PlanExports | None = None) -> TimedPlans:
    """Export and check each distinct plan once, then time them all in interleaved rounds, with the extraction's
    settings (target, threads, seed).

    ``plans`` maps labels to ``Plan``s; the artifact of a label in ``keep`` is also copied to its directory. Labels
    with identical plans share one export and timing; ``exports`` (of an earlier call on the same model and settings)
    keeps the plans it exported before, none of which is exported again. With ``profile_runs``, each distinct plan is
    also profiled inside the network (``search.profile``). ``clock`` is charged the phases ``export``, ``latency``
    and ``profile``.
    """
    with contextlib.ExitStack() as stack:
        if exports is None:
            exports = stack.enter_context(PlanExports(extracted))
        return _time_exported(extracted, plans, exports, repeat=repeat, keep=keep or {}, profile_runs=profile_runs,
                              clock=PhaseClock() if clock is None else clock)


def _time_exported(extracted: Extracted, plans: Mapping[str, Plan], exports: PlanExports, *, repeat: int,
                   keep: Mapping[str, Path], profile_runs: int, clock: PhaseClock) -> TimedPlans:
    from cost_models.wakeup import probe_wakeup
    from search.artifact import load_artifact
    from search.profile import listed_calls, profile_artifact

    distinct: dict[tuple, str] = {}  # choices -> the first label with them
    artifacts, errors = {}, {}
    for label, plan in plans.items():
        key = tuple(sorted(plan.choices.items()))
        if key in distinct:
            continue
        distinct[key] = label
        where, errors[label] = exports.export(plan, clock)
        if label in keep:
            with clock.phase("export"):
                shutil.copytree(where, keep[label], dirs_exist_ok=True)
        artifacts[label] = load_artifact(where)
    before = os.getloadavg()[0]
    with clock.phase("latency"):
        before_wakeup = probe_wakeup()
        latencies = interleaved_latency(artifacts, rounds=repeat, threads=extracted.settings.threads)
        after_wakeup = probe_wakeup()
    wakeup = (before_wakeup, after_wakeup) if before_wakeup and after_wakeup else None
    load = (before, os.getloadavg()[0])
    profiles = {}
    if profile_runs:
        with clock.phase("profile"):
            profiles = {label: profile_artifact(artifact, runs=profile_runs, seed=extracted.settings.seed)
                        for label, artifact in artifacts.items()}
    results, calls = {}, {}
    for label, plan in plans.items():
        first = distinct[tuple(sorted(plan.choices.items()))]
        results[label] = PlanTiming(predicted_cost(extracted.problem, plan), errors[first], latencies[first])
        calls[label] = tuple(computes for _, computes in listed_calls(artifacts[first].manifest))
    return TimedPlans(results, load, profiles, wakeup, calls)


def plan_table(timed: TimedPlans, column: str, profiled: Callable[[Profile], float]) -> list[str]:
    """Markdown lines tabulating ``time_plans``' result: per label the predicted and measured milliseconds, the
    profiled figure ``profiled(profile)`` headed ``column`` ("(as above)" for a plan equal to an earlier label's) and
    the numerical check's relative error."""
    lines = [f"| plan | predicted ms | measured ms (IQR) | {column} | relative error |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for label, timing in timed.timings.items():
        latency, profile = timing.latency, timed.profiles.get(label)
        figure = "(as above)" if profile is None else f"{profiled(profile):.2f}"
        lines.append(f"| {label} | {timing.predicted_ms:.2f} | {latency['median_ms']:.2f} "
                     f"({latency['spread_ms']:.2f}) | {figure} | {timing.relative_error:.1e} |")
    return lines


def variant_benchmark_args(description: str, *, model: str, layouts: list[str] | None, space_size: int | None,
                           kernels: str | None = None) -> argparse.Namespace:
    """The command line of the benchmarks that time a network's plan beside variants of it (``benchmarks/prologue.py``,
    ``in_place.py``, ``depthwise_pairs.py``): ``--models`` (default ``model``), ``--threads``, ``--cache``,
    ``--layouts`` and ``--space-size`` (defaults as given; None: ``tessera tune``'s), ``--rounds``,
    ``--profile-runs`` and, with ``kernels`` (its help), ``--kernels``. Counts below 1 exit with a usage error."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--models", nargs="+", default=[model])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cache", default="costs.sqlite")
    parser.add_argument("--layouts", nargs="+", default=layouts,
                        help="the searched layouts (default: %(default)s; None: tune's)")
    parser.add_argument("--space-size", type=int, default=space_size,
                        help="candidates per node (default: %(default)s; None: tune's)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--profile-runs", type=int, default=20)
    if kernels:
        parser.add_argument("--kernels", action="store_true", help=kernels)
    args = parser.parse_args()
    if min(args.rounds, args.profile_runs, args.threads, args.space_size or 1) < 1:
        parser.error("--rounds, --profile-runs, --threads and --space-size must be positive")
    return args


def interleaved_latency(artifacts: dict[str, Artifact], *, rounds: int, threads: int) -> dict[str, dict[str, Any]]:
    """End-to-end latency of several artifacts, measured in turns so that load from other processes on a shared
    machine hits them all alike.

    Each of ``rounds`` rounds times every artifact once (``number`` runs of about 50 ms in all, fixed per artifact at
    its first round), starting one artifact later each round. Returns, per artifact, the median, quartiles, extremes
    and interquartile ``spread_ms`` of the per-round times in milliseconds.
    """
    from search.artifact import measure_latency
    from search.interleave import interleave, latency_summary

    numbers: dict[str, int] = {}
    runtime_threads = threads

    def timer(label: str) -> Callable[[], float]:
        def measure() -> float:
            nonlocal runtime_threads
            latency = measure_latency(artifacts[label], repeat=1, number=numbers.get(label), threads=threads)
            numbers[label], runtime_threads = latency.number, latency.runtime_threads
            return latency.median_ms

        return measure

    samples = interleave({label: timer(label) for label in artifacts}, rounds)
    return {label: {**latency_summary(values), "number": numbers[label], "threads": threads,
                    "runtime_threads": runtime_threads} for label, values in samples.items()}
