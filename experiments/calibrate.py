"""Calibration rounds of ``tune``: profile the exported plans inside the network, keep the in-network times, price
the problem again with them, re-solve, and repeat until the plan stops changing.

A round starts from plans that were exported and timed (the solver's and the uniform baselines): each is profiled
(``search.profile``), the profile scaled to the plan's measured latency, and the calls that compute one task give
that task's in-network time (``cost_models.calibration``), kept in the cost cache under the ``network`` context. The
problem is then priced again by the ``calibrated`` cost source (in-network times where known, elsewhere isolated
times scaled by the ratio of their kind's tasks measured nearest in time, of those a solver's plan ran where there
are enough) and the plans' predicted latency is their problem cost plus the time the problem does not price (fixed
operators, the work fused around layout nodes and followers, the VM's own calls): each of the plan's calls priced by
the calls of the other profiled plans that compute the same in the same layout context (``cost_models.unpriced``),
plus the median of what their measured latency exceeds their problem cost and unpriced time by, so that no plan's
prediction uses its own measurement. The solvers then solve the calibrated problem; a new plan is exported, timed
and profiled with the baselines for the next round, the same plan ends the rounds. A new plan is
timed beside the plan it would replace, in the same rounds, and replaces it only if it runs faster: a re-solve trusts
the isolated records of the kernels it adds, which no profile has checked, and the cheapest-looking of many noisy
records are the ones a solver picks (docs/fidelity.md), so a calibrated plan can be predicted faster than the plan
it replaces and run slower; when it does, the measured plan is kept and the rounds end. Plans timed after
the last round are predicted at the machine's speed of that timing (``window_factors``: the baselines, timed in both,
say how much faster or slower it runs now).

Profiles taken while the machine is slower than when the costs were measured would teach the calibration that slow
window (``cost_models.drift``): after profiling, a few of the plans' kernels are timed again (``check_drift``); if
they run slower than their records allow, the plans are timed and profiled once more, and if the window is still
disturbed, calibration stops without keeping those profiles.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cost_models.drift import Drift
    from cost_models.unpriced import UnpricedCalls
    from experiments.extraction import Extracted
    from search.emit import Origin
    from search.graph import OpGraph
    from search.plan import Plan
    from search.profile import Profile
    from solvers.problem import Problem

PROFILE_RUNS = 10


@dataclass(frozen=True)
class Round:
    """One calibration round: the plans' predicted and measured latency (ms) by label, the offset added to the
    problem cost (the plan's unpriced time and residual, read off the other plans' profiles: ``Unpriced``, kept as
    ``unpriced`` to predict later plans), how the costs were priced, the plan
    the solvers chose on the calibrated problem (``plan_changed``: it differs from the one measured this round), and
    the drift ratio checked after the profiles this round learned from (``cost_models.drift``), how many tasks
    pricing the round measured (``measured``: none where the first pricing measured them all), and, where the plan
    changed, the new plan's and the replaced plan's latency timed side by side after the round (``side_by_side_ms``:
    ``new``, ``replaced``; the replaced plan is kept where it ran faster)."""

    index: int
    predicted_ms: dict[str, float]
    measured_ms: dict[str, float]
    offset_ms: dict[str, float]
    calibration: dict[str, Any] = field(default_factory=dict)
    plan_changed: bool = False
    drift: float | None = None
    measured: int = 0
    side_by_side_ms: dict[str, float] | None = None
    unpriced: Unpriced | None = field(default=None, repr=False, compare=False)

    @property
    def kept_replaced(self) -> bool:
        """Whether the new plan ran slower than the plan it would replace, which was kept."""
        return self.side_by_side_ms is not None and self.side_by_side_ms["new"] > self.side_by_side_ms["replaced"]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(replace(self, unpriced=None))  # the fit stays out of summary.json; its offsets are in it
        del out["unpriced"]
        return {**out, "kept_replaced": self.kept_replaced}


@dataclass(frozen=True)
class Unpriced:
    """What a round's profiled plans (``plans``, by label) spent outside the problem's terms (``calls``:
    ``cost_models.unpriced.UnpricedCalls``, each profile scaled to the plan's measured latency), and by how much
    their measured latency exceeded their problem cost and that time (``residual_ms``)."""

    plans: dict[str, Plan]
    calls: dict[str, UnpricedCalls]
    residual_ms: dict[str, float]

    @classmethod
    def fit(cls, graph: OpGraph, problem: Problem, plans: Mapping[str, Plan], profiles: Mapping[str, Profile],
            measured_ms: Mapping[str, float]) -> Unpriced:
        """From the ``profiles`` of ``plans`` (by label) and their ``measured_ms``, on ``problem`` as priced now."""
        from cost_models.pricing import plan_cost
        from cost_models.unpriced import UnpricedCalls
        from search.plan import validate

        scaled, bases = scaled_profiles(profiles, measured_ms)
        calls = {label: UnpricedCalls.of(graph, validate(plans[label], graph), profile, bases)
                 for label, profile in scaled.items()}
        residual = {label: measured_ms[label] - plan_cost(problem, plans[label].choices) - calls[label].total_ms
                    for label in calls}
        return cls({label: plans[label] for label in calls}, calls, residual)

    def offset(self, graph: OpGraph, plan: Plan, computes: Sequence[tuple[Origin, ...]]) -> float:
        """What a prediction of ``plan``, whose exported calls compute ``computes``, adds to its problem cost: its
        calls priced by those of the profiled plans with other choices (all, where there are none) and their median
        residual (``cost_models.unpriced.estimate``); 0 without profiled plans."""
        from cost_models.unpriced import estimate, plan_calls
        from search.plan import validate

        if not self.plans:
            return 0.0
        others = [label for label, profiled in self.plans.items() if profiled.choices != plan.choices] \
            or list(self.plans)
        calls = plan_calls(graph, validate(plan, graph), computes)
        return estimate(calls, [self.calls[label] for label in others]) \
            + statistics.median(self.residual_ms[label] for label in others)


def scaled_profiles(profiles: Mapping[str, Profile], measured_ms: Mapping[str, float]
                    ) -> tuple[dict[str, Profile], dict[frozenset[str], float]]:
    """Each profile scaled to its plan's measured latency (``measured_ms``, from the interleaved rounds: a
    profile's own runs last a second or so, and a shared host's speed moves by several percent between seconds),
    and the bare bases of them all (``cost_models.calibration.bare_bases``)."""
    from cost_models.calibration import bare_bases

    scaled = {label: profile.at(measured_ms[label]) for label, profile in profiles.items()}
    return scaled, bare_bases(scaled.values())


def keep_network_times(extracted: Extracted, plans: Mapping[str, Any], profiles: Mapping[str, Profile],
                       measured_ms: Mapping[str, float], chosen: Collection[str] = ()) -> int:
    """Store the in-network times the profiles give for each plan's tasks (``chosen``: the labels of the solvers'
    plans, whose times are kept as chosen ones too), each profile scaled to the plan's measured latency
    (``scaled_profiles``); returns how many records were kept."""
    from cost_models.calibration import network_times, store_network_times
    from search.plan import validate

    scaled, bases = scaled_profiles(profiles, measured_ms)
    measured = _measured(extracted)
    kept = 0
    try:
        for label, profile in scaled.items():
            times = network_times(extracted.graph, validate(plans[label], extracted.graph), profile, bases)
            store_network_times(measured, times, profile.runs, chosen=label in chosen)
            kept += len(times)
    finally:
        measured.close()
    return kept


def plan_kernels(extracted: Extracted, plans: Mapping[str, Any]) -> list[Any]:
    """The kernel tasks the plans run (with repeats)."""
    from cost_models.tasks import KernelTask
    from search.candidates import kernel_spec
    from search.kinds import KernelKind, get_kind
    from search.plan import validate

    graph = extracted.graph
    return [KernelTask(kernel_spec(graph.op(name), candidate)) for plan in plans.values()
            for name, candidate in validate(plan, graph).items()
            if isinstance(get_kind(graph.op(name).kind), KernelKind)]


def _measured(extracted: Extracted) -> Any:
    """The measured cost provider of the extraction's settings (its cache, target, threads and timing method)."""
    from cost_models.sources import MeasuredSource

    settings = extracted.settings
    return MeasuredSource(settings.timing).open(settings.cache, settings.target, settings.threads, None)


