"""Selective measurement on tiny networks: given the costs a full measurement took, it ends on a plan no dearer than
the optimum as priced with its bounds (so the optimum itself where those bounds hold) having measured a part of the
tasks, every task of its plan measured; for real, through ``tune``."""

from __future__ import annotations

import numpy as np
import pytest

from cost_models import CostCache
from cost_models.cache import Context, CostRecord
from cost_models.features import group_key
from cost_models.measure import CostProvider
from cost_models.pricing import measurement_tasks, plan_cost
from cost_models.selective import (
    INITIAL,
    MARGIN,
    MIN_RATIOS,
    QUANTILE,
    SelectiveCosts,
    initial_picks,
    key_kind,
    plan_tasks,
    price_selectively,
)
from cost_models.sources import SelectiveSource
from cost_models.tasks import Task
from cost_models.xgb_model import XGBCostModel
from experiments.extraction import extract
from experiments.tune import tune
from search.plan import Plan
from search.space import tuning_space
from solvers import solve
from tests.cost_models.test_measure import THREADS
from tests.quick_costs import QuickMeasured
from tests.search.tiny_nets import dense_block_net, residual_concat_net

SPACE = {"threads": THREADS, "space_size": 2, "layouts": "NCHW,NCHW8c"}
NETS = {"residual_concat": residual_concat_net, "dense_block": dense_block_net}


class Replay(CostProvider):
    """Prices a task by the record a full measurement took of it (``records``), as if measuring it now; the cache
    it reads first (``cache``) starts empty. ``asked`` collects the keys measured."""

    def __init__(self, records: dict[str, CostRecord], context, cache: CostCache) -> None:
        self.records, self.context, self.cache, self.asked = records, context, cache, []

    def measure(self, tasks: list[Task]) -> list[CostRecord]:
        self.asked += [task.key for task in tasks]
        return [self.records[task.key] for task in tasks]


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """Each tiny network's space measured in full, for real: (extraction, its records by key, context)."""
    root = tmp_path_factory.mktemp("selective")
    out = {}
    for name, net in NETS.items():
        cache = root / f"{name}.sqlite"
        extracted = extract(net(), name=name, cache=cache, costs=QuickMeasured(), **SPACE)
        context = Context(**extracted.costs["context"])
        records = {key: record for _, key, record in CostCache(cache).items()}
        out[name] = (extracted, records, context)
    return out


def _model(records: dict[str, CostRecord]) -> XGBCostModel:
    ok = {key: record.median_ms for key, record in records.items() if record.ok}
    return XGBCostModel(n_estimators=50).fit(list(ok), list(ok.values()))


@pytest.mark.parametrize("name, other", [("residual_concat", "dense_block"), ("dense_block", "residual_concat")])
def test_given_full_measurements_costs_it_ends_on_the_optimum_where_its_bounds_hold(name, other, measured, tmp_path):
    extracted, records, context = measured[name]
    optimum = solve(extracted.problem, "auto")
    replay = Replay(records, context, CostCache(tmp_path / "empty.sqlite"))
    selective = SelectiveCosts(replay, _model(measured[other][1]))  # the model never saw this network
    graph = extracted.graph
    space = tuning_space(graph, layouts=SPACE["layouts"].split(","), space_size=SPACE["space_size"])
    problem = price_selectively(selective, graph, space, selective.measure)
    plan = solve(problem, "auto").assignment
    choices = {node: plan[node] for node in space}
    best = {node: optimum.assignment[node] for node in space}
    cost = plan_cost(extracted.problem, choices)
    assert plan_cost(problem, choices) == pytest.approx(cost, rel=1e-9)  # its plan priced by measurements alone
    # no plan is cheaper as priced (bounds where unmeasured), the optimum included; so where the bounds on the
    # optimum's unmeasured tasks hold (its priced cost at most its measured cost), the plan costs the optimum's
    bounded = plan_cost(problem, best)
    assert cost <= bounded * (1 + 1e-9)
    if bounded <= optimum.cost * (1 + 1e-9):
        assert cost == pytest.approx(optimum.cost, rel=1e-9)
    asked = set(replay.asked)
    # each task measured once; with a model that never saw the network and records of a quick timing loop, which
    # tasks bounds leave out varies from run to run (all of them, at times, on a 2-core host)
    assert len(asked) == len(replay.asked) <= len(records)
    assert {task.key for task in plan_tasks(graph, space, plan) if not task.free} <= asked
    assert selective.stats["predicted"] == len(records) - len(asked) and selective.stats["rounds"] >= 1


@pytest.mark.parametrize("name", list(NETS))
def test_a_model_that_knows_the_network_leaves_tasks_unmeasured(name, measured, tmp_path):
    extracted, records, context = measured[name]
    replay = Replay(records, context, CostCache(tmp_path / "empty.sqlite"))
    selective = SelectiveCosts(replay, _model(records))  # fitted on these very records
    space = tuning_space(extracted.graph, layouts=SPACE["layouts"].split(","), space_size=SPACE["space_size"])
    problem = price_selectively(selective, extracted.graph, space, selective.measure)
    plan = solve(problem, "auto").assignment
    assert plan_cost(problem, {node: plan[node] for node in space}) == pytest.approx(
        plan_cost(extracted.problem, {node: plan[node] for node in space}), rel=1e-9)
    assert len(set(replay.asked)) == len(replay.asked) < len(records)  # a part of the tasks, each once


