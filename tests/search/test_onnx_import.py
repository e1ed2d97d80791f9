"""ONNX import: small ONNX graphs built with onnx.helper, rewritten into the zoo's op vocabulary."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import tvm
from tvm import relax

from search.errors import SearchError
from search.zoo import load_model, model_stats
from search.zoo.layers import vocabulary_violations

TARGET = tvm.target.Target({"kind": "llvm", "mcpu": tvm.target.codegen.llvm_get_system_cpu(), "num-cores": 2})
C = 8


@pytest.fixture(scope="module")
def onnx():
    return pytest.importorskip("onnx")


def _model(onnx, *, batch="N", size=32, extra_nodes=(), clip=(0.0, 6.0)):
    """Conv+bias+BN+Relu, MaxPool, Conv+BN+residual Add, Clip, lone BN+Relu, Concat, AveragePool,
    GlobalAveragePool, a Shape/Gather/Unsqueeze/Concat/Reshape flatten, Dropout, Gemm (the torch.onnx idioms)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = []

    def param(name, array):
        inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(name, shape):
        return param(name, (rng.standard_normal(shape) * 0.3).astype(np.float32))

    gamma, beta = weight("gamma", (C,)), weight("beta", (C,))
    mean, var = weight("mean", (C,)), param("var", rng.uniform(0.5, 1.5, C).astype(np.float32))
    bn = [gamma, beta, mean, var]
    node = helper.make_node
    nodes = [
        node("Conv", ["x", weight("w1", (C, 3, 3, 3)), weight("b1", (C,))], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
        node("BatchNormalization", ["c1", *bn], ["bn1"]),
        node("Relu", ["bn1"], ["r1"]),
        node("MaxPool", ["r1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        node("Conv", ["p1", weight("w2", (C, C, 3, 3))], ["c2"], pads=[1, 1, 1, 1]),
        node("BatchNormalization", ["c2", *bn], ["bn2"]),
        node("Add", ["bn2", "p1"], ["a2"]),
        node("Clip", ["a2", param("lo", np.float32(clip[0])), param("hi", np.float32(clip[1]))], ["r2"]),
        node("BatchNormalization", ["r2", *bn], ["bn3"]),
        node("Relu", ["bn3"], ["r3"]),
        node("Concat", ["r3", "r2"], ["cat"], axis=1),
        node("AveragePool", ["cat"], ["ap"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1),
        node("GlobalAveragePool", ["ap"], ["gap"]),
        node("Shape", ["gap"], ["shape"]),
        node("Gather", ["shape", param("zero", np.array(0, np.int64))], ["n"], axis=0),
        node("Unsqueeze", ["n", param("axes", np.array([0], np.int64))], ["n1"]),
        node("Concat", ["n1", param("rest", np.array([-1], np.int64))], ["flat_shape"], axis=0),
        node("Reshape", ["gap", "flat_shape"], ["flat"]),
        node("Dropout", ["flat"], ["drop"]),
        node("Gemm", ["drop", weight("fc", (10, 2 * C)), weight("fcb", (10,))], ["y"], transB=1),
        *extra_nodes,
    ]
    output = extra_nodes[-1].output[0] if extra_nodes else "y"
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, size, size])],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, [batch, 10])],
        initializer=inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(mod, data):
    vm = relax.VirtualMachine(tvm.compile(mod, target=TARGET), tvm.cpu())
    return vm["main"](tvm.runtime.tensor(data, tvm.cpu())).numpy()


def test_import_folds_into_the_vocabulary_and_keeps_numerics(onnx, tmp_path):
    from tvm.relax.frontend.onnx import from_onnx

    model = _model(onnx)
    path = tmp_path / "tiny.onnx"
    onnx.save(model, str(path))
    mod = load_model(str(path), batch=2)
    assert vocabulary_violations(mod) == []
    ops = [b.value.op.name for blk in mod["main"].body.blocks for b in blk.bindings if isinstance(b.value, relax.Call)]
    assert ops.count("relax.nn.conv2d") == 2 and "relax.nn.batch_norm" not in ops
    assert ops.count("relax.clip") == 1 and ops.count("relax.multiply") == 1  # ReLU6 and the lone BatchNorm
    assert "relax.nn.adaptive_avg_pool2d" in ops and "relax.call_tir" not in ops
    stats = model_stats(mod)
    assert (stats.conv2d, stats.dense) == (2, 1)

    data = np.random.default_rng(1).standard_normal((2, 3, 32, 32)).astype(np.float32)
    expected = _run(from_onnx(model, shape_dict={"x": [2, 3, 32, 32]}), data)
    actual = _run(mod, data)
    assert np.abs(actual - expected).max() <= 1e-5 * np.abs(expected).max()


