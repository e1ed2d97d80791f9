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


def test_a_plan_is_predicted_from_the_other_plans_calls_never_from_its_own():
    """Synthetic profiles of an ``ssd_like_net`` whose heads cost more beside a blocked layout (the conversion fused
    into their call, priced as a transform): the plan mixing the baselines' layouts is predicted exactly by their
    calls; a baseline whose concat ran slow in its own profile is predicted by the others' concat."""
    from dataclasses import replace

    from cost_models.prediction_error import priced_problem
    from cost_models.pricing import measurement_tasks
    from cost_models.tasks import KernelTask, TransformTask
    from experiments.calibrate import Unpriced, predict
    from search.graph import extract_graph
    from search.plan import baseline_plan, validate
    from tests.cost_models.test_unpriced import OVERHEAD_MS, _calls, _profile
    from tests.search.tiny_nets import ssd_like_net

    graph = extract_graph(ssd_like_net())
    baselines = {name: baseline_plan(graph, name) for name in ("nchw", "nhwc", "nchw16c")}
    mixed = replace(baselines["nchw"], choices={**baselines["nchw"].choices,
                                                "conv2d_2": baselines["nchw16c"].choices["conv2d_2"]})
    every = {**baselines, "solver:auto": mixed}
    chosen = {label: validate(plan, graph) for label, plan in every.items()}
    space = {node: list({c[node].name: c[node] for c in chosen.values()}.values()) for node in chosen["nchw"]}

    def price(task) -> float:  # as calibration reads them off the profiles: a blocked head's call beyond NCHW's
        if isinstance(task, KernelTask):
            return 1.0
        return 0.3 if isinstance(task, TransformTask) and task.src not in ("NCHW", "NHWC") else 0.0

    problem = priced_problem(graph, space, {task: price(task) for task in measurement_tasks(graph, space)})
    profiles = {label: _profile(graph, choices, 0.4) for label, choices in chosen.items()}
    slow = profiles["nchw16c"].calls[-1]  # its concat, 1 ms slower in its own profile only
    profiles["nchw16c"] = replace(profiles["nchw16c"], calls=(*profiles["nchw16c"].calls[:-1],
                                                              replace(slow, ms=slow.ms + 1.0)),
                                  run_ms=profiles["nchw16c"].run_ms + 1.0)
    measured = {label: profile.run_ms for label, profile in profiles.items()}
    unpriced = Unpriced.fit(graph, problem, baselines, {name: profiles[name] for name in baselines}, measured)
    assert unpriced.residual_ms == pytest.approx(dict.fromkeys(baselines, 0.0), abs=1e-9)
    calls = {label: _calls(graph, choices) for label, choices in chosen.items()}
    predicted, offsets = predict(problem, graph, every, calls, unpriced)
    assert offsets["solver:auto"] == pytest.approx(0.1 + 0.1 + 0.05 + OVERHEAD_MS)  # the heads' ops, the concat
    assert predicted["solver:auto"] == pytest.approx(measured["solver:auto"])  # its blocked head's transform priced
    assert offsets["nchw16c"] == pytest.approx(0.1 + 0.1 + 0.05 + OVERHEAD_MS)  # the others' concat
    assert predicted["nchw16c"] == pytest.approx(measured["nchw16c"] - 1.0)