def check_drift(extracted: Extracted, plans: Mapping[str, Any]) -> Drift:
    """The plans' longest kernels (one a workload) timed again with the extraction's timing method, against their
    cached records. ``tune`` passes the solvers' plans, not the uniform baselines: the longest baseline kernels,
    uniform NCHW's default ones, were seen to time up to 2x apart between sittings while tuned kernels held their
    records (docs/fidelity.md), which would hide a slow window."""
    from cost_models.drift import measure_drift

    measured = _measured(extracted)
    try:
        return measure_drift(measured, plan_kernels(extracted, plans))
    finally:
        measured.close()


def predict(problem: Problem, graph: OpGraph, plans: Mapping[str, Plan],
            computes: Mapping[str, Sequence[tuple[Origin, ...]]], unpriced: Unpriced
            ) -> tuple[dict[str, float], dict[str, float]]:
    """Each plan's predicted latency (its cost on ``problem`` plus ``unpriced``'s offset for it, given what its
    exported calls compute: ``computes`` by label) and that offset. The offsets come from the measurements paired
    with the profiles, so a later measurement in another state of the machine is predicted, not fitted."""
    from cost_models.pricing import plan_cost

    offsets = {label: unpriced.offset(graph, plan, computes[label]) for label, plan in plans.items()}
    return {label: plan_cost(problem, plan.choices) + offsets[label] for label, plan in plans.items()}, offsets


def window_factors(plans: Mapping[str, Any], measured_ms: Mapping[str, float], then_plans: Mapping[str, Any],
                   then_ms: Mapping[str, float]) -> dict[str, float]:
    """Per plan, how fast the machine ran this timing against the round that calibrated the costs: the median, over
    the *other* plans timed in both with the same choices (the uniform baselines), of now over then; 1 where there
    is no such plan. A shared host's speed moves by several percent from one minute to the next while the plans'
    relative speeds hold (docs/fidelity.md), so a prediction carried from the calibration round to a later timing
    is scaled by it, read off modules other than the one predicted."""
    same = [label for label in measured_ms if label in then_ms and label in then_plans
            and then_plans[label].choices == plans[label].choices]
    out = {}
    for label in plans:
        ratios = [measured_ms[other] / then_ms[other] for other in same
                  if other != label and plans[other].choices != plans[label].choices]
        out[label] = statistics.median(ratios) if ratios else 1.0
    return out
