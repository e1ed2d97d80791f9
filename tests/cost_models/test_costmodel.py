"""The learned cost model: features, fit/predict on timings with a known law, save/load, the predicted and hybrid
cost sources on real measurements, and the metrics."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from cost_models import CostCache, KernelTask, MeasuredCosts, TransformTask
from cost_models.evaluate import Group, evaluate, network_groups, pairwise_accuracy, top_k
from cost_models.features import (
    FEATURE_NAMES,
    FEATURE_VERSION,
    INDEX,
    FeatureError,
    feature_matrix,
    feature_row,
    group_key,
)
from cost_models.learned import HybridCosts, PredictedCosts
from cost_models.xgb_model import ModelError, XGBCostModel
from search.isa import AVX2, AVX512, HOST
from search.kinds import KINDS
from search.templates import Conv2DWorkload, Epilogue, KernelSpec
from tests.cost_models.test_measure import TARGET, THREADS
from tests.quick_costs import QUICK

WORKLOADS = [Conv2DWorkload(1, ci, hw, hw, co, (k, k), (s, s), (k // 2,) * 4)
             for ci, co, hw, k, s in [(16, 32, 28, 3, 1), (32, 32, 14, 1, 1), (64, 128, 14, 3, 2), (32, 64, 56, 1, 1),
                                      (128, 64, 7, 3, 1), (64, 64, 28, 3, 1), (16, 64, 56, 1, 2), (128, 256, 14, 1, 1)]]


def tasks_of(workload: Conv2DWorkload, per_pair: int = 3) -> list[KernelTask]:
    """A node's candidates: every layout pair of fp32 values with its first few knob settings."""
    out = []
    kind = KINDS["conv2d"]
    for in_layout, out_layout in kind.supported_layouts(workload):
        if ".bf16" in in_layout + out_layout:  # a bf16 host's pairs of bf16 values: not on every host
            continue
        spec = KernelSpec(workload, in_layout, out_layout, epilogue=Epilogue(activation="relu"))
        out += [KernelTask(KernelSpec(workload, in_layout, out_layout, knobs, spec.epilogue))
                for knobs in kind.knob_space(spec, per_pair)]
    return out


def law(keys: list[str]) -> np.ndarray:
    """Synthetic times with a known law: FLOPs over vector-lane use, slower for NCHW inputs and small tiles."""
    x = feature_matrix(keys)
    flops = 2 ** x[:, INDEX["log_flops"]]
    return 1e-6 * flops / x[:, INDEX["oc_lane_use"]] * (1 + 2 * x[:, INDEX["in_nchw"]]) * (1 + 4 / x[:, INDEX["reg_n"]])


def test_features_are_deterministic_and_shape_correct():
    keys = [t.key for t in tasks_of(WORKLOADS[0])] + [TransformTask((1, 32, 28, 28), "NCHW", "NCHW16c").key]
    x = feature_matrix(keys)
    assert x.shape == (len(keys), len(FEATURE_NAMES)) and np.all(np.isfinite(x))
    assert np.array_equal(x, feature_matrix(keys)) and np.array_equal(x[0], feature_row(json.loads(keys[0])))
    assert x[:-1, INDEX["is_conv2d"]].all() and x[-1, INDEX["is_layout_transform"]] == 1
    assert len({tuple(row) for row in x}) == len(keys)  # distinct candidates, distinct rows
    assert len({group_key(k) for k in keys[:-1]}) == 1 and group_key(keys[-1]) != group_key(keys[0])
    # bf16 values in or out: half the bytes moved on that side, so other rows than the same kernel on fp32 values
    bf16 = [KernelTask(KernelSpec(WORKLOADS[1], i, o, (("bf16", 2),), Epilogue(activation="relu"))).key
            for i, o in [("NCHW32c", "NCHW32c"), ("NCHW32c.bf16", "NCHW32c"), ("NCHW32c", "NCHW32c.bf16")]]
    conversions = [TransformTask((1, 32, 28, 28), "NCHW16c", dst).key for dst in ("NCHW32c", "NCHW32c.bf16")]
    rows = feature_matrix(bf16 + conversions)[:, INDEX["log_bytes"]]
    assert rows[0] > rows[1] > 0 and rows[0] > rows[2] and rows[3] > rows[4]
    for bad in ('{"kind": "pool"}', "not json", '{"kind": "conv2d", "workload": {}}'):
        with pytest.raises(FeatureError):
            feature_row(bad)


