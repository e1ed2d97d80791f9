"""Zoo networks re-emitted as ONNX and PyTorch compute what the stock TVM build computes, with the same weights."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import tvm

from search.errors import SearchError
from search.export import run_vm
from search.graph import extract_graph
from search.zoo import load_model, reference_outputs
from search.zoo.onnx import load_onnx
from search.zoo.onnx.save import to_onnx
from search.zoo.walk import walk
from tests.optional import needs
from tests.search.tiny_nets import unknown_ops_net

# mobilenet_v2: depthwise convs, clip, residual adds, dense; densenet121: BatchNorm without conv (multiply), average
# pools, channel concats; ssd: permute, reshape, 2-D concats and a tuple output.
NETWORKS = [("mobilenet_v2", 32), ("densenet121", 32), ("ssd_resnet50_512", 64)]
# the activations' ONNX operators: SiLU as Mul(x, Sigmoid(x)), the squeeze-and-excitation gates' Mul
ACTIVATION_OPERATORS = {
    "efficientnet_b0": {"Conv": 81, "Sigmoid": 49 + 16, "Mul": 49 + 16},
    "mobilenet_v3_large": {"Conv": 62, "HardSwish": 21, "HardSigmoid": 8, "Mul": 8, "Relu": 19},
}


@pytest.fixture(scope="module", params=NETWORKS, ids=[name for name, _ in NETWORKS])
def network(request):
    name, size = request.param
    mod = load_model(name, image_size=size)
    return name, mod, np.random.default_rng(1).standard_normal((1, 3, size, size)).astype("float32")


def _stock_output(mod, x: np.ndarray) -> list[np.ndarray]:
    """TVM's own build of the network on ``x``: compiled only by the tests that compare an optional engine with it."""
    return run_vm(tvm.compile(mod, target="llvm"), [x])


def _close(actual: list[np.ndarray], expected: list[np.ndarray]) -> None:
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape
        assert np.abs(a - e).max() <= 1e-4 * (1 + np.abs(e).max())


def test_walk_folds_biases_into_convolutions_and_dense_layers(network):
    name, mod, _ = network
    net = walk(mod)
    graph = extract_graph(mod)
    convs = [c for c in net.calls if c.op == "conv2d"]
    assert len(convs) == sum(op.kind in ("conv2d", "depthwise_conv2d") for op in graph.tunable)
    assert all(len(c.inputs) == 3 for c in convs)
    assert len(net.outputs) == (2 if name.startswith("ssd") else 1)


@needs("onnxruntime")
def test_onnx_matches_tvm_and_loads_back_to_the_same_graph(network, tmp_path):
    import onnx
    import onnxruntime as ort

    name, mod, x = network
    path = tmp_path / "net.onnx"
    onnx.save(to_onnx(mod), str(path))
    expected = _stock_output(mod, x)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    _close(session.run(None, {session.get_inputs()[0].name: x}), expected)
    if not name.startswith("ssd"):  # the ONNX importer takes single-output networks
        before, after = extract_graph(mod), extract_graph(load_onnx(path))
        assert [(op.kind, op.attrs) for op in after.tunable] == [(op.kind, op.attrs) for op in before.tunable]
        weighted = [(a, b) for a, b in zip(after.tunable, before.tunable) if "weight" in b.params]
        assert weighted and all(np.array_equal(a.params["weight"], b.params["weight"]) for a, b in weighted)


@needs("torch")
def test_pytorch_matches_tvm(network):
    import torch

    from search.zoo.torch_net import torch_module

    _, mod, x = network
    expected = _stock_output(mod, x)
    with torch.inference_mode():
        out = torch_module(mod)(torch.from_numpy(x))
    _close([o.numpy() for o in (out if isinstance(out, tuple) else (out,))], expected)


def test_operators_outside_the_vocabulary_are_refused():
    with pytest.raises(SearchError, match="outside the zoo vocabulary"):
        walk(unknown_ops_net())  # sin


NEW_OPERATORS = ["convnext_tiny", "yolov8n"]  # GELU, LayerNormalization; SiLU, Slice, Resize, Softmax, Sigmoid, Sub


def _onnx_and_reference(name: str) -> tuple:
    """A zoo network at 32 px, its ONNX file, an input and the numpy reference's output on it."""
    mod = load_model(name, image_size=32, seed=2)
    x = np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype("float32")
    return mod, to_onnx(mod), x, reference_outputs(name, x, seed=2)


