"""``--input-shape`` on the commands that load a network: binding an ONNX file's dynamic dimensions, the zoo's form,
the plan that reloads the same shapes, and one ``error:`` line (exit 2) for every shape fault."""

from __future__ import annotations

import json

import numpy as np
import pytest

from experiments.cli import main
from tests.cli_helpers import one_error_line

onnx = pytest.importorskip("onnx")


@pytest.fixture(scope="module")
def dynamic(tmp_path_factory):
    """A conv, a Sigmoid (no kind: a fixed op) and a conv on an input of dynamic batch, height and width."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n)
             for n, s in (("w1", (8, 3, 3, 3)), ("w2", (8, 8, 1, 1)))]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c1"], ["s"]),
             helper.make_node("Conv", ["s", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "dynamic",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8, "H", "W"])], inits)
    path = tmp_path_factory.mktemp("onnx") / "dynamic.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_models_lists_an_onnx_file_at_the_given_shape(dynamic, capsys):
    assert main(["models", str(dynamic), "--input-shape", "1,3,16,24"]) == 0
    assert "16x24" in capsys.readouterr().out


def test_the_zoo_takes_n_3_s_s(capsys):
    assert main(["models", "resnet18", "--input-shape", "2,3,32,32"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[:2] == ["resnet18", "32"]


def test_export_records_the_shape_and_a_plan_reloads_it(dynamic, tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    assert main(["export", str(dynamic), "--plan", "nchw16c", "--input-shape", "x=2,3,16,24", "--out", str(first)]) == 0
    plan = json.loads((first / "plan.json").read_text())
    assert plan["args"]["input_shape"] == ["x=2,3,16,24"]
    assert main(["export", str(dynamic), "--plan", str(first / "plan.json"), "--out", str(second)]) == 0
    for out in (first, second):
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["input_shapes"] == {"x": [2, 3, 16, 24]} and manifest["numerical_check"]["passed"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["models", "{onnx}"], "input 'x' axis 2 ('H') is dynamic; bind it with --input-shape x=1,3,?,?"),
        (["models", "{onnx}", "--input-shape", "1,4,16,16"], "input 'x' axis 1 is 3 in the file, but --input-shape "
                                                             "gives 4"),
        (["models", "{onnx}", "--input-shape", "1,3,16"], "input 'x' has rank 4, but --input-shape 1,3,16 gives 3"),
        (["models", "{onnx}", "--input-shape", "1,3,a,16"], "input shape '1,3,a,16' is not a list of dimensions"),
        (["models", "{onnx}", "--input-shape", "y=1,3,16,16"], "no input named 'y'"),
        (["models", "resnet18", "--input-shape", "1,3,32,64"], "resnet18: a zoo model takes one input shape N,3,S,S"),
        (["extract", "{onnx}", "--input-shape", "1,3,16,16", "--batch", "1", "--out", "{tmp}/p.json"],
         "input_shape (--input-shape) and batch / image_size (--batch / --image-size) both given"),
        (["extract", "{onnx}", "--out", "{tmp}/p.json"], "input 'x' axis 2 ('H') is dynamic"),
        (["export", "{onnx}", "--plan", "nchw", "--out", "{tmp}/out"], "input 'x' axis 2 ('H') is dynamic"),
        (["costmodel", "train", "--models", "{onnx}", "--out", "{tmp}/m.json", "--cache", "{tmp}/c.sqlite",
          "--input-shape", "1,3,0,16"], "input shape '1,3,0,16' has a dimension below 1"),
    ],
)
def test_shape_faults_are_one_error_line(dynamic, tmp_path, capsys, argv, message):
    argv = [arg.format(onnx=dynamic, tmp=tmp_path) for arg in argv]
    assert main(argv) == 2
    assert message in one_error_line(capsys)
    assert not (tmp_path / "p.json").exists() and not (tmp_path / "out").exists()


def test_extract_solve_export_carry_the_shape_through_the_plan(dynamic, tmp_path, capsys):
    problem, plan, out = tmp_path / "problem.json", tmp_path / "plan.json", tmp_path / "out"
    assert main(["extract", str(dynamic), "--input-shape", "2,3,16,24", "--space-size", "1", "--layouts", "NCHW,NCHW8c",
                 "--threads", "1", "--cache", str(tmp_path / "costs.sqlite"), "--out", str(problem)]) == 0
    assert json.loads(problem.read_text())["meta"]["args"]["input_shape"] == ["2,3,16,24"]
    assert main(["solve", str(problem), "--out", str(plan)]) == 0
    assert main(["export", str(dynamic), "--plan", str(plan), "--out", str(out)]) == 0
    assert json.loads((out / "manifest.json").read_text())["input_shapes"] == {"x": [2, 3, 16, 24]}