@pytest.fixture(scope="module")
def synthetic():
    """Train on six workloads' candidates with law() times; the last two workloads are held out."""
    train = [t.key for w in WORKLOADS[:6] for t in tasks_of(w)]
    test = [[t.key for t in tasks_of(w)] for w in WORKLOADS[6:]]
    return train, law(train), test


@pytest.mark.parametrize("objective", ["regression", "rank"])
def test_a_model_learns_a_known_law_and_ranks_unseen_workloads(synthetic, objective):
    train, times, test = synthetic
    model = XGBCostModel(objective=objective).fit(train, times)
    groups = [Group(str(i), tuple(keys), tuple(law(keys))) for i, keys in enumerate(test)]
    metrics = evaluate(model, groups)
    assert metrics.pairwise_accuracy >= 0.85 and metrics.top5 >= 0.9 and metrics.records == sum(map(len, test))
    assert (metrics.r2_log is not None) == (objective == "regression")
    if objective == "regression":
        assert metrics.r2_log > 0.8


def test_training_is_deterministic_and_save_load_round_trips(synthetic, tmp_path):
    train, times, test = synthetic
    first, second = (XGBCostModel(seed=3).fit(train, times, {"source": "law"}) for _ in range(2))
    assert np.array_equal(first.predict(test[0]), second.predict(test[0]))
    loaded = XGBCostModel.load(first.save(tmp_path / "m.json"))
    assert np.array_equal(loaded.predict(test[0]), first.predict(test[0]))
    assert loaded.params() == first.params() and loaded.provenance["source"] == "law"
    assert loaded.provenance["records"] == len(train) and loaded.training_keys == first.training_keys


def test_a_model_boosted_on_new_times_moves_toward_them_and_leaves_the_model_it_came_from(synthetic, tmp_path):
    """A law the model was not trained on (twice as slow on the held-out workloads): boosting on half of those
    tasks brings the other half's predictions nearer the new law, keeps the base model's trees and data, and saves."""
    train, times, test = synthetic
    base = XGBCostModel(n_estimators=30).fit(train, times)
    before = base.predict(test[0])
    seen = [key for keys in test for key in keys[::2]]
    unseen = [key for keys in test for key in keys[1::2]]
    slower = 2 * np.asarray(law(seen))
    boosted = base.boosted(seen, slower, rounds=20)
    assert np.array_equal(base.predict(test[0]), before) and len(base.training_keys) == len(train)
    assert len(boosted.booster.get_dump()) == 30 + 20 and boosted.training_keys == base.training_keys + seen

    def error(model, keys):
        return float(np.mean(np.abs(np.log(model.predict(keys)) - np.log(2 * np.asarray(law(keys))))))

    assert error(boosted, seen) < error(base, seen) / 2 and error(boosted, unseen) < error(base, unseen)
    loaded = XGBCostModel.load(boosted.save(tmp_path / "boosted.json"))
    assert np.allclose(loaded.predict(unseen), boosted.predict(unseen))
    with pytest.raises(ModelError, match="only a trained regression model"):
        XGBCostModel(objective="rank").fit(train, times).boosted(seen, slower, rounds=5)
    with pytest.raises(ModelError, match="finite, positive times"):
        base.boosted(seen, -slower, rounds=5)


