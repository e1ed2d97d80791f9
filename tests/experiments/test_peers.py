"""Peers: engines timed side by side in worker processes, and MetaSchedule tuned for a wall-clock budget."""

from __future__ import annotations

import gc
import json

import numpy as np
import pytest

from experiments.peers import Contender, feed, interleaved_peers, onnx_dtype, save_onnx, save_pytorch
from search.artifact import load_artifact
from search.export import TOLERANCE, export
from search.graph import extract_graph
from search.plan import Plan, baseline_plan
from search.zoo import load_model
from tests.optional import needs
from tests.search.tiny_nets import build

SIZE = 32


@pytest.fixture(scope="module")
def network(tmp_path_factory):
    """resnet18 at 32 px: its mod and its exported all-NCHW plan."""
    work = tmp_path_factory.mktemp("peers")
    mod = load_model("resnet18", image_size=SIZE)
    graph = extract_graph(mod)
    plan = Plan(baseline_plan(graph, "nchw").choices, "resnet18", {"image_size": SIZE})
    return mod, export(graph, plan, threads=1).save(work / "nchw"), work


@needs("onnxruntime")
def test_contenders_are_timed_in_interleaved_rounds(network):
    mod, artifact, work = network
    contenders = [Contender("plan", "tvm", artifact), Contender("onnx", "onnxruntime", save_onnx(mod, work / "m.onnx"))]
    try:
        import torch  # noqa: F401

        contenders.append(Contender("torch", "pytorch-cl", save_pytorch(mod, work / "m.pt")))
    except ImportError:
        pass
    lines = []
    result = interleaved_peers(contenders, rounds=3, threads=1, echo=lines.append)
    assert set(result) == {c.label for c in contenders}
    for r in result.values():
        assert r["rounds"] == 3 and r["number"] >= 1 and r["threads_used"] == 1
        assert 0 < r["min_ms"] <= r["p25_ms"] <= r["median_ms"] <= r["p75_ms"] <= r["max_ms"]
        assert r["max_error"] <= TOLERANCE  # the same network and weights in every engine
    assert result["plan"]["max_error"] == 0.0
    assert sum(line.startswith("round ") for line in lines) == 3


@needs("openvino")
def test_openvino_runs_the_onnx_file_in_f32_and_in_the_precision_it_picks(network):
    mod, artifact, work = network
    onnx_file = save_onnx(mod, work / "ov.onnx")
    contenders = [Contender("plan", "tvm", artifact), Contender("ov", "openvino", onnx_file),
                  Contender("ov-f32", "openvino-f32", onnx_file)]
    result = interleaved_peers(contenders, rounds=1, threads=1)
    assert result["ov-f32"]["precision"] == "f32" and result["ov-f32"]["max_error"] <= TOLERANCE
    assert result["ov"]["precision"] in ("f32", "bf16", "f16") and result["ov"]["threads_used"] == 1
    assert "FP32" in result["ov"]["cpu_capabilities"]


def test_pytorch_runs_a_zoo_transformer_with_its_integer_inputs_as_tessera_does(tmp_path):
    pytest.importorskip("torch")
    mod = load_model("bert_small")
    graph = extract_graph(mod)
    plan = Plan(baseline_plan(graph, "nchw").choices, "bert_small")
    contenders = [Contender("plan", "tvm", export(graph, plan, threads=1).save(tmp_path / "plan")),
                  Contender("torch", "pytorch", save_pytorch(mod, tmp_path / "m.pt", "bert_small"))]
    result = interleaved_peers(contenders, rounds=1, threads=1, echo=lambda line: None)
    assert result["torch"]["max_error"] <= TOLERANCE  # the same token ids, weights and network


def test_onnx_inputs_are_fed_in_their_type_or_refused_by_name():
    assert [onnx_dtype(t) for t in ("tensor(float)", "tensor(int64)", "tensor(int32)")] == ["float32", "int64", "int32"]
    with pytest.raises(ValueError, match=r"tensor\(double\): only tensor\(float\)"):
        onnx_dtype("tensor(double)")


def test_every_contender_runs_the_given_input_and_a_wrong_one_is_named(network, tmp_path):
    mod, artifact, _ = network
    specs = [("data", (1, 3, SIZE, SIZE), "float32")]
    given = tmp_path / "input.npz"
    np.savez(given, data=np.full((1, 3, SIZE, SIZE), 0.5, np.float32))
    assert feed(specs, given)["data"].mean() == 0.5 and feed(specs)["data"].std() > 0.5  # seed 0: standard normal
    contenders = [Contender("given", "tvm", artifact, inputs=given), Contender("random", "tvm", artifact)]
    result = interleaved_peers(contenders, rounds=1, threads=1)
    assert result["random"]["max_error"] > 0.01  # another input, other outputs: the file was run
    np.savez(given, data=np.zeros((1, 3, SIZE + 1, SIZE), np.float32))
    with pytest.raises(ValueError, match=r"input data has shape \(1, 3, 33, 32\); the network reads"):
        feed(specs, given)
    np.savez(given, image=np.zeros((1, 3, SIZE, SIZE), np.float32))
    with pytest.raises(ValueError, match="no array for input.s. data"):
        feed(specs, given)


def test_a_worker_that_cannot_load_is_named(tmp_path):
    with pytest.raises(RuntimeError, match="broken: the tvm worker exited"):
        interleaved_peers([Contender("broken", "tvm", tmp_path / "missing")], rounds=1, threads=1)


@pytest.fixture
def frozen_heap():
    """Keeps the objects earlier tests left alive out of the garbage collector's scans during the test: MetaSchedule's
    first tuning context imports its tensor intrinsics, ~500 TVMScript functions parsed, whose allocations trigger
    collections that otherwise walk the whole suite's heap."""
    gc.freeze()
    yield
    gc.unfreeze()


def test_metaschedule_stops_at_its_budget_and_saves_a_checked_artifact(tmp_path, frozen_heap):
    from tvm.s_tir import meta_schedule as ms

    from experiments.metaschedule import tune_metaschedule

    def two_convs(net, x):
        return net.conv(net.conv(x, 8), 4)

    mod = build((1, 3, 8, 8), two_convs)  # two tasks: the warm-up round sends both batches before joining either
    manifest = tune_metaschedule(mod, tmp_path / "ms", budget_seconds=1, threads=1, work_dir=tmp_path / "work",
                                 trials_per_iteration=4, population=16)  # a short warm-up round
    facts = manifest["metaschedule"]
    assert facts["tasks"] == 2
    assert facts["trials"] == 2 * 4  # the deadline ended tuning after the warm-up round
    records = ms.database.JSONDatabase(work_dir=str(tmp_path / "work")).get_all_tuning_records()
    assert len({str(record.workload.mod) for record in records}) == 2  # every task's batch reached the database
    assert manifest["numerical_check"]["passed"]
    assert json.loads((tmp_path / "ms" / "metaschedule.json").read_text()) == facts
    assert load_artifact(tmp_path / "ms").manifest["threads"] == 1
