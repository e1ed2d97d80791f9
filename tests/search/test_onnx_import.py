"""ONNX import: small ONNX graphs built with onnx.helper, rewritten into the zoo's op vocabulary where it has a form
and otherwise kept as TVM's frontend made them, always computing what TVM's own build of the graph computes."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import tvm
from tvm import relax

from search.errors import SearchError
from search.host import make_target
from search.numerics import relative_error
from search.zoo import load_model, model_stats
from search.zoo.layers import vocabulary_violations

TARGET = make_target(2)
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


def _close(actual, expected):
    assert relative_error([actual], [expected]) <= 1e-5


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
    _close(_run(mod, data), _run(from_onnx(model, shape_dict={"x": [2, 3, 32, 32]}), data))


def test_dynamic_dimensions_are_bound_or_rejected(onnx):
    from search.zoo.onnx import import_onnx_model

    mod = import_onnx_model(_model(onnx, batch="N"), batch=3)
    assert [int(d) for d in mod["main"].params[0].ty.shape] == [3, 3, 32, 32]
    assert [int(d) for d in import_onnx_model(_model(onnx, batch="N"))["main"].params[0].ty.shape][0] == 1
    with pytest.raises(SearchError, match="input 'x' axis 0 is 4 in the file, but batch gives 1"):
        import_onnx_model(_model(onnx, batch=4), batch=1)
    with pytest.raises(SearchError, match="input 'x' axis 2 is 32 in the file, but image_size gives 64"):
        import_onnx_model(_model(onnx), image_size=64)
    with pytest.raises(SearchError, match="input 'x' axis 2 \\('S'\\) is dynamic; bind it with --input-shape "
                                          "x=1,3,\\?,\\?"):
        import_onnx_model(_model(onnx, size="S"))
    mod = import_onnx_model(_model(onnx, size="S"), image_size=40)
    assert [int(d) for d in mod["main"].params[0].ty.shape] == [1, 3, 40, 40]
    mod = import_onnx_model(_model(onnx, size="S"), input_shape="2,3,24,24")
    assert [int(d) for d in mod["main"].params[0].ty.shape] == [2, 3, 24, 24]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"input_shape": "1,3,64,64"}, "input 'x' axis 2 is 32 in the file, but --input-shape gives 64"),
        ({"input_shape": "1,3,32"}, "input 'x' has rank 4, but --input-shape 1,3,32 gives 3 dimensions"),
        ({"input_shape": "y=1,3,32,32"}, "no input named 'y'; it has 1 input \\('x'\\)"),
        ({"input_shape": "1,3,x,32"}, "input shape '1,3,x,32' is not a list of dimensions"),
        ({"input_shape": ["x=1,3,32,32", "x=2,3,32,32"]}, "input 'x' is given twice"),
    ],
)
def test_input_shape_faults_are_one_message(onnx, kwargs, message):
    from search.zoo.onnx import import_onnx_model

    with pytest.raises(SearchError, match=message):
        import_onnx_model(_model(onnx), **kwargs)


def test_input_shape_and_batch_together_are_refused(onnx, tmp_path):
    onnx.save(_model(onnx), str(tmp_path / "tiny.onnx"))
    with pytest.raises(SearchError, match="input_shape \\(--input-shape\\) and batch / image_size .* both given"):
        load_model(str(tmp_path / "tiny.onnx"), batch=1, input_shape="1,3,32,32")


def test_clip_with_other_bounds_becomes_a_clip(onnx):
    from tvm.relax.frontend.onnx import from_onnx

    from search.zoo.onnx import import_onnx_model

    model = _model(onnx, clip=(0.0, 1.0))
    mod = import_onnx_model(model)
    clips = [b.value for blk in mod["main"].body.blocks for b in blk.bindings
             if isinstance(b.value, relax.Call) and b.value.op.name == "relax.clip"]
    assert [(float(c.args[1].value), float(c.args[2].value)) for c in clips] == [(0.0, 1.0)]
    data = np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype(np.float32)
    _close(_run(mod, data), _run(from_onnx(model, shape_dict={"x": [1, 3, 32, 32]}), data))


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


def _graph(onnx, nodes, inputs, outputs, inits=(), opset=17):
    """A model of ``nodes`` with float32 ``inputs`` / ``outputs`` given as (name, shape) and numpy initializers."""
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        initializer=[numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _matches_the_frontend(model, mod, **shape):
    """``mod`` (tessera's import of ``model``) computes what TVM's own build of ``model`` computes."""
    from tvm.relax.frontend.onnx import from_onnx

    from search.export import random_arrays, run_vm
    from search.zoo.onnx import bound_model

    bound, shapes = bound_model(model, **shape)
    data = random_arrays(list(shapes.values()), 1)
    expected = run_vm(tvm.compile(from_onnx(bound, keep_params_in_input=False), target=TARGET), data)
    actual = run_vm(tvm.compile(mod, target=TARGET), data)
    assert relative_error(actual, expected) <= 1e-5
    tvm.ir.assert_structural_equal(relax.transform.CanonicalizeBindings()(mod), mod)


def _ops(mod) -> list[str]:
    return [b.value.op.name for blk in mod["main"].body.blocks for b in blk.bindings
            if isinstance(b.value, relax.Call)]


def test_operators_without_a_rule_run_as_the_frontend_made_them(onnx):
    """The OCR models' operators (PP-OCR's classifier, DBNet, SVTR) around two convs, at a bound dynamic H and W."""
    from onnx import helper

    rng = np.random.default_rng(0)
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        node("HardSigmoid", ["c1"], ["hs"], alpha=0.2, beta=0.5),
        node("Mul", ["c1", "hs"], ["hswish"]),  # two activations
        node("Sigmoid", ["hswish"], ["sg"]),
        node("ReduceMean", ["sg"], ["mu"], axes=[1]),  # over channels: a layer norm's
        node("Sub", ["hswish", "mu"], ["centred"]),
        node("Pow", ["centred", "two"], ["square"]),
        node("ReduceMean", ["square"], ["var"], axes=[1]),
        node("Add", ["var", "eps"], ["var_eps"]),
        node("Sqrt", ["var_eps"], ["std"]),
        node("Div", ["centred", "std"], ["normed"]),
        node("ConvTranspose", ["normed", "wt"], ["up"], strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]),
        node("Resize", ["up", "", "scales"], ["half"], mode="nearest"),
        node("Slice", ["half", "starts", "ends", "axes"], ["sliced"]),
        node("Conv", ["sliced", "w2"], ["c2"]),
        node("Softmax", ["c2"], ["y"], axis=1),
    ]
    inits = [("w1", (rng.standard_normal((C, 3, 3, 3)) * 0.3).astype(np.float32)),
             ("wt", (rng.standard_normal((C, 4, 3, 3)) * 0.3).astype(np.float32)),  # overlapping blocks
             ("w2", (rng.standard_normal((4, 2, 1, 1)) * 0.3).astype(np.float32)),
             ("two", np.float32(2.0)), ("eps", np.float32(1e-5)),
             ("scales", np.array([1, 1, 0.5, 0.5], np.float32)),
             ("starts", np.array([0], np.int64)), ("ends", np.array([2], np.int64)), ("axes", np.array([1], np.int64))]
    model = _graph(onnx, nodes, [("x", ["N", 3, "H", "W"])], [("y", ["N", 4, "H", "W"])], inits)
    from search.zoo.onnx import import_onnx_model

    mod = import_onnx_model(model, input_shape="2,3,16,24")
    assert [int(d) for d in mod["main"].params[0].ty.shape] == [2, 3, 16, 24]
    ops = _ops(mod)
    for op in ("relax.sigmoid", "relax.mean", "relax.power", "relax.sqrt", "relax.divide", "relax.nn.conv2d_transpose",
               "relax.image.resize2d", "relax.strided_slice", "relax.nn.softmax", "relax.clip"):
        assert op in ops, op
    assert ops.count("relax.nn.conv2d") == 2
    _matches_the_frontend(model, mod, input_shape="2,3,16,24")


def test_call_tir_of_the_frontends_primfuncs_is_kept_with_its_primfunc(onnx):
    """Pad lowers to a TIR kernel, Clip of opset 10 to maximum/minimum kernels without a bound tensor."""
    from onnx import helper

    nodes = [helper.make_node("Pad", ["x"], ["padded"], mode="reflect", pads=[0, 0, 1, 1, 0, 0, 1, 1]),
             helper.make_node("Clip", ["padded"], ["y"], min=-0.5, max=0.5)]
    model = _graph(onnx, nodes, [("x", [1, 3, 8, 8])], [("y", [1, 3, 10, 10])], opset=10)
    from search.zoo.onnx import import_onnx_model

    mod = import_onnx_model(model)
    calls = [b.value.args[0] for blk in mod["main"].body.blocks for b in blk.bindings
             if isinstance(b.value, relax.Call) and b.value.op.name == "relax.call_tir"]
    assert calls and all(isinstance(mod[gv], tvm.tirx.PrimFunc) for gv in calls)
    _matches_the_frontend(model, mod)


def test_several_inputs_are_bound_by_name(onnx):
    from onnx import helper

    w = (np.random.default_rng(0).standard_normal((C, 3, 3, 3)) * 0.3).astype(np.float32)
    nodes = [helper.make_node("Conv", ["image", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "skip"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    model = _graph(onnx, nodes, [("image", ["N", 3, "H", "W"]), ("skip", ["N", C, "H", "W"])],
                   [("y", ["N", C, "H", "W"])], [("w", w)])
    from search.zoo.onnx import import_onnx_model

    shapes = ["image=2,3,8,12", "skip=2,8,8,12"]
    mod = import_onnx_model(model, input_shape=shapes)
    assert [(p.name, [int(d) for d in p.ty.shape]) for p in mod["main"].params] == \
        [("image", [2, 3, 8, 12]), ("skip", [2, C, 8, 12])]
    _matches_the_frontend(model, mod, input_shape=shapes)
    with pytest.raises(SearchError, match="has 2 inputs \\('image', 'skip'\\): name each one's shape"):
        import_onnx_model(model, input_shape="2,3,8,12")
    with pytest.raises(SearchError, match="input 'skip' axis 2 \\('H'\\) is dynamic; bind it with --input-shape "
                                          "skip=1,8,\\?,\\?"):
        import_onnx_model(model, input_shape="image=2,3,8,12")
    with pytest.raises(SearchError, match="batch and image_size bind a single \\(N, C, H, W\\) input"):
        import_onnx_model(model, image_size=8)


def test_inputs_keep_the_names_the_file_gives_them(onnx):
    """TVM's frontend makes ``input.1`` ``input_1``; calibration data and artifacts use the file's name."""
    from onnx import helper

    w = (np.random.default_rng(0).standard_normal((C, 3, 3, 3)) * 0.3).astype(np.float32)
    nodes = [helper.make_node("Conv", ["input.1", "w"], ["y"], pads=[1, 1, 1, 1])]
    model = _graph(onnx, nodes, [("input.1", [1, 3, 8, 8])], [("y", [1, C, 8, 8])], [("w", w)])
    from search.zoo.onnx import import_onnx_model

    assert [p.name for p in import_onnx_model(model)["main"].params] == ["input.1"]


def test_an_input_that_is_not_float32_is_named(onnx):
    from onnx import TensorProto, helper

    from search.zoo.onnx import import_onnx_model

    graph = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    with pytest.raises(SearchError, match=r"input 'x' is double; tessera takes float32 inputs \(and int32 or int64 "
                                          r"index inputs such as token ids\) only"):
        import_onnx_model(helper.make_model(graph))


def test_shape_arithmetic_on_the_bound_shape_is_folded(onnx):
    """Paddle's flatten: Shape, Cast to int32, Slice, Cast back, Concat, Reshape (TVM's frontend alone refuses it)."""
    from onnx import TensorProto, helper

    node = helper.make_node
    nodes = [node("GlobalAveragePool", ["x"], ["pooled"]),
             node("Shape", ["pooled"], ["shape"]),
             node("Cast", ["shape"], ["shape32"], to=TensorProto.INT32),
             node("Slice", ["shape32", "zero", "one"], ["batch32"]),
             node("Cast", ["batch32"], ["batch"], to=TensorProto.INT64),
             node("Concat", ["batch", "minus_one"], ["target"], axis=0),
             node("Reshape", ["pooled", "target"], ["y"])]
    inits = [("zero", np.array([0], np.int32)), ("one", np.array([1], np.int32)),
             ("minus_one", np.array([-1], np.int64))]
    model = _graph(onnx, nodes, [("x", ["N", 3, "H", "W"])], [("y", ["N", 3])], inits)
    from search.zoo.onnx import import_onnx_model

    mod = import_onnx_model(model, input_shape="2,3,8,8")
    assert [int(d) for d in mod["main"].ty.ret.shape] == [2, 3]
    _matches_the_frontend(model, mod, input_shape="2,3,8,8")


SQRT2, BETA, KAPPA = np.sqrt(2.0), np.sqrt(2.0 / np.pi), 0.044715
GELUS = {  # name -> (nodes as (op, inputs), output); "x" is the input, "c:<value>" a float32 scalar initializer
    "erf, Hugging Face": ([("Div", "x c:1.4142135"), ("Erf", "d"), ("Add", "e c:1"), ("Mul", "x a"),
                           ("Mul", "m c:0.5")], "gelu"),
    "erf, half first, times 1/sqrt(2)": ([("Mul", "x c:0.5"), ("Mul", f"c:{1 / SQRT2} x"), ("Erf", "m1"),
                                          ("Add", "c:1 e"), ("Mul", "m a")], "gelu"),
    "tanh, gelu_new with Pow": ([("Mul", "c:0.5 x"), ("Pow", "x c:3"), ("Mul", f"p c:{KAPPA}"), ("Add", "x m1"),
                                 ("Mul", f"a c:{BETA}"), ("Tanh", "m2"), ("Add", "t c:1"), ("Mul", "m a1")],
                                "gelu_tanh"),
    "tanh, x*x*x, half last": ([("Mul", "x x"), ("Mul", "m x"), ("Mul", f"c:{KAPPA} m1"), ("Add", "m2 x"),
                                ("Mul", f"c:{BETA} a"), ("Tanh", "m3"), ("Add", "c:1 t"), ("Mul", "a1 x"),
                                ("Mul", "c:0.5 m4")], "gelu_tanh"),
    "erf, wrong constant": ([("Div", "x c:1.5"), ("Erf", "d"), ("Add", "e c:1"), ("Mul", "x a"),
                             ("Mul", "m c:0.5")], None),
    "erf, no half": ([("Div", "x c:1.4142135"), ("Erf", "d"), ("Add", "e c:1"), ("Mul", "x a")], None),
    "erf of another tensor": ([("Div", "z c:1.4142135"), ("Erf", "d"), ("Add", "e c:1"), ("Mul", "x a"),
                               ("Mul", "m c:0.5")], None),
    "tanh, wrong kappa": ([("Mul", "c:0.5 x"), ("Pow", "x c:3"), ("Mul", "p c:0.05"), ("Add", "x m1"),
                           ("Mul", f"a c:{BETA}"), ("Tanh", "m2"), ("Add", "t c:1"), ("Mul", "m a1")], None),
}


def _gelu_model(onnx, steps):
    """Nodes named after their operator (``m``, ``m1``, ... for the second, third Mul) on inputs x and z (4, 8)."""
    from onnx import helper

    nodes, inits, seen = [], [], {}
    for op, args in steps:
        inputs = []
        for arg in args.split():
            if arg.startswith("c:"):
                inits.append((f"c{len(inits)}", np.float32(arg[2:])))
                arg = inits[-1][0]
            inputs.append(arg)
        count = seen[op] = seen.get(op, -1) + 1
        nodes.append(helper.make_node(op, inputs, [op[0].lower() + (str(count) if count else "")]))
    nodes[-1].output[0] = "y"
    return _graph(onnx, nodes, [("x", [4, 8]), ("z", [4, 8])], [("y", [4, 8])], inits)


@pytest.mark.parametrize("name", GELUS)
def test_gelu_as_exporters_write_it_becomes_one_call_and_nothing_else_does(onnx, name):
    from search.zoo.onnx import import_onnx_model

    steps, gelu = GELUS[name]
    model = _gelu_model(onnx, steps)
    mod = import_onnx_model(model, input_shape=["x=4,8", "z=4,8"])
    if gelu is not None:
        assert _ops(mod) == [f"relax.nn.{gelu}"]
    else:
        assert "relax.nn.gelu" not in _ops(mod) and len(_ops(mod)) == len(steps)
    _matches_the_frontend(model, mod, input_shape=["x=4,8", "z=4,8"])


def test_silu_as_exporters_write_it_fuses_into_the_convolution(onnx, tmp_path):
    """``Mul(x, Sigmoid(x))`` after a convolution (YOLO-style): the convolution's activation, exported and checked."""
    from onnx import helper

    from search.export import export
    from search.graph import extract_graph
    from search.plan import baseline_plan

    w = (np.random.default_rng(0).standard_normal((C, 3, 3, 3)) * 0.3).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", ["c", "s"], ["y"])]
    model = _graph(onnx, nodes, [("x", [1, 3, 16, 16])], [("y", [1, C, 16, 16])], [("w", w)])
    onnx.save(model, str(tmp_path / "silu.onnx"))
    mod = load_model(str(tmp_path / "silu.onnx"))
    _matches_the_frontend(model, mod)
    graph = extract_graph(mod)
    assert [(op.kind, op.attrs["activation"]) for op in graph.ops] == [("conv2d", "silu")]
    compiled = export(graph, baseline_plan(graph, "nchw16c"), target=TARGET, threads=1)
    assert compiled.manifest["numerical_check"]["relative_error"] <= 1e-4


