"""Calibration rounds of ``tune``: profile the exported plans inside the network, keep the in-network times, price
the problem again with them, re-solve, and repeat until the plan stops changing.

A round starts from plans that were exported and timed (the solver's and the uniform baselines): each is profiled
(``search.profile``), the calls that compute one task give that task's in-network time (``cost_models.calibration``),
kept in the cost cache under the ``network`` context. The problem is then priced again by the ``calibrated`` cost
source (in-network times where known, isolated times scaled by their kind's ratio elsewhere) and the plans' predicted
latency is their problem cost plus the time the problem does not price (fixed operators, the work fused around layout
nodes and followers, the VM's own calls): the median, over the other profiled plans, of measured latency less problem
cost, so that no plan's prediction uses its own measurement. The solvers then solve the calibrated problem; a new plan
is exported, timed and profiled with the baselines for the next round, the same plan ends the rounds.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from experiments.tune import Extracted
    from search.profile import Profile

PROFILE_RUNS = 10


@dataclass(frozen=True)
class Round:
    """One calibration round: the plans' predicted and measured latency (ms) by label, the offset added to the
    problem cost (median unpriced time; per label, leaving that label out), how the costs were priced, and the plan
    the solvers chose on the calibrated problem (``plan_changed``: it differs from the one measured this round)."""

    index: int
    predicted_ms: dict[str, float]
    measured_ms: dict[str, float]
    offset_ms: dict[str, float]
    calibration: dict[str, Any] = field(default_factory=dict)
    plan_changed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def keep_network_times(extracted: Extracted, plans: Mapping[str, Any], profiles: Mapping[str, Profile],
                       source: Any, cache: Any) -> int:
    """Store the in-network times the profiles give for each plan's tasks; returns how many records were kept."""
    from cost_models.calibration import network_times, store_network_times
    from search.export import make_target
    from search.plan import validate

    threads = extracted.problem.meta["threads"]
    measured = source.open(cache, make_target(threads), threads, None)
    kept = 0
    try:
        for label, profile in profiles.items():
            times = network_times(extracted.graph, validate(plans[label], extracted.graph), profile)
            store_network_times(measured, times, profile.runs)
            kept += len(times)
    finally:
        measured.close()
    return kept


def predict(problem: Any, plans: Mapping[str, Any], measured_ms: Mapping[str, float]) -> tuple[dict, dict]:
    """Each plan's predicted latency (problem cost plus the unpriced time of the *other* measured plans) and the
    offset used for it; a plan never measured gets the median over all of them."""
    from cost_models.pricing import plan_cost

    costs = {label: plan_cost(problem, plan.choices) for label, plan in plans.items()}
    unpriced = {label: measured_ms[label] - costs[label] for label in measured_ms}
    offsets = {}
    for label in plans:
        others = [value for other, value in unpriced.items() if other != label] or list(unpriced.values())
        offsets[label] = statistics.median(others) if others else 0.0
    return {label: costs[label] + offsets[label] for label in plans}, offsets
