"""Exporting plans: mixed layouts side by side, numerical check, artifact round trip, uniform baselines."""

from __future__ import annotations

import gc
import importlib.metadata
import json
import tempfile

import pytest
import tvm
from tvm import relax

from search.artifact import load_artifact, measure_latency
from search.emit import emit_module
from search.errors import SearchError
from search.export import export, random_inputs, reference_outputs, run_vm
from search.graph import extract_graph
from search.host import make_target
from search.isa import HOST
from search.lower import lower_and_compile
from search.numerics import relative_error
from search.plan import Plan, baseline_plan, validate
from tests.search.tiny_nets import add_node_net, residual_concat_net, ssd_like_net, unknown_ops_net

# NCHW, NHWC, NCHW8c and NCHW16c side by side; concat_0 (NCHW16c) gets one input in NHWC and one in NCHW8c; the
# residual of conv2d_1 arrives in NHWC and must be converted to its NCHW8c output layout.
MIXED = {
    "conv2d_0": "NCHW>NHWC",
    "conv2d_1": "NHWC>NCHW8c",
    "conv2d_2": "NCHW8c>NHWC:reg_n=2",
    "conv2d_3": "NCHW16c>NCHW8c",
    "concat_0": "NCHW16c",
    "conv2d_4": "NCHW16c>NCHW",
    "depthwise_conv2d_0": "NCHW8c",
    "conv2d_5": "NHWC>NCHW16c",
    "dense_0": "NC>NC",
}


@pytest.fixture(scope="module")
def graph():
    return extract_graph(residual_concat_net())


@pytest.fixture(scope="module")
def target():
    return make_target(1)


def _transforms(module) -> set[str]:
    bindings = [b.var.name for block in module["main"].body.blocks for b in block.bindings]
    return {name for name in bindings if "_to_" in name}


def test_mixed_plan_exports_matches_reference_and_reloads(graph, target, tmp_path):
    plan = Plan(MIXED, model="tiny", args={"batch": 1})
    emitted = emit_module(graph, validate(plan, graph), target)
    assert {"conv2d_2_to_NCHW16c", "conv2d_3_to_NCHW16c", "conv2d_0_to_NCHW8c"} <= _transforms(emitted.module)
    assert "conv2d_1_to_NCHW16c" not in _transforms(emitted.module)  # the pool runs in its producer's NCHW8c
    assert len(emitted.kernels) == 8 and all(f.attrs["tir.is_scheduled"] for f in emitted.kernels.values())

    compiled = export(graph, plan, target=target, threads=1, seed=3)
    check = compiled.manifest["numerical_check"]
    assert check["passed"] and check["relative_error"] <= 1e-4 and check["seed"] == 3

    compiled.save(tmp_path / "art")
    manifest = json.loads((tmp_path / "art" / "manifest.json").read_text())
    assert manifest["input_shapes"] == {"data": [1, 3, 8, 8]} and manifest["threads"] == 1
    assert manifest["vector_unit"] == HOST.name  # the plan names none: the host's
    assert manifest["tvm_version"] == tvm.__version__ and manifest["tessera_version"]
    artifact = load_artifact(tmp_path / "art")
    assert artifact.plan == plan
    inputs = random_inputs(graph, 7)
    dev = tvm.cpu()
    vm = relax.VirtualMachine(artifact.library, dev)
    out = vm["main"](tvm.runtime.tensor(inputs[0], dev)).numpy()
    reference = run_vm(tvm.compile(graph.module, target=target), inputs)
    assert out.shape == (1, 10) and relative_error([out], reference) <= 1e-4


def test_a_plan_compiles_with_the_vector_unit_its_knobs_were_chosen_for(graph, target):
    # 8-column tiles of 16 channels: 8 accumulators with AVX-512, 16 (more than AVX2's 14) with AVX2
    choices = {**baseline_plan(graph, "nchw").choices, "conv2d_0": "NCHW>NCHW16c:reg_n=8,unroll_kw=1"}
    compiled = export(graph, Plan(choices, "tiny", {}, "avx512"), target=target, threads=1)
    assert compiled.manifest["vector_unit"] == "avx512" and compiled.manifest["numerical_check"]["passed"]
    with pytest.raises(SearchError, match="conv2d_0.*reg_n=8"):
        export(graph, Plan(choices, "tiny", {}, "avx2"), target=target, threads=1)


