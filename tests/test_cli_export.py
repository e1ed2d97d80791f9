"""``tessera export`` and ``tessera run`` end to end on a small zoo model, and their one-line errors."""

from __future__ import annotations

import json
import shutil

import pytest

from experiments.cli import main
from search.graph import extract_graph
from search.isa import AVX2, AVX512, HOST
from search.plan import baseline_plan
from search.templates.common import sized_for
from search.zoo import load_model
from tests.cli_helpers import one_error_line


@pytest.fixture
def artifact(resnet18_artifact):
    return resnet18_artifact


def test_export_writes_a_checked_artifact(artifact, capsys):
    manifest = json.loads((artifact / "manifest.json").read_text())
    assert manifest["model"] == "resnet18" and manifest["input_shapes"] == {"data": [1, 3, 32, 32]}
    assert manifest["numerical_check"]["passed"] and (artifact / "model.so").is_file()
    assert json.loads((artifact / "plan.json").read_text())["args"]["image_size"] == 32


def test_export_into_an_earlier_artifact_replaces_its_files_and_leaves_nothing_else(artifact, tmp_path, capsys):
    out = tmp_path / "again"
    shutil.copytree(artifact, out)
    (out / "notes.txt").write_text("mine")
    assert main(["export", "resnet18", "--plan", "nchw", "--out", str(out), "--image-size", "32"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again"]  # no temporary directory beside it
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "model.so", "notes.txt", "plan.json"]
    assert json.loads((out / "manifest.json").read_text())["model"] == "resnet18"


def test_run_prints_latency(artifact, capsys):
    assert main(["run", str(artifact), "--repeat", "3", "--json"]) == 0
    latency = json.loads(capsys.readouterr().out)
    assert latency["repeat"] == 3 and latency["median_ms"] > 0 and latency["threads"] == 1


@pytest.mark.parametrize(
    "argv, message",
    [
        (["export", "nosuchnet", "--plan", "nchw"], "unknown model 'nosuchnet'"),
        (["export", "resnet18", "--plan", "nchw4c", "--image-size", "32"], "nchw4c: No such file"),
    ],
)
def test_export_user_errors(argv, message, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    assert message in one_error_line(capsys)


def test_export_rejects_a_plan_for_another_graph(artifact, capsys, tmp_path):
    plan = json.loads((artifact / "plan.json").read_text())
    plan["choices"]["conv2d_99"] = "NCHW>NCHW"
    (tmp_path / "bad.json").write_text(json.dumps(plan))
    argv = ["export", "resnet18", "--plan", str(tmp_path / "bad.json"), "--out", str(tmp_path / "out")]
    assert main([*argv, "--image-size", "32"]) == 2
    assert "unknown node(s) conv2d_99" in one_error_line(capsys)


def test_export_compiles_a_plan_tuned_on_another_vector_unit_with_its_sizing(artifact, capsys, tmp_path):
    other = AVX2 if HOST is AVX512 else AVX512
    graph = extract_graph(load_model("resnet18", image_size=32))
    with sized_for(other):  # the default knobs of the other unit, as a plan tuned there would have them
        plan = baseline_plan(graph, "nchw16c", "resnet18", {"batch": 1, "image_size": 32, "seed": 0})
    assert plan.vector_unit == other.name
    plan.save(tmp_path / "plan.json")
    out = tmp_path / "out"
    assert main(["export", "resnet18", "--plan", str(tmp_path / "plan.json"), "--out", str(out)]) == 0
    assert f"knobs were chosen for {other.name}, this host has {HOST.name}" in capsys.readouterr().err
    assert json.loads((out / "manifest.json").read_text())["vector_unit"] == other.name
    assert json.loads((out / "plan.json").read_text())["vector_unit"] == other.name


def test_run_rejects_a_directory_that_is_no_artifact(capsys, tmp_path):
    assert main(["run", str(tmp_path)]) == 2
    assert "not a tessera artifact" in one_error_line(capsys)
