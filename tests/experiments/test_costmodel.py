"""The cost model on real measurements of tiny networks: train from the cache, evaluate on a held-out network, and
price a problem with the xgboost and hybrid cost sources; CLI errors."""

from __future__ import annotations

import pytest

from cost_models.cache import CostCache
from cost_models.sources import HybridSource, XGBoostSource
from experiments.cli import main
from experiments.costmodel import evaluate_on, network_data, train
from experiments.extraction import extract
from search.errors import SearchError
from tests.cli_helpers import one_error_line
from tests.quick_costs import QuickMeasured
from tests.search.tiny_nets import residual_concat_net

SPACE = {"threads": 1, "space_size": 2, "layouts": "NCHW,NCHW8c"}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A cache holding the measured space of the 8x8 tiny net, and a model trained on it."""
    root = tmp_path_factory.mktemp("costmodel")
    cache = root / "costs.sqlite"
    extract(residual_concat_net(), name="tiny8", cache=cache, costs=QuickMeasured(), **SPACE)
    model, data = train(cache, [residual_concat_net()], root / "model.json", **SPACE)
    return root, cache, model, data


def test_training_reads_the_networks_measurements_from_the_cache(trained):
    root, cache, model, (data,) = trained
    assert data.missing == 0 and data.nodes and model.provenance["records"] == len(data.records)
    assert all(ms > 0 for times in data.nodes.values() for ms in times.values())
    assert network_data(residual_concat_net(size=16), cache, **SPACE).missing > 0  # other shapes: not measured


def test_held_out_evaluation_leaves_seen_workloads_out(trained):
    root, cache, _, _ = trained
    with pytest.raises(SearchError, match="not trained on"):
        evaluate_on(root / "model.json", [residual_concat_net()], cache, **SPACE)
    extract(residual_concat_net(size=16), name="tiny16", cache=cache, costs=QuickMeasured(), **SPACE)
    (row,) = evaluate_on(root / "model.json", [residual_concat_net(size=16)], cache, **SPACE)
    nodes = network_data(residual_concat_net(size=16), cache, **SPACE).nodes
    assert row["groups"] > 0 and row["groups"] + row["seen_nodes_left_out"] == len(nodes)
    for metric in ("pairwise_accuracy", "top1", "top5"):
        assert 0 <= row[metric] <= 1
    assert row["top5"] >= row["top1"]


def test_xgboost_costs_measure_nothing_and_hybrid_measures_a_fraction(trained, tmp_path):
    root, _, _, _ = trained
    predicted = extract(residual_concat_net(size=12), name="tiny12", cache=tmp_path / "empty.sqlite",
                        costs=XGBoostSource(root / "model.json"), **SPACE)
    costs = predicted.problem.meta["costs"]
    assert predicted.new == 0 and costs["source"] == "xgboost" and costs["predicted"] == predicted.tasks > 0
    hybrid = extract(residual_concat_net(size=12), name="tiny12", cache=tmp_path / "c.sqlite",
                     costs=HybridSource(root / "model.json", fraction=0.25), **SPACE)
    costs = hybrid.problem.meta["costs"]
    assert 0 < hybrid.new == costs["measured"] < hybrid.tasks and costs["predicted"] == hybrid.tasks - hybrid.new
    assert costs["cache"].endswith("c.sqlite") and costs["model"].endswith("model.json")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["costmodel", "eval", "--models", "resnet18", "--model", "{tmp}/junk.json"], "not a readable"),
        (["costmodel", "train", "--models", "nosuchnet", "--out", "{tmp}/m.json"], "unknown model"),
        (["costmodel", "train", "--out", "{tmp}/m.json"], "name the networks whose measurements to train on"),
        (["extract", "resnet18", "--costs", "measured", "--cost-model", "{tmp}/junk.json", "--out", "{tmp}/p.json"],
         "take a cost-model file"),
        (["extract", "resnet18", "--costs", "hybrid", "--cost-model", "{tmp}/junk.json", "--out", "{tmp}/p.json"],
         "not a readable"),
        (["extract", "resnet18", "--measure-fraction", "0.5", "--out", "{tmp}/p.json"],
         "the hybrid cost source takes a measured fraction (--measure-fraction), and measured, xgboost, "
         "calibrated and selective costs take"),
        (["extract", "resnet18", "--costs", "hybrid", "--cost-model", "{tmp}/junk.json", "--measure-fraction", "2",
          "--out", "{tmp}/p.json"], "the measured fraction must be in (0, 1], got 2.0"),
    ],
)
def test_cli_bad_input_is_one_error_line(argv, message, tmp_path, capsys, monkeypatch):
    (tmp_path / "junk.json").write_text("[1, 2")
    cache = CostCache(tmp_path / "costs.sqlite")
    len(cache)  # an empty cost cache as the default
    monkeypatch.setattr("cost_models.cache.DEFAULT_CACHE", cache.path)
    assert main([arg.format(tmp=tmp_path) for arg in argv]) == 2
    assert message in one_error_line(capsys)