@pytest.mark.parametrize("name", list(NETS))
def test_fewer_initial_picks_measure_less_first_and_still_every_task_of_the_plan(name, measured, tmp_path):
    extracted, records, context = measured[name]
    space = tuning_space(extracted.graph, layouts=SPACE["layouts"].split(","), space_size=SPACE["space_size"])
    model = _model(records)
    tasks = measurement_tasks(extracted.graph, space)
    groups = {group_key(task.key) for task in tasks if not task.free}
    picked = {}
    for initial, margin in ((1, 0.0), (2, 0.2)):
        replay = Replay(records, context, CostCache(tmp_path / f"empty-{initial}.sqlite"))
        selective = SelectiveCosts(replay, model)
        picks = initial_picks(selective, tasks, initial=initial, margin=margin)
        assert {group_key(task.key) for task in picks} == groups  # every node's best predicted at least
        picked[initial] = len(picks)
        problem = price_selectively(selective, extracted.graph, space, selective.measure, initial=initial,
                                    margin=margin)
        plan = solve(problem, "auto").assignment
        assert {task.key for task in plan_tasks(extracted.graph, space, plan) if not task.free} <= set(replay.asked)
    assert picked[1] < picked[2]


def test_tasks_the_model_cannot_featurise_are_measured_first_not_left_out(measured, tmp_path, monkeypatch):
    import cost_models.selective as selective_module

    extracted, records, context = measured["residual_concat"]
    space = tuning_space(extracted.graph, layouts=SPACE["layouts"].split(","), space_size=SPACE["space_size"])
    transforms = {task.key for task in measurement_tasks(extracted.graph, space)
                  if not task.free and key_kind(task.key) == "layout_transform"}
    assert transforms
    featurisable = selective_module.featurisable

    def without_transforms(keys):  # a kind the model has no features for
        usable, failed = featurisable([key for key in keys if key not in transforms])
        return usable, {**failed, **{key: CostRecord.failed("no features") for key in keys if key in transforms}}

    monkeypatch.setattr(selective_module, "featurisable", without_transforms)
    replay = Replay(records, context, CostCache(tmp_path / "empty.sqlite"))
    selective = SelectiveCosts(replay, _model(records))
    problem = price_selectively(selective, extracted.graph, space, selective.measure)
    assert transforms <= set(replay.asked)  # measured, so priced by their records, not refused
    plan = solve(problem, "auto").assignment
    choices = {node: plan[node] for node in space}
    assert plan_cost(problem, choices) == pytest.approx(plan_cost(extracted.problem, choices), rel=1e-9)


def test_the_sources_default_picks_are_the_modules():
    assert (SelectiveSource().initial, SelectiveSource().margin) == (INITIAL, MARGIN)


def test_the_model_is_refit_once_what_is_known_has_grown_by_a_quarter(measured, tmp_path, monkeypatch):
    _, records, context = measured["residual_concat"]
    selective = SelectiveCosts(Replay(records, context, CostCache(tmp_path / "empty.sqlite")),
                               _model(measured["dense_block"][1]))
    fits: list[int] = []
    boosted = selective.model.boosted

    def counted(keys, times, rounds):
        fits.append(len(keys))
        return boosted(keys, times, rounds)

    monkeypatch.setattr(selective.model, "boosted", counted)
    keys = [key for key, record in records.items() if record.ok]
    for known in (8, 9, 10, 12, 13):
        selective.known.update({key: records[key] for key in keys[:known]})
        selective.predict(keys[known:])
    assert fits == [8, 10, 13]  # 9 < 8 x 1.25 <= 10; 12 < 10 x 1.25 <= 13


def test_tune_measures_selectively_for_real(measured, tmp_path):
    model = tmp_path / "model.json"
    _model(measured["dense_block"][1]).save(model)
    cache = tmp_path / "costs.sqlite"
    lines: list[str] = []
    summary = tune(residual_concat_net(), tmp_path / "out", name="tiny", cache=cache, costs=SelectiveSource(model),
                   repeat=2, calibrate=1, baselines=("nchw",), echo=lines.append, **SPACE)
    counts = summary["measurements"]
    assert 0 < counts["new"] <= counts["tasks"] and counts["rounds"] >= 1  # how many: the replay test's matter
    last = "selective" if summary["calibration"]["skipped"] else "calibrated-selective"  # a calibration round's
    assert counts["source"] == last and any("tasks predicted" in line for line in lines)
    extracted, _, context = measured["residual_concat"]
    plan = Plan.load(tmp_path / "out" / "plan.json").choices
    space = tuning_space(extracted.graph, layouts=SPACE["layouts"].split(","), space_size=SPACE["space_size"])
    needed = {task.key for task in plan_tasks(extracted.graph, space, plan) if not task.free}
    records = {key: ctx for ctx, key, _ in CostCache(cache).items() if ctx == context.to_key()}  # not in-network
    assert needed <= set(records)  # the tuned plan's tasks all measured
    assert len(records) == counts["new"]  # each measured once, the calibration round's counted too
    assert summary["plan"]["latency"]["median_ms"] > 0


def test_the_bound_is_the_quantile_asked_for_of_measured_over_predicted(measured, tmp_path):
    _, records, context = measured["residual_concat"]
    model = _model(measured["dense_block"][1])
    replay = Replay(records, context, CostCache(tmp_path / "empty.sqlite"))
    ratios = [0.5 + 0.05 * i for i in range(MIN_RATIOS)]
    for quantile in (QUANTILE, 0.5):
        selective = SelectiveCosts(replay, model, quantile=quantile)
        selective.ratios.update({"conv2d": ratios, "chain": [2.0]})
        factors = selective.bound_factors()
        assert factors["conv2d"] == pytest.approx(float(np.quantile(ratios, quantile)))
        assert factors[""] == pytest.approx(float(np.quantile([*ratios, 2.0], quantile))) and "chain" not in factors
    with pytest.raises(ValueError, match="between 0 and 1"):
        SelectiveCosts(replay, model, quantile=1.0)
