"""The cross-core wake-up probe: a round trip between two cores, the caller's binding untouched, and the rule that
says whether two probes saw one machine."""

from __future__ import annotations

import os

import pytest

from cost_models.wakeup import TOLERANCE, Wakeup, probe_wakeup
from experiments.timing import TimedPlans


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two usable cores")
def test_the_probe_times_round_trips_between_two_usable_cores_and_leaves_the_callers_binding_alone():
    before = os.sched_getaffinity(0)
    probe = probe_wakeup(round_trips=5, idle_s=0.0)
    assert os.sched_getaffinity(0) == before
    assert probe is not None and probe.median_us > 0 and set(probe.cores) <= before and len(set(probe.cores)) == 2
    assert probe.to_dict()["cores"] == list(probe.cores)


def test_a_process_on_one_core_has_nothing_to_probe():
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        assert probe_wakeup(round_trips=2) is None
    finally:
        os.sched_setaffinity(0, before)


def wakeup(us: float) -> Wakeup:
    return Wakeup(us, (0, 1), 0.0)


def test_two_probes_differ_when_one_is_more_than_the_tolerance_above_the_other():
    # the two states met on a shared host: 27-31 us and 38-46 us
    assert wakeup(29).changed(wakeup(42)) and wakeup(42).changed(wakeup(29))
    assert not wakeup(29).changed(wakeup(29 * (1 + TOLERANCE) - 0.1)) and not wakeup(40).changed(wakeup(44))


def _timed(before: float | None, after: float = 0.0) -> TimedPlans:
    return TimedPlans({}, (0.0, 0.0), {}, None if before is None else (wakeup(before), wakeup(after)))


def test_two_timings_are_of_two_machines_only_when_each_held_steady_and_they_differ():
    assert _timed(29, 30).machine_changed_from(_timed(42, 43))
    assert not _timed(29, 30).machine_changed_from(_timed(30, 29))
    assert not _timed(29, 42).machine_changed_from(_timed(42, 43))  # a switch during one of them: not steady
    assert not _timed(None).machine_changed_from(_timed(42, 43))
