"""The phase clock charges each second to the innermost phase running."""

from __future__ import annotations

import itertools

import pytest

from experiments import phases
from experiments.phases import PhaseClock


def test_nested_phases_are_charged_their_own_time_only(monkeypatch):
    ticks = itertools.count()  # every reading of the clock one second later
    monkeypatch.setattr(phases.time, "perf_counter", lambda: float(next(ticks)))
    clock = PhaseClock()
    with clock.phase("outer"):  # enters at 0
        with clock.phase("inner"):  # 1
            pass  # leaves at 2
        with clock.phase("inner"):  # 3
            pass  # 4
    # outer leaves at 5
    assert clock.seconds == {"outer": 3.0, "inner": 2.0}
    assert list(clock.seconds) == ["outer", "inner"]


def test_a_phase_left_by_an_exception_is_charged_and_closed():
    clock = PhaseClock()
    with pytest.raises(ValueError), clock.phase("failing"):
        raise ValueError
    with clock.phase("next"):
        pass
    assert set(clock.seconds) == {"failing", "next"} and clock._running == []