def test_dynamic_dimensions_are_bound_or_rejected(onnx):
    from search.zoo.onnx import import_onnx_model

    mod = import_onnx_model(_model(onnx, batch="N"), batch=3)
    assert [int(d) for d in mod["main"].params[0].ty.shape] == [3, 3, 32, 32]
    with pytest.raises(SearchError, match="static N = 4, but batch=1"):
        import_onnx_model(_model(onnx, batch=4))
    with pytest.raises(SearchError, match="static H = 32, but image_size=64"):
        import_onnx_model(_model(onnx), image_size=64)
    with pytest.raises(SearchError, match="input 'x' has a dynamic dimension H \\('S'\\); pass image_size"):
        import_onnx_model(_model(onnx, size="S"))
    mod = import_onnx_model(_model(onnx, size="S"), image_size=40)
    assert [int(d) for d in mod["main"].params[0].ty.shape] == [1, 3, 40, 40]


def test_unsupported_operator_is_named(onnx):
    from onnx import helper

    from search.zoo.onnx import import_onnx_model

    softmax = helper.make_node("Softmax", ["y"], ["prob"], name="head_softmax")
    with pytest.raises(SearchError, match="unsupported ONNX operator\\(s\\) Softmax \\(node 'head_softmax'\\)"):
        import_onnx_model(_model(onnx, extra_nodes=[softmax]))


def test_clip_other_than_relu6_is_rejected(onnx):
    from search.zoo.onnx import import_onnx_model

    with pytest.raises(SearchError, match="Clip\\(min=0.0, max=1.0\\) is not supported"):
        import_onnx_model(_model(onnx, clip=(0.0, 1.0)))


def test_missing_file_and_bad_file(onnx, tmp_path):
    with pytest.raises(FileNotFoundError):
        load_model(str(tmp_path / "absent.onnx"))
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a protobuf at all")
    with pytest.raises(SearchError, match="not a readable ONNX file"):
        load_model(str(bad))


def test_without_onnx_the_error_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "onnx", None)  # makes `import onnx` raise ImportError
    with pytest.raises(SearchError, match="pip install onnx"):
        load_model(str(tmp_path / "model.onnx"))


def test_several_outputs_come_back_as_a_tuple(onnx, tmp_path):
    """Two heads, as in SSD: the frontend gathers the outputs in a tuple binding before returning it."""
    from onnx import TensorProto, helper, numpy_helper
    from tvm.relax.frontend.onnx import from_onnx

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n)
             for n, s in (("w1", (C, 3, 3, 3)), ("w2", (4, C, 1, 1)))]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"]),
    ]
    outputs = [helper.make_tensor_value_info("r1", TensorProto.FLOAT, [1, C, 16, 16]),
               helper.make_tensor_value_info("c2", TensorProto.FLOAT, [1, 4, 16, 16])]
    data_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])
    graph = helper.make_graph(nodes, "heads", [data_info], outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "heads.onnx"
    onnx.save(model, str(path))
    mod = load_model(str(path))
    assert vocabulary_violations(mod) == []

    data = np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(np.float32)
    run = [relax.VirtualMachine(tvm.compile(m, target=TARGET), tvm.cpu())["main"](tvm.runtime.tensor(data, tvm.cpu()))
           for m in (mod, from_onnx(model))]
    assert len(run[0]) == len(run[1]) == 2
    for actual, expected in zip(*run):
        assert np.abs(actual.numpy() - expected.numpy()).max() <= 1e-5 * np.abs(expected.numpy()).max()
