"""The shipped cost models: each is trained on this tessera's features and on exactly the records shipped for its vector
unit; this host's (where one ships) predicts a task of every kind a problem prices, and the sources that take a model
use it when no file is given; a unit without one is named in one error; a model file reads back compressed."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from cost_models import shipped
from cost_models.errors import CostSourceError, ModelError
from cost_models.features import FEATURE_NAMES, FEATURE_VERSION, parse_key
from cost_models.learned import PredictedCosts
from cost_models.pricing import measurement_tasks
from cost_models.shipped import model_path, record_files, shipped_model, shipped_records, shipped_units
from cost_models.sources import MeasuredSource, SelectiveSource, XGBoostSource
from cost_models.xgb_model import XGBCostModel
from experiments.extraction import load_network
from search.isa import HOST, UNITS
from search.kinds import KINDS, KernelKind
from search.space import tuning_space
from search.templates.common import sized_for
from tests.cost_models.test_measure import TARGET, THREADS

HERE = pytest.mark.skipif(HOST.name not in shipped_units(), reason=f"tessera ships no cost model for {HOST.name}")
PRICED_KINDS = {name for name, kind in KINDS.items() if isinstance(kind, KernelKind)} | {"layout_transform", "chain"}
"""What the tasks of a problem are: a kernel of every kernel kind, layout transforms and follower chains."""


@pytest.fixture(scope="module")
def keys():
    """The tasks of three small networks' spaces that together hold every priced kind."""
    keys = []
    for name, size in (("bert_small", None), ("convnext_tiny", 32), ("mobilenet_v3_large", 32)):
        graph, _, _ = load_network(name, image_size=size)
        space = tuning_space(graph, layouts=["NCHW", "NCHW8c"], space_size=2)
        keys += [task.key for task in measurement_tasks(graph, space) if not task.free]
    return keys


def test_every_shipped_model_has_this_tesseras_features_and_exactly_its_units_records_on_any_host():
    assert shipped_units()
    for unit in shipped_units():
        with gzip.open(model_path(unit), "rt") as stream:
            document = json.load(stream)
        assert document["feature_version"] == FEATURE_VERSION and document["feature_names"] == list(FEATURE_NAMES)
        assert document["vector_unit"] == unit and document["params"]["objective"] == "regression"
        assert document["provenance"]["shipped"] == [path.name for path in record_files(unit)]
        for host_unit in UNITS.values():  # the templates sized for either unit, as on a host of it
            with sized_for(host_unit):
                assert sorted(document["training"]["keys"]) == sorted(shipped_records(unit)), host_unit.name


@HERE
def test_this_hosts_model_predicts_a_task_of_every_priced_kind(keys):
    assert {parse_key(key)["kind"] for key in keys} == PRICED_KINDS
    predicted = shipped_model().predict(keys)
    assert np.all(np.isfinite(predicted)) and np.all(predicted > 0)


@HERE
def test_a_source_given_no_model_file_uses_the_shipped_one(keys, tmp_path):
    provider = XGBoostSource().open(tmp_path / "costs.sqlite", TARGET, THREADS, None)
    assert isinstance(provider, PredictedCosts)
    assert provider.model.predict(keys[:20]) == pytest.approx(shipped_model().predict(keys[:20]))
    assert XGBoostSource().provenance(provider)["model"] == str(model_path())


def test_a_unit_without_a_shipped_model_is_named_in_one_error(monkeypatch, tmp_path):
    monkeypatch.setattr(shipped, "DIRECTORY", tmp_path)
    with pytest.raises(ModelError, match=f"tessera ships no cost model for {HOST.name} hosts"):
        shipped_model()
    with pytest.raises(CostSourceError, match="give it with --cost-model"):
        XGBoostSource().open(tmp_path / "costs.sqlite", TARGET, THREADS, None)


def test_tune_says_in_one_line_what_selective_measurement_with_the_shipped_model_predicted():
    from types import SimpleNamespace

    from experiments.tune import _selective_line

    extracted = SimpleNamespace(costs={"predicted": 7}, tasks=20)  # what the line reads of an extraction
    line = _selective_line(SelectiveSource(), extracted)
    assert line.startswith(f"costs: selective, with the cost model tessera ships for {HOST.name} hosts")
    assert "7 of 20 tasks predicted" in line and "--costs measured" in line
    assert _selective_line(SelectiveSource("m.json"), extracted) is None
    assert _selective_line(MeasuredSource(), extracted) is None


@pytest.mark.parametrize("name", ["m.json", "m.json.gz"])
def test_a_model_file_reads_back_the_same_compressed_or_not(name, keys, tmp_path):
    keys = keys[:40]
    model = XGBCostModel(n_estimators=5).fit(keys, list(np.linspace(0.1, 2.0, len(keys))))
    path = model.save(tmp_path / name)
    assert (path.read_bytes()[:2] == b"\x1f\x8b") == name.endswith(".gz")
    assert XGBCostModel.load(path).predict(keys) == pytest.approx(model.predict(keys))