@pytest.mark.parametrize("name", NEW_OPERATORS)
def test_onnx_of_the_new_operators_matches_numpy_and_imports_to_the_same_graph(name, tmp_path):
    """The operators written as PyTorch writes them: the file computes the zoo network (onnx's reference evaluator)
    and reads back into the same nodes."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    mod, model, x, expected = _onnx_and_reference(name)
    written = {node.op_type for node in model.graph.node}
    assert written >= ({"Erf", "LayerNormalization", "Gemm"} if name == "convnext_tiny" else
                       {"Sigmoid", "Mul", "Slice", "Resize", "Softmax", "Sub"})
    _close(ReferenceEvaluator(model).run(None, {"data": x}), [expected])
    path = tmp_path / "net.onnx"
    onnx.save(model, str(path))
    imported = load_onnx(path)
    _close(run_vm(tvm.compile(imported, target="llvm"), [x]), [expected])

    def value(v):  # float32, as ONNX stores the layer norms' epsilon; sets of value names (a concat's copies) sorted
        return np.float32(v) if isinstance(v, float) else tuple(sorted(v)) if isinstance(v, tuple) else v

    def nodes(graph) -> list[str]:  # in any order
        return sorted(repr((op.kind, {k: value(v) for k, v in op.attrs.items()})) for op in graph.ops
                      if op.role != "fixed")

    assert nodes(extract_graph(imported)) == nodes(extract_graph(mod))


@pytest.mark.parametrize("name", NEW_OPERATORS)
def test_onnx_runtime_runs_the_new_operators_as_numpy_does(name, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    import onnx

    _, model, x, expected = _onnx_and_reference(name)
    onnx.save(model, str(tmp_path / "net.onnx"))
    session = ort.InferenceSession(str(tmp_path / "net.onnx"), providers=["CPUExecutionProvider"])
    _close(session.run(None, {"data": x}), [expected])


def test_the_pytorch_peer_names_the_operators_it_cannot_write():
    from search.zoo.torch_net import unsupported_ops

    assert unsupported_ops(load_model("mobilenet_v2", image_size=32)) == []
    assert unsupported_ops(load_model("convnext_tiny", image_size=32)) == ["gelu", "layer_norm"]
    assert unsupported_ops(load_model("yolov8n", image_size=32)) == [
        "slice", "softmax", "subtract", "upsample"]


@pytest.fixture(scope="module", params=sorted(ACTIVATION_OPERATORS))
def activated(request, tmp_path_factory):
    """A squeeze-and-excitation network at 32x32, its ONNX file, an input and the numpy reference output."""
    import onnx

    name = request.param
    path = tmp_path_factory.mktemp(name) / "net.onnx"
    mod = load_model(name, image_size=32, seed=2)
    onnx.save(to_onnx(mod), str(path))
    x = np.random.default_rng(1).standard_normal((1, 3, 32, 32))
    return name, mod, path, x, reference_outputs(name, x, seed=2)


def test_activations_are_written_as_onnx_operators_and_load_back(activated):
    import onnx

    name, _, path, x, expected = activated
    operators = Counter(node.op_type for node in onnx.load(str(path)).graph.node)
    assert {op: operators[op] for op in ACTIVATION_OPERATORS[name]} == ACTIVATION_OPERATORS[name]
    assert not {"Div", "Clip"} & set(operators)
    _close(run_vm(tvm.compile(load_onnx(path), target="llvm"), [x.astype("float32")]), [expected])


def test_onnx_reference_evaluator_computes_the_numpy_reference(activated):
    from onnx.reference import ReferenceEvaluator

    _, _, path, x, expected = activated
    evaluator = ReferenceEvaluator(str(path))  # the ONNX operators' definitions, independent of TVM
    _close(evaluator.run(None, {evaluator.input_names[0]: x.astype("float32")}), [expected])


def test_onnx_runtime_computes_the_numpy_reference(activated):
    ort = pytest.importorskip("onnxruntime")
    _, _, path, x, expected = activated
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    _close(session.run(None, {session.get_inputs()[0].name: x.astype("float32")}), [expected])


def test_pytorch_computes_the_numpy_reference(activated):
    torch = pytest.importorskip("torch")
    from search.zoo.torch_net import torch_module

    _, mod, _, x, expected = activated
    with torch.inference_mode():
        out = torch_module(mod)(torch.from_numpy(x.astype("float32")))
    _close([out.numpy()], [expected])
