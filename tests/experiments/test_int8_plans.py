"""int8 in plans, on a tiny network: calibration inputs give the int8 candidates their input ranges, plans mixing
fp32, bf16 and int8 export and are checked on those inputs, and bad calibration files, missing calibration and
missing instructions are refused in one line (the error budget with int8: ``test_budget``)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from experiments.cli import main
from search import precision
from search.activation_ranges import input_ranges, load_calibration
from search.calibrated import calibrated
from search.candidates import Candidate, node_candidates
from search.errors import SearchError
from search.export import check_inputs, export
from search.graph import extract_graph
from search.host import make_target
from search.plan import Plan, baseline_plan
from search.zoo import load_model
from tests.cli_helpers import one_error_line
from tests.search.tiny_nets import residual_concat_net

INT8 = precision.int8_settings()
needs_int8 = pytest.mark.skipif(not INT8, reason="this CPU has no int8 dot products (avx512_vnni, amx_int8)")
INT8_CAPABLE = [f"conv2d_{i}" for i in range(6)] + ["dense_0", "depthwise_conv2d_0"]


@pytest.fixture(scope="module")
def graph():
    return extract_graph(residual_concat_net())


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    path = tmp_path_factory.mktemp("calibration") / "inputs.npz"
    np.savez(path, data=np.random.default_rng(1).uniform(-2, 3, (5, 1, 3, 8, 8)).astype(np.float32))
    return path


def test_calibration_ranges_are_the_values_each_int8_capable_operator_reads(graph, calibration):
    samples = load_calibration(calibration, graph)
    assert len(samples) == 5 and samples[0][0].shape == (1, 3, 8, 8)
    ranges = input_ranges(graph, samples, make_target(1))
    assert sorted(ranges) == INT8_CAPABLE
    data = np.stack([sample[0] for sample in samples])
    assert ranges["conv2d_0"] == (float(data.min()), float(data.max()))  # the model's input itself
    assert ranges["conv2d_1"][0] >= 0  # after a ReLU
    clipped = input_ranges(graph, samples, make_target(1), "percentile")
    assert data.min() < clipped["conv2d_0"][0] < clipped["conv2d_0"][1] < data.max()
    fp32 = node_candidates(graph.op("conv2d_0"), precision="int8")
    assert all(precision.precision_of(c.knobs) == "fp32" for c in fp32)  # uncalibrated: no int8 candidate
    if INT8:
        int8 = node_candidates(calibrated(graph, ranges).op("conv2d_0"), precision="int8")
        assert {precision.precision_of(c.knobs) for c in int8} == {"int8"}


@pytest.mark.parametrize("arrays, message", [
    ({"image": np.zeros((1, 3, 8, 8), np.float32)}, "no array for input(s) data; unknown array(s) image"),
    ({"data": np.zeros((2, 3, 8, 8), np.float32)}, "has shape (2, 3, 8, 8); expected (1, 3, 8, 8) or (samples"),
    ({"data": np.zeros((1, 3, 8, 8), np.int64)}, "input data is int64, but the model reads float32"),
    ({"data": np.full((1, 3, 8, 8), np.nan, np.float32)}, "NaN or infinite"),
])
def test_a_bad_calibration_file_is_refused_naming_what_is_wrong(arrays, message, graph, tmp_path):
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(SearchError, match="calibration data .*bad.npz: ") as raised:
        load_calibration(path, graph)
    assert message in str(raised.value) and "\n" not in str(raised.value)
    (tmp_path / "text.npz").write_text("not a zip")
    with pytest.raises(SearchError, match="not a .npz of arrays"):
        load_calibration(tmp_path / "text.npz", graph)


def test_the_cli_refuses_calibration_problems_in_one_line(calibration, tmp_path, capsys):
    assert main(["extract", "resnet18", "--calibration-data", str(tmp_path / "none.npz"), "--image-size", "32",
                 "--out", str(tmp_path / "p.json")]) == 2
    assert "no such file" in one_error_line(capsys)
    assert main(["extract", "resnet18", "--precision", "int8", "--out", str(tmp_path / "p.json")]) == 2
    line = one_error_line(capsys)
    assert ("needs calibration inputs" if INT8 else "precision int8 needs amx_int8 or avx512_vnni") in line
    assert main(["extract", "resnet18", "--calibration-data", str(calibration), "--out", str(calibration)]) == 2
    assert "calibration data" in one_error_line(capsys) and np.load(calibration)["data"].shape == (5, 1, 3, 8, 8)
    assert not list(tmp_path.iterdir())


def test_int8_is_refused_on_a_cpu_without_its_instructions():
    with pytest.raises(SearchError, match="precision int8 needs amx_int8 or avx512_vnni, which this CPU"):
        precision.check_precision("int8", {"avx2", "avx512f", "avx512_bf16"})
    assert precision.int8_settings({"avx2", "avx512f", "avx512_bf16"}) == []


@needs_int8
def test_a_plan_mixing_fp32_bf16_and_int8_exports_with_its_ranges_and_is_checked_on_the_calibration_inputs(
        graph, calibration, tmp_path):
    samples = load_calibration(calibration, graph)
    ranges = input_ranges(graph, samples, make_target(1))
    choices = dict(baseline_plan(graph, "nchw").choices)
    for node in ("conv2d_1", "conv2d_4"):
        choices[node] = Candidate("NCHW", "NCHW", INT8[0]).name
    choices["depthwise_conv2d_0"] = Candidate("NHWC", "NCHW16c", ((precision.INT8_KNOB, precision.DOT),)).name
    if precision.bf16_settings():
        choices["conv2d_3"] = Candidate("NCHW", "NCHW", precision.bf16_settings()[0]).name
    quantised = ("conv2d_1", "conv2d_4", "depthwise_conv2d_0")
    plan = Plan(choices, "tiny", ranges={node: list(ranges[node]) for node in quantised})
    plan.save(tmp_path / "plan.json")
    assert Plan.load(tmp_path / "plan.json") == plan  # the ranges travel with the plan
    compiled = export(graph, plan, target=make_target(1), threads=1,
                      checked_on=check_inputs(graph, make_target(1), samples))
    check, manifest = compiled.manifest["numerical_check"], compiled.manifest
    assert manifest["int8_nodes"] == list(quantised) and manifest["ranges"] == plan.ranges
    assert check["samples"] == 5 and 0 < check["relative_error"] <= precision.DEFAULT_MAX_ERROR
    assert 0 <= check["top1_changed"] <= 1
    with pytest.raises(SearchError, match="computes in int8, which needs the range of its input"):
        export(graph, replace(plan, ranges={}), target=make_target(1), threads=1)


@needs_int8
def test_attentions_int8_matmuls_quantise_both_operands_over_their_own_ranges(tmp_path):
    graph = extract_graph(load_model("bert_small"))
    rng = np.random.default_rng(0)
    samples = [[rng.integers(0, 1000, (1, 16)), np.zeros((1, 16), np.int64)] for _ in range(4)]
    ranges = input_ranges(graph, samples, make_target(1))
    scores, context = ranges["batch_matmul_0"], ranges["batch_matmul_1"]
    assert len(scores) == len(context) == 4  # queries and keys; probabilities and values
    assert 0 <= context[0] < context[1] <= 1 and context[2] < 0 < context[3]
    choices = dict(baseline_plan(graph, "nchw").choices)
    setting = ((precision.INT8_KNOB, precision.DOT),)
    for node, pair in (("batch_matmul_0", ("NHCW+NWCH", "BIJ")), ("batch_matmul_1", ("NCHW+NHCW", "NHCW")),
                       ("batch_matmul_3", ("BIJ", "BIJ"))):
        choices[node] = Candidate(*pair, setting).name
    quantised = ("batch_matmul_0", "batch_matmul_1", "batch_matmul_3")
    plan = Plan(choices, "bert_small", ranges={node: list(ranges[node]) for node in quantised})
    plan.save(tmp_path / "plan.json")
    assert Plan.load(tmp_path / "plan.json") == plan
    compiled = export(graph, plan, target=make_target(1), threads=1,
                      checked_on=check_inputs(graph, make_target(1), samples))
    check = compiled.manifest["numerical_check"]
    assert compiled.manifest["int8_nodes"] == list(quantised)
    assert 1e-4 < check["relative_error"] <= precision.DEFAULT_MAX_ERROR
    with pytest.raises(SearchError, match=r"input range of batch_matmul_0 must be \[low, high, low, high\]"):
        calibrated(graph, {"batch_matmul_0": list(scores[:2])})
