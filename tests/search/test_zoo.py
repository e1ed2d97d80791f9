"""The model zoo: architectures (conv2d counts, FLOPs), op vocabulary, weights, numerics against numpy."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax

from search.errors import SearchError
from search.export import export, run_vm
from search.graph import extract_graph
from search.host import make_target
from search.plan import baseline_plan
from search.zoo import MODELS, load_model, model_stats, reference_outputs
from search.zoo.inverted_residual import SqueezeExcite, squeeze_excite
from search.zoo.layers import Net, Network, Tensor, vocabulary_violations

TRANSFORMERS = {"bert_base", "bert_large", "bert_small", "vit_b16", "vit_small"}  # test_transformer_zoo.py
TARGET = make_target(2)

# name: (small image size for the test, conv2d, dense)
EXPECTED = {
    "resnet18": (32, 20, 1),
    "resnet50": (32, 53, 1),
    "vgg19_bn": (32, 16, 3),
    "inception_v3": (75, 94, 1),
    "densenet121": (32, 120, 1),
    "densenet201": (32, 200, 1),
    "mobilenet_v2": (32, 52, 1),
    "efficientnet_b0": (32, 81, 1),
    "mobilenet_v3_large": (32, 62, 2),
    "ssd_resnet50_512": (64, 73, 0),
    "convnext_tiny": (32, 22, 37),
    "yolov8n": (64, 64, 0),
    "yolov8s": (64, 64, 0),
}


def _constants(mod: tvm.IRModule) -> list[np.ndarray]:
    return [
        arg.value.numpy()
        for block in mod["main"].body.blocks
        for binding in block.bindings
        if isinstance(binding.value, relax.Call)
        for arg in binding.value.args
        if isinstance(arg, tvm.ir.expr.Constant)
    ]


def _run(mod: tvm.IRModule, data: np.ndarray):
    vm = relax.VirtualMachine(tvm.compile(mod, target=TARGET), tvm.cpu())
    out = vm["main"](tvm.runtime.tensor(data.astype(np.float32), tvm.cpu()))
    return out.numpy() if hasattr(out, "numpy") else tuple(o.numpy() for o in out)


def _relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    return float(np.linalg.norm(actual - expected) / np.linalg.norm(expected))


def test_registry_matches_expectations():
    assert set(MODELS) == set(EXPECTED) | TRANSFORMERS
    assert {name: spec.image_size for name, spec in MODELS.items()
            if spec.image_size != 224 and name not in TRANSFORMERS} == {
        "inception_v3": 299,
        "ssd_resnet50_512": 512,
        "yolov8n": 640,
        "yolov8s": 640,
    }
    assert all(spec.description for spec in MODELS.values())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_model_builds_with_exact_counts(name):
    size, conv2d, dense = EXPECTED[name]
    mod = load_model(name, batch=2, image_size=size)
    relax.analysis.well_formed(mod)
    assert vocabulary_violations(mod) == []
    params = mod["main"].params
    assert len(params) == 1 and [int(d) for d in params[0].ty.shape] == [2, 3, size, size]
    stats = model_stats(mod)
    assert (stats.conv2d, stats.dense) == (conv2d, dense)


@pytest.mark.parametrize(
    "name, gmacs",  # torchvision's published multiply-accumulates at the default size
    [("resnet50", 4.09), ("mobilenet_v2", 0.30), ("densenet121", 2.83), ("inception_v3", 5.71),
     ("efficientnet_b0", 0.386), ("mobilenet_v3_large", 0.217), ("convnext_tiny", 4.46)],
)
def test_gflops_at_default_size(name, gmacs):
    stats = model_stats(load_model(name))
    assert stats.gflops == pytest.approx(2 * gmacs, rel=0.03)


@pytest.mark.parametrize("name, gflops", [("yolov8n", 8.7), ("yolov8s", 28.6)])  # Ultralytics' figures at 640
def test_yolov8_gflops_at_640(name, gflops):
    assert model_stats(load_model(name)).gflops == pytest.approx(gflops, rel=0.01)


def test_resnet50_gflops_is_8_2():
    assert model_stats(load_model("resnet50")).gflops == pytest.approx(8.2, rel=0.01)


@pytest.mark.parametrize("name", ["resnet50", "densenet201", "efficientnet_b0", "mobilenet_v3_large",
                                  "convnext_tiny"])
def test_activations_stay_order_one(name):
    data = np.random.default_rng(7).standard_normal((2, 3, 64, 64))
    out = reference_outputs(name, data, seed=3)
    assert out.shape == (2, 1000) and np.isfinite(out).all()
    assert 0.1 < np.abs(out).mean() < 10 and out.std() > 0.1


def test_ssd_outputs_class_and_box_predictions():
    mod = load_model("ssd_resnet50_512", image_size=64)
    anchors = 4 * 4 * 4 + 2 * 2 * 6 + 6 + 6 + 4 + 4  # scales 4, 2, 1, 1, 1, 1 at 64x64
    fields = mod["main"].ret_ty.fields
    assert [[int(d) for d in f.shape] for f in fields] == [[1, anchors, 21], [1, anchors, 4]]
    data = np.random.default_rng(0).standard_normal((1, 3, 64, 64))
    cls, box = reference_outputs("ssd_resnet50_512", data)
    assert cls.shape == (1, anchors, 21) and box.shape == (1, anchors, 4)
    assert np.isfinite(cls).all() and 0.1 < np.abs(cls).mean() < 10


def test_yolov8_decodes_boxes_and_class_probabilities():
    from search.zoo.yolov8 import anchors

    data = np.random.default_rng(0).standard_normal((2, 3, 64, 64))
    out = reference_outputs("yolov8n", data)
    assert out.shape == (2, 84, 8 * 8 + 4 * 4 + 2 * 2) and np.isfinite(out).all()  # strides 8, 16, 32 at 64x64
    box, cls = out[:, :4], out[:, 4:]
    assert (box[:, 2:] > 0).all() and 0 < cls.min() and cls.max() < 1  # widths and heights; probabilities
    assert 0 < box[:, :2].mean() < 64  # centres (x, y) in pixels
    centres, strides = anchors([(2, 3), (1, 2)])
    assert centres[0].T.tolist() == [[0.5, 0.5], [1.5, 0.5], [2.5, 0.5], [0.5, 1.5], [1.5, 1.5], [2.5, 1.5],
                                     [0.5, 0.5], [1.5, 0.5]]  # x then y, row-major, per map
    assert strides.reshape(-1).tolist() == [8] * 6 + [16] * 2


def test_yolov8_takes_sides_that_are_multiples_of_32():
    with pytest.raises(SearchError, match="multiples of 32, got 48x48"):
        load_model("yolov8n", image_size=48)


@pytest.mark.parametrize("name, size", [("convnext_tiny", 32), ("yolov8n", 32)])  # yolov8s: yolov8n, wider
def test_new_nets_extract_and_a_blocked_export_matches_numpy(name, size):
    from search.export import export, random_inputs, run_vm
    from search.graph import extract_graph
    from search.plan import baseline_plan

    graph = extract_graph(load_model(name, image_size=size, seed=3))
    expected = reference_outputs(name, random_inputs(graph, 0)[0], seed=3)
    compiled = export(graph, baseline_plan(graph, "nchw16c"), target=TARGET, reference=[expected])
    assert compiled.manifest["numerical_check"]["relative_error"] < 1e-4
    data = np.random.default_rng(4).standard_normal((1, 3, size, size))
    assert _relative_error(run_vm(compiled.executable, [data.astype(np.float32)])[0],
                           reference_outputs(name, data, seed=3)) < 1e-5


def test_convnext_linears_are_dense_nodes_with_gelu_fused_and_layer_norms_row_nodes():
    from search.graph import extract_graph

    graph = extract_graph(load_model("convnext_tiny", image_size=32))
    dense = [op for op in graph.tunable if op.kind == "dense"]
    assert len(dense) == 37 and all(op.attrs["bias"] for op in dense)
    assert [op.attrs["activation"] for op in dense].count("gelu") == 18
    assert dense[0].input_shapes[0] == (64, 96)  # a block's rows: 8x8 pixels, 96 channels
    kinds = {op.kind for op in graph.tunable}
    assert {"layer_norm", "depthwise_conv2d", "conv2d", "add"} <= kinds
    assert sum(op.kind == "channel_scale" for op in graph.ops) == 18  # the layer scales follow the residual branch
    assert {op.kind for op in graph.ops if op.role == "fixed"} == {"permute_dims", "reshape"}


def test_resnet18_compiles_and_matches_numpy_reference():
    data = np.random.default_rng(1).standard_normal((1, 3, 32, 32))
    out = _run(load_model("resnet18", image_size=32, seed=5), data)
    assert out.shape == (1, 1000) and np.isfinite(out).all()
    assert _relative_error(out, reference_outputs("resnet18", data, seed=5)) < 1e-4


def _every_layer(net: Net, x: Tensor) -> tuple[Tensor, Tensor]:
    """One of each layer kind: depthwise conv, ReLU6, pools, concat, pre-activation BN, SSD-style head, dense."""
    a = net.conv(x, 8, 3, stride=2, padding=1, name="stem")
    b = net.conv(a, 8, 3, padding=1, groups=8, act="relu6", name="dw")
    b = net.conv(b, 8, (1, 3), padding=(0, 1), act="relu", residual=a, name="pw")
    c = net.avg_pool(a, 3, 1, 1, name="avg")
    cat = net.concat([b, c], name="cat")
    d = net.bn_act(cat, name="pre")
    d = net.max_pool(d, 3, 2, 1, name="max")
    head = net.conv(d, 6, 3, padding=1, bn=False, bias=True, act=None, name="head")
    head = net.permute(head, (0, 2, 3, 1), name="head_t")
    head = net.flatten(head, name="head_flat")
    head = net.reshape(head, (0, head.shape[1] // 3, 3), name="head_r")
    e = net.global_avg_pool(d, name="gap")
    e = net.flatten(e, name="flat")
    e = net.dense(e, 12, act="relu", name="fc1")
    return net.dense(e, 5, name="fc2"), head


def test_every_layer_kind_matches_numpy_after_compilation():
    network = Network(_every_layer, calibration_size=16)
    data = np.random.default_rng(2).standard_normal((2, 3, 16, 16))
    mod, (expected,) = network.build(batch=2, image_size=16, seed=4, references=[data])
    assert vocabulary_violations(mod) == []
    actual = _run(mod, data)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape
        assert _relative_error(a, e) < 1e-5


def _activations(net: Net, x: Tensor) -> tuple[Tensor, Tensor]:
    """Every activation after a conv, a dense or a BatchNorm, and squeeze-and-excitation gated by sigmoid and by
    HardSigmoid."""
    gate = net.bn_act(x, act="hardsigmoid", name="gate")
    a = net.conv(x, 8, 3, padding=1, act="silu", name="a")
    a = net.conv(a, 8, 3, padding=1, groups=8, act="hardswish", name="b")
    a = squeeze_excite(net, a, SqueezeExcite(4, act="relu", gate="hardsigmoid"), name="se1")
    a = squeeze_excite(net, a, SqueezeExcite(4, act="silu", gate="sigmoid"), name="se2")
    a = net.flatten(net.global_avg_pool(a, name="gap"), name="flat")
    return net.dense(a, 6, act="hardswish", name="fc"), gate


def test_every_activation_matches_numpy_after_compilation():
    network = Network(_activations, calibration_size=16)
    data = 3 * np.random.default_rng(2).standard_normal((2, 3, 16, 16))  # 3x the calibration: past the clip bounds
    mod, (expected,) = network.build(batch=2, image_size=16, seed=4, references=[data])
    assert vocabulary_violations(mod) == []
    assert 0 < np.mean(expected[1] == 0) < 0.5 and 0 < np.mean(expected[1] == 1) < 0.5
    for actual, wanted in zip(_run(mod, data), expected):
        assert _relative_error(actual, wanted) < 1e-5


@pytest.mark.parametrize("name", ["mobilenet_v3_large"])  # efficientnet_b0's blocks: SiLU as in yolov8n, the same SE
def test_squeeze_excitation_nets_export_in_a_uniform_layout_and_match_numpy(name):
    graph = extract_graph(load_model(name, image_size=32, seed=4))
    compiled = export(graph, baseline_plan(graph, "nchw16c"), target=make_target(1), threads=1, seed=4)
    data = np.random.default_rng(1).standard_normal((1, 3, 32, 32))
    (out,) = run_vm(compiled.executable, [data.astype(np.float32)])
    assert _relative_error(out, reference_outputs(name, data, seed=4)) < 1e-5


def test_seed_gives_same_weights_at_every_size():
    a = _constants(load_model("resnet18", image_size=32, seed=1))
    b = _constants(load_model("resnet18", batch=3, image_size=64, seed=1))
    c = _constants(load_model("resnet18", image_size=32, seed=2))
    assert len(a) == len(b) == len(c) == 2 * 20 + 2
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not any(np.array_equal(x, y) for x, y in zip(a, c))


def test_unknown_model_lists_the_zoo():
    with pytest.raises(SearchError, match="unknown model 'resnet1000'.*resnet18.*ssd_resnet50_512"):
        load_model("resnet1000")


def test_bad_sizes_are_rejected():
    with pytest.raises(SearchError, match="inception_v3: image_size must be an integer >= 75"):
        load_model("inception_v3", image_size=64)
    with pytest.raises(SearchError, match="batch must be a positive integer"):
        load_model("resnet18", batch=0)
    with pytest.raises(SearchError, match=r"1000000x3x224x224 has 150,528,000,000 elements, more than the 67,108,864"):
        load_model("resnet18", batch=10**6)
    with pytest.raises(SearchError, match="input shape '1,3,99999,99999' has 29,999,400,003 elements"):
        load_model("resnet18", input_shape="1,3,99999,99999")
    with pytest.raises(SearchError, match="seed must be an integer from 0 to 2"):
        load_model("resnet18", seed=-1)


def test_model_stats_reads_blocked_layouts():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 4, 10, 10, 8), "float32"))  # NCHW8c, 32 channels
    w = relax.const(np.zeros((2, 4, 3, 3, 8, 8), np.float32))  # OIHW8i8o: 16 out, 32 in
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_output(relax.op.nn.conv2d(x, w, padding=1, data_layout="NCHW8c", kernel_layout="OIHW8i8o"))
        bb.emit_func_output(y)
    stats = model_stats(bb.get())
    assert stats.conv2d == 1 and stats.gflops == pytest.approx(2 * 16 * 10 * 10 * 32 * 9 / 1e9)


def test_cli_models_table(capsys):
    from experiments.cli import main

    assert main(["models", "mobilenet_v2", "resnet18", "bert_small"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:6] == ["model", "input", "conv2d", "dense", "matmul", "GFLOPs"]
    assert lines[1].split()[:6] == ["mobilenet_v2", "224", "52", "1", "0", "0.602"]
    assert lines[2].split()[:6] == ["resnet18", "224", "20", "1", "0", "3.63"]
    assert lines[3].split()[:5] == ["bert_small", "1x16", "1x16", "0", "12"]  # input_ids and token_type_ids
    assert main(["models", "alexnet"]) == 2
    assert "unknown model 'alexnet'" in capsys.readouterr().err


def test_cli_models_lists_the_squeeze_excitation_nets(capsys):
    from experiments.cli import main

    assert main(["models", "efficientnet_b0", "mobilenet_v3_large"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:6] == ["efficientnet_b0", "224", "81", "1", "0", "0.772"]
    assert lines[2].split()[:6] == ["mobilenet_v3_large", "224", "62", "2", "0", "0.433"]