def test_a_transposed_convolution_whose_kernel_is_its_stride_becomes_a_tuned_pointwise_convolution(onnx, tmp_path):
    """ConvTranspose with kernel = stride (DBNet's and U-Nets' upsampling; here 2 x 3, with a bias, a BatchNorm and
    a Relu after it): a 1x1 conv2d the search tunes, with the bias and BatchNorm folded in, and its channels put in
    place, computing what TVM's own build of the file does, exported and checked."""
    from onnx import helper

    from search.export import export
    from search.graph import extract_graph
    from search.plan import baseline_plan

    rng = np.random.default_rng(1)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("ConvTranspose", ["c", "wt", "bt"], ["up"], kernel_shape=[2, 3], strides=[2, 3]),
             helper.make_node("BatchNormalization", ["up", "gamma", "beta", "mean", "var"], ["bn"]),
             helper.make_node("Relu", ["bn"], ["y"])]
    inits = [("w", (rng.standard_normal((C, 3, 3, 3)) * 0.3).astype(np.float32)),
             ("wt", (rng.standard_normal((C, 4, 2, 3)) * 0.3).astype(np.float32)),
             ("bt", rng.standard_normal(4).astype(np.float32)), ("gamma", rng.uniform(0.5, 1.5, 4).astype(np.float32)),
             ("beta", rng.standard_normal(4).astype(np.float32)), ("mean", rng.standard_normal(4).astype(np.float32)),
             ("var", rng.uniform(0.5, 1.5, 4).astype(np.float32))]
    model = _graph(onnx, nodes, [("x", [1, 3, 8, 10])], [("y", [1, 4, 16, 30])], inits)
    onnx.save(model, str(tmp_path / "up.onnx"))
    mod = load_model(str(tmp_path / "up.onnx"))
    ops = _ops(mod)
    assert "relax.nn.conv2d_transpose" not in ops and "relax.nn.batch_norm" not in ops
    assert ops.count("relax.nn.conv2d") == 2 and ops.count("relax.permute_dims") == 1
    _matches_the_frontend(model, mod)
    graph = extract_graph(mod)
    convs = [op for op in graph.ops if op.kind == "conv2d"]
    assert [(op.attrs["kernel"], op.shape[1]) for op in convs] == [((3, 3), C), ((1, 1), 4 * 2 * 3)]
    assert convs[1].attrs.get("activation") is None  # the Relu acts after the channels are put in place
    compiled = export(graph, baseline_plan(graph, "nchw16c"), target=TARGET, threads=1)
    assert compiled.manifest["numerical_check"]["relative_error"] <= 1e-4
