"""Where a plan's predicted latency misses its measured one, split into parts that add up to the whole error.

For a plan predicted as task prices summed over the cost problem plus an estimate of the time the problem does not
price, and profiled inside the network (``search.profile``):

- **kernels**: the prices of the nodes' kernels and of the chains run beside them (tunable nodes' costs) against
  their in-network times in the profile;
- **transforms**: the same for the layout transforms (edges and shared conversions);
- **unpriced**: the estimate against what the profile spent outside the priced tasks (fixed operators, the VM);
- **drift**: the profile's run time against the measured median: the machine moved between the two windows.

Each part is predicted minus actual, in ms: positive where the prediction is too slow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cost_models.cache import CostRecord
from cost_models.calibration import network_times
from cost_models.pricing import build_problem, plan_assignment
from cost_models.tasks import Task, TransformTask
from search.candidates import Candidate
from search.graph import OpGraph
from search.profile import Profile
from solvers import Problem

PARTS = ("kernels", "transforms", "unpriced", "drift")


@dataclass(frozen=True)
class ErrorSplit:
    """A prediction's error in ms by part (``PARTS``: predicted minus actual) and the measured median it misses."""

    kernels_ms: float
    transforms_ms: float
    unpriced_ms: float
    drift_ms: float
    measured_ms: float

    @property
    def error_ms(self) -> float:
        """The whole error: the prediction minus the measured median."""
        return self.kernels_ms + self.transforms_ms + self.unpriced_ms + self.drift_ms

    def relative(self) -> dict[str, float]:
        """Each part, and ``total``, as a fraction of the measured median."""
        parts = dict(zip(PARTS, (self.kernels_ms, self.transforms_ms, self.unpriced_ms, self.drift_ms)))
        return {name: ms / self.measured_ms for name, ms in {**parts, "total": self.error_ms}.items()}


def priced_problem(graph: OpGraph, space: Mapping[str, Sequence[Candidate]], times: Mapping[Task, float]) -> Problem:
    """The cost problem of ``space`` priced by ``times`` (task -> ms): free tasks cost 0, missing ones are
    forbidden."""
    def measure(asked: list[Task]) -> list[CostRecord]:
        return [CostRecord(0.0 if task.free else times.get(task, float("inf")), 0.0, 1) for task in asked]
    return build_problem(graph, space, measure)


def plan_parts(graph: OpGraph, space: Mapping[str, Sequence[Candidate]], times: Mapping[Task, float],
               chosen: Mapping[str, Candidate]) -> tuple[float, float]:
    """A plan's (kernels and chains, transforms) ms, priced by ``times``."""
    problem = priced_problem(graph, space, times)
    return _parts(graph, space, times, problem, _assignment(problem, chosen))


def _assignment(problem: Problem, chosen: Mapping[str, Candidate]) -> dict[str, str]:
    """Plan ``chosen`` as a full assignment of ``problem`` (its auxiliary nodes completed)."""
    return plan_assignment(problem, {node: candidate.name for node, candidate in chosen.items()})


def _parts(graph: OpGraph, space: Mapping[str, Sequence[Candidate]], times: Mapping[Task, float], problem: Problem,
           assignment: Mapping[str, str]) -> tuple[float, float]:
    """(kernels and chains, transforms) of a full ``assignment`` of ``problem``, ``space`` priced by ``times``: the
    transforms are its cost with every other task at 0."""
    only = {task: ms if isinstance(task, TransformTask) else 0.0 for task, ms in times.items()}
    transforms = priced_problem(graph, space, only).evaluate(assignment)
    return problem.evaluate(assignment) - transforms, transforms


def split_error(graph: OpGraph, space: Mapping[str, Sequence[Candidate]], prices: Mapping[Task, float],
                unpriced_estimate_ms: float, chosen: Mapping[str, Candidate], profile: Profile, measured_ms: float,
                bases: Mapping[frozenset[str], float] | None = None) -> ErrorSplit:
    """How the prediction of plan ``chosen`` (node -> candidate), ``prices`` summed over ``space``'s problem plus
    ``unpriced_estimate_ms``, misses ``measured_ms``, by part, against the plan's ``profile`` (with ``bases``:
    ``cost_models.calibration.bare_bases`` of all the profiles). A task of the plan that no profiled call computes
    (a transform TVM turned into a reshape, or one fused where the attribution does not find it) took 0 ms there;
    what such calls did take is in the unpriced part."""
    problem = priced_problem(graph, space, prices)
    assignment = _assignment(problem, chosen)
    kernels, transforms = _parts(graph, space, prices, problem, assignment)
    actual = {task: 0.0 for task in prices} | network_times(graph, chosen, profile, bases)
    net_kernels, net_transforms = _parts(graph, space, actual, priced_problem(graph, space, actual), assignment)
    unpriced = profile.run_ms - net_kernels - net_transforms
    return ErrorSplit(kernels - net_kernels, transforms - net_transforms, unpriced_estimate_ms - unpriced,
                      profile.run_ms - measured_ms, measured_ms)
