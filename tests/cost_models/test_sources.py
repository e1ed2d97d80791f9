"""Cost sources: the registry, parameter checks with one message each, what each source records as provenance, and a
new source offered by the command line and experiment files once it is registered."""

from __future__ import annotations

import doctest
from dataclasses import dataclass

import pytest

from cost_models import sources
from cost_models.checks import PRICED
from cost_models.errors import CostSourceError
from cost_models.learned import HybridCosts, PredictedCosts
from cost_models.measure import MeasuredCosts
from cost_models.selective import SelectiveCosts
from cost_models.sources import (
    COST_SOURCES,
    CostSource,
    HybridSource,
    MeasuredSource,
    SelectiveSource,
    XGBoostSource,
    cost_source,
    default_source,
    register,
)
from cost_models.xgb_model import XGBCostModel
from experiments.cli import build_parser
from experiments.config import parse_config
from tests.cost_models.test_measure import TARGET, THREADS


def test_the_builtin_sources_are_registered_and_the_examples_run():
    assert list(COST_SOURCES) == ["measured", "xgboost", "hybrid", "calibrated", "selective"]
    assert cost_source("hybrid", model="m.json", fraction=0.1) == HybridSource("m.json", 0.1, 2)
    source = XGBoostSource("m.json")
    assert cost_source(source) is source
    assert doctest.testmod(sources).failed == 0


@pytest.mark.parametrize(
    "name, params, message",
    [
        ("simulated", {}, "unknown cost source 'simulated'; choose from measured, xgboost, hybrid, calibrated"),
        ("measured", {"model": "m.json"}, "the xgboost, hybrid and selective cost sources take a cost-model file "
                                          "(--cost-model), and measured and calibrated costs take none"),
        ("xgboost", {"model": "m.json", "rounds": 3}, "the hybrid cost source takes predict-measure-refit rounds "
                                                      "(--hybrid-rounds), and measured, xgboost, calibrated and "
                                                      "selective costs take none"),
        ("hybrid", {"model": "m.json", "fraction": 0}, "the measured fraction must be in (0, 1], got 0"),
        ("hybrid", {"model": "m.json", "rounds": 1.5}, "rounds must be a positive integer, got 1.5"),
        ("selective", {"initial": 0}, "the initial picks must be a positive integer, got 0"),
        ("selective", {"margin": -0.1}, "the pick margin must be in [0, 1], got -0.1"),
        ("selective", {"margin": float("nan")}, "the pick margin must be in [0, 1], got nan"),
        ("hybrid", {"model": "m.json", "margin": 0.1}, "the selective cost source takes a pick margin (--pick-margin)"),
    ],
)
def test_bad_parameters_are_refused_with_one_message(name, params, message):
    with pytest.raises(CostSourceError) as raised:
        cost_source(name, **params)
    assert message in str(raised.value)


def test_each_source_opens_its_provider_and_records_where_the_costs_came_from(tmp_path):
    model = XGBCostModel(n_estimators=2).fit([task.key for task in PRICED], [1.0, 2.0, 0.5, 0.7])
    model_file = model.save(tmp_path / "model.json")
    cache = tmp_path / "costs.sqlite"
    with MeasuredSource().open(cache, TARGET, THREADS, None) as measured:
        assert isinstance(measured, MeasuredCosts)
        assert MeasuredSource().provenance(measured) == {
            "source": "measured", "provider": "MeasuredCosts", "cache": str(cache),
            "context": dict(vars(measured.context))}
    source = XGBoostSource(model_file)
    with source.open(cache, TARGET, THREADS, None) as predicted:
        assert isinstance(predicted, PredictedCosts)
        predicted.measure(PRICED)
        assert source.provenance(predicted) == {"source": "xgboost", "provider": "PredictedCosts",
                                                "model": str(model_file), "tasks": 4, "measured": 0, "predicted": 4}
    source = HybridSource(model_file, fraction=0.5)
    with source.open(cache, TARGET, THREADS, None) as hybrid:
        assert isinstance(hybrid, HybridCosts) and hybrid.fraction == 0.5 and hybrid.rounds == 2
        assert list(source.provenance(hybrid)) == ["source", "provider", "cache", "context", "model"]
    source = SelectiveSource(model_file)
    with source.open(cache, TARGET, THREADS, None) as selective:
        assert isinstance(selective, SelectiveCosts) and selective.measured.context.timing == "context"
        with source.calibrated("context").open(cache, TARGET, THREADS, None) as calibrated:
            assert isinstance(calibrated.isolated, SelectiveCosts)  # calibration rounds keep measuring selectively
        selective.measure(PRICED)  # prices without measuring
        assert source.provenance(selective)["predicted"] == 4 and source.provenance(selective)["measured"] == 0
        assert source.provenance(selective)["initial_picks"] == 2 and source.provenance(selective)["pick_margin"] == 0.2
    (tmp_path / "junk.sqlite").write_text("not a database")
    with pytest.raises(CostSourceError):
        MeasuredSource().open(tmp_path / "junk.sqlite", TARGET, THREADS, None)
    with pytest.raises(CostSourceError, match="not a readable cost-model file"):
        XGBoostSource(tmp_path / "junk.sqlite").open(cache, TARGET, THREADS, None)


def test_tune_and_extract_measure_selectively_where_a_model_ships_and_experiments_measure_everything(
        tmp_path, monkeypatch):
    import cost_models.shipped as shipped

    here = "selective" if shipped.model_path().is_file() else "measured"  # AVX2 and AVX-512 hosts: selective
    assert default_source() == here
    assert build_parser().parse_args(["tune", "resnet18", "--out", "o"]).costs == here
    monkeypatch.setattr(shipped, "model_path", lambda unit=None: tmp_path / "none.json.gz")
    assert default_source() == "measured"  # a vector unit tessera ships no model for
    assert build_parser().parse_args(["extract", "resnet18", "--out", "p.json"]).costs == "measured"
    config = parse_config({"name": "c", "solvers": [{"name": "pbqp"}], "problems": [{"model": "resnet18"}]},
                          base=tmp_path)
    assert sources.DEFAULT == "measured" and config.problems[0].costs is None  # measured, on every host


@pytest.fixture
def constant_source():
    """A new source, registered for the test only: one class and the decorator."""

    @register
    @dataclass(frozen=True)
    class ConstantSource(CostSource):
        name = "constant"
        description = "price every task at 1 ms"

        def open(self, cache, target, threads, progress):
            raise NotImplementedError

    yield ConstantSource
    del COST_SOURCES["constant"]


def test_a_registered_source_is_offered_by_the_command_line_and_experiment_files(constant_source, tmp_path, capsys):
    parser = build_parser()
    assert parser.parse_args(["extract", "resnet18", "--costs", "constant", "--out", "p.json"]).costs == "constant"
    with pytest.raises(SystemExit):
        parser.parse_args(["extract", "--help"])
    assert (f"constant: price every task at 1 ms (default: selective where tessera ships a cost model for the host's "
            f"vector unit, else measured; here {default_source()})") in " ".join(capsys.readouterr().out.split())
    config = parse_config({"name": "c", "solvers": [{"name": "pbqp"}],
                           "problems": [{"model": "resnet18", "costs": ["measured", "constant"]}]}, base=tmp_path)
    assert [p.costs for p in config.problems] == [None, "constant"]