@pytest.mark.parametrize("baseline", ["nchw", "nhwc", "nchw16c"])
def test_uniform_baselines_export(baseline, target):
    graph = extract_graph(add_node_net())  # standalone add node, per-channel scale/shift, softmax, two outputs
    compiled = export(graph, baseline_plan(graph, baseline), target=target, threads=1)
    assert compiled.manifest["numerical_check"]["relative_error"] <= 1e-4
    assert len(run_vm(compiled.executable, random_inputs(graph, 0))) == 2


def test_blocked_predictors_feed_fixed_ssd_outputs(target):
    graph = extract_graph(ssd_like_net())  # 12-channel predictors: nchw16c falls back to NCHW4c
    plan = baseline_plan(graph, "nchw16c")
    assert plan.candidate("conv2d_2").out_layout == "NCHW4c"
    compiled = export(graph, plan, target=target, threads=1)
    assert compiled.manifest["numerical_check"]["relative_error"] <= 1e-4
    assert run_vm(compiled.executable, random_inputs(graph, 0))[0].shape == (1, 240, 4)


def test_a_given_reference_is_what_the_plan_is_checked_against(graph, target, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the checked libraries are written
    plan = Plan(MIXED, model="tiny", args={"batch": 1})
    reference = reference_outputs(graph, target, 5)
    once = export(graph, plan, target=target, threads=1, seed=5)
    given = export(graph, plan, target=target, threads=1, seed=5, reference=reference)
    assert given.manifest["numerical_check"] == once.manifest["numerical_check"]
    assert once.library.parent.parent == tmp_path and once.library.exists()
    del once, given  # their libraries go with them; a failed check leaves none
    gc.collect()
    with pytest.raises(SearchError, match="numerical check failed"):
        export(graph, plan, target=target, threads=1, seed=5, reference=[2.0 * r for r in reference])
    assert list(tmp_path.iterdir()) == []


def test_an_export_interrupted_after_its_check_leaves_no_library(graph, target, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def interrupted(name):  # a signal while the manifest is written, after the numerical check
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib.metadata, "version", interrupted)
    with pytest.raises(KeyboardInterrupt):
        export(graph, baseline_plan(graph, "nchw16c"), target=target, threads=1)
    assert list(tmp_path.iterdir()) == []


def test_invalid_plan_fails_before_compiling(graph, target):
    with pytest.raises(SearchError, match="conv2d_0.*divisible by 32"):
        export(graph, Plan({**MIXED, "conv2d_0": "NCHW>NCHW32c"}), target=target)


def test_pipeline_check_detects_a_changed_kernel(graph, target):
    emitted = emit_module(graph, validate(Plan(MIXED), graph), target)
    names = sorted(emitted.kernels)
    swapped = {names[0]: emitted.kernels[names[1]]}
    with pytest.raises(RuntimeError, match=f"changed template kernel {names[0]}"):
        lower_and_compile(emitted.module, swapped, target)  # noqa: B018


def test_measure_latency(graph, target, tmp_path):
    export(graph, baseline_plan(graph, "nchw16c"), target=target).save(tmp_path)
    latency = measure_latency(load_artifact(tmp_path), repeat=3)
    assert 0 < latency.min_ms <= latency.median_ms <= latency.max_ms and latency.repeat == 3
    assert latency.threads == 1 and latency.runtime_threads >= 1 and latency.spread_ms >= 0
    with pytest.raises(SearchError, match="not a tessera artifact"):
        load_artifact(tmp_path / "nowhere")


@pytest.mark.parametrize("baseline", ["nchw", "nchw16c"])
def test_operators_without_a_kind_run_as_tvm_compiles_them(baseline, target):
    graph = extract_graph(unknown_ops_net())
    fixed = [op.kind for op in graph.ops if op.role == "fixed"]
    assert fixed == ["sin", "nn.conv2d", "split", "tuple_item", "tuple_item", "call_tir"]
    assert [op.kind for op in graph.tunable] == ["conv2d", "concat", "conv2d", "conv2d"]
    compiled = export(graph, baseline_plan(graph, baseline), target=target, threads=1)
    assert compiled.manifest["numerical_check"]["relative_error"] <= 1e-4
