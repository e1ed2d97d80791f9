"""The predictions of ``tune``'s calibration rounds: no plan's prediction uses its own measurement."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from experiments.calibrate import window_factors


def plans(**choices: str) -> dict[str, SimpleNamespace]:
    return {label: SimpleNamespace(choices={"conv": choice}) for label, choice in choices.items()}


def test_the_window_is_read_off_the_other_plans_timed_in_both():
    then = plans(**{"solver:auto": "a", "nchw": "n", "nhwc": "h", "nchw16c": "c"})
    now = plans(**{"solver:auto": "b", "nchw": "n", "nhwc": "h", "nchw16c": "c"})  # the solver chose another plan
    then_ms = {"solver:auto": 10.0, "nchw": 20.0, "nhwc": 30.0, "nchw16c": 40.0}
    now_ms = {"solver:auto": 99.0, "nchw": 18.0, "nhwc": 28.5, "nchw16c": 36.0}  # x0.90, x0.95, x0.90
    window = window_factors(now, now_ms, then, then_ms)
    assert window["solver:auto"] == pytest.approx(0.90)  # the baselines' median; the new plan was not timed then
    assert window["nchw"] == pytest.approx(0.925)  # nhwc and nchw16c only: never its own ratio
    assert window["nhwc"] == pytest.approx(0.90)


def test_a_plan_equal_to_a_baseline_does_not_read_its_own_module_twice():
    then = plans(**{"solver:auto": "c", "nchw": "n", "nchw16c": "c"})
    then_ms = {"solver:auto": 40.0, "nchw": 20.0, "nchw16c": 40.0}
    now_ms = {"solver:auto": 30.0, "nchw": 19.0, "nchw16c": 30.0}
    window = window_factors(then, now_ms, then, then_ms)
    assert window["solver:auto"] == pytest.approx(0.95) == window["nchw16c"]  # nchw's only: the same module else
    assert window["nchw"] == pytest.approx(0.75)


def test_the_same_timing_or_no_plan_in_common_is_no_window():
    then = plans(**{"solver:auto": "a", "nchw": "n"})
    then_ms = {"solver:auto": 10.0, "nchw": 20.0}
    assert window_factors(then, then_ms, then, then_ms) == {"solver:auto": 1.0, "nchw": 1.0}
    other = plans(**{"solver:auto": "b", "nchw": "m"})
    assert window_factors(other, {"solver:auto": 5.0, "nchw": 9.0}, then, then_ms) == {"solver:auto": 1.0,
                                                                                       "nchw": 1.0}


def test_a_plan_the_problem_forbids_is_predicted_as_nothing_not_infinity():
    from experiments.timing import predicted_cost
    from solvers.problem import Problem

    problem = Problem.build([("a", ["x", "y"], [1.0, float("inf")]), ("b", ["x"], [2.0])], [("a", "b", [[0.5], [0]])])
    assert predicted_cost(problem, SimpleNamespace(choices={"a": "x", "b": "x"})) == 3.5
    assert predicted_cost(problem, SimpleNamespace(choices={"a": "y", "b": "x"})) is None  # a failed measurement