def test_unusable_model_files_are_refused_with_the_reason(synthetic, tmp_path):
    train, times, _ = synthetic
    path = XGBCostModel(n_estimators=5).fit(train, times).save(tmp_path / "m.json")
    document = json.loads(path.read_text())
    document["feature_version"] = 999
    path.write_text(json.dumps(document))
    with pytest.raises(ModelError, match="feature version 999.*retrain"):
        XGBCostModel.load(path)
    other = AVX2 if HOST is AVX512 else AVX512
    path.write_text(json.dumps({**document, "feature_version": FEATURE_VERSION, "vector_unit": other.name}))
    with pytest.raises(ModelError, match=f"trained on a host with {other.name}.*this host has {HOST.name}; retrain"):
        XGBCostModel.load(path)
    (tmp_path / "junk.json").write_text("{")
    with pytest.raises(ModelError, match="not a readable"):
        XGBCostModel.load(tmp_path / "junk.json")
    with pytest.raises(ModelError, match="positive"):
        XGBCostModel().fit(train[:2], [1.0, math.nan])
    with pytest.raises(ModelError, match="does not predict times"):
        PredictedCosts(XGBCostModel(objective="rank", n_estimators=5).fit(train, times))


def test_metrics_on_hand_made_orders():
    true = np.array([1.0, 2.0, 3.0, 4.0])
    assert pairwise_accuracy(true, true * 10) == (6, 6) and pairwise_accuracy(true, -true) == (0, 6)
    assert top_k(true, -true, 1) == 0.25 and top_k(true, -true, 4) == 1.0
    groups = network_groups({"a": {"x": 1.0, "y": 2.0}, "b": {"z": 3.0}})
    assert [g.weight for g in groups] == [0.25, 0.75]


@pytest.fixture(scope="module")
def real_tasks():
    """Two tiny workloads' candidates and a transform group: small enough to measure for real in seconds."""
    small = [Conv2DWorkload(1, 8, 8, 8, 16, (3, 3), (1, 1), (1, 1, 1, 1)),
             Conv2DWorkload(1, 16, 8, 8, 16, (1, 1), (1, 1), (0, 0, 0, 0))]
    transforms = [TransformTask((1, 16, 8, 8), src, dst) for src in ("NCHW", "NHWC") for dst in ("NCHW8c", "NCHW16c")]
    return [t for w in small for t in tasks_of(w, 1)] + transforms


def test_predicted_costs_measure_nothing_and_hybrid_measures_its_fraction(synthetic, real_tasks, tmp_path):
    train, times, _ = synthetic
    model = XGBCostModel(n_estimators=20).fit(train, times)
    predicted = PredictedCosts(model).measure(real_tasks)
    assert all(r.ok and r.repeats == 0 for r in predicted)

    cache = CostCache(tmp_path / "c.sqlite")
    measured = MeasuredCosts(cache, target=TARGET, threads=THREADS, **QUICK)
    with HybridCosts(measured, model, fraction=0.25, rounds=2) as hybrid:
        records = hybrid.measure(real_tasks)
    groups: dict[str, list] = {}
    for task, record in zip(real_tasks, records):
        groups.setdefault(group_key(task.key), []).append(record)
    for members in groups.values():  # the quota of every group, measured for real; the rest predicted
        assert sum(r.repeats > 0 for r in members) == math.ceil(0.25 * len(members))
    assert hybrid.stats["measured"] == len(cache) == sum(math.ceil(0.25 * len(m)) for m in groups.values())
    assert hybrid.stats["predicted"] == len(real_tasks) - len(cache)
    assert hybrid.model.provenance["refits"]  # refit on what it measured


def test_a_batch_matmuls_head_layouts_are_features():
    """The same attention matmul read head-major or through the layouts attention's permutes leave: distinct rows."""
    from search.templates.workloads import BatchMatmulWorkload

    workload = BatchMatmulWorkload(4, 16, 16, 16, heads=4)
    kind = KINDS["batch_matmul"]
    rows = {pair: feature_row(json.loads(KernelTask(KernelSpec(workload, *pair)).key))
            for pair in kind.supported_layouts(workload)}
    flags = {pair: tuple(row[INDEX[f"permuted_{x}"]] for x in ("a", "b", "out")) for pair, row in rows.items()}
    assert flags[("BIJ", "BIJ")] == (0, 0, 0) and flags[("NHCW+NWCH", "BIJ")] == (1, 1, 0)
    assert flags[("NCHW+NHCW", "NHCW")] == (0, 1, 1)
    assert len({tuple(row) for row in rows.values()}) == len(rows)
