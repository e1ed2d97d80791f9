"""Every registered activation fused into every kernel template's epilogue computes its numpy reference; the activation
forms exporters write are recognised after a convolution, and an activation after a matmul of two activations, and
each is exported inside its kernel."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from search.errors import SearchError
from search.followers import FOLLOWERS, ActivationKind
from search.host import make_target
from search.kinds import get_kind
from search.kinds.checks import check_kernel
from search.templates import winograd
from search.templates.workloads import BatchMatmulWorkload, Conv2DWorkload, DenseWorkload, Epilogue, KernelSpec

TARGET = make_target(1)
ACTIVATIONS = sorted(name for name, kind in FOLLOWERS.items() if isinstance(kind, ActivationKind))
CONV = Conv2DWorkload(1, 16, 6, 7, 16, (3, 3), (1, 1), (1, 1, 1, 1))  # Winograd: input channels in whole vectors
KERNELS = {  # one small kernel of each template, in blocked layouts (the epilogue indexes channels in blocks)
    "conv2d": KernelSpec(CONV, "NCHW8c", "NCHW16c"),
    "winograd": KernelSpec(CONV, "NCHW8c", "NCHW8c"),
    "depthwise_conv2d": KernelSpec(Conv2DWorkload(1, 16, 7, 6, 16, (3, 3), (1, 1), (1, 1, 1, 1), groups=16),
                                   "NCHW16c", "NCHW16c"),
    "dense": KernelSpec(DenseWorkload(3, 32, 24), "NC", "NC"),
    "batch_matmul": KernelSpec(BatchMatmulWorkload(6, 5, 4, 9, heads=3), "NHCW+NWCH", "NHCW"),
}


def _spec(template: str, activation: str) -> KernelSpec:
    spec = KERNELS[template]
    attrs = tuple(FOLLOWERS[activation].attributes.items())
    bias, residual = template != "batch_matmul", template not in ("dense", "batch_matmul")
    spec = replace(spec, epilogue=Epilogue(bias, residual, activation, activation_attrs=attrs))
    if template == "winograd":
        knobs = next(k for k in get_kind("conv2d").knob_space(spec) if dict(k).get(winograd.KNOB) == 2)
        spec = replace(spec, knobs=knobs)
    return spec


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("template", sorted(KERNELS))
def test_each_activation_fused_into_each_template_matches_numpy(template, activation):
    check_kernel(_spec(template, activation), target=TARGET)


@pytest.mark.parametrize("template", ["conv2d", "winograd", "depthwise_conv2d", "dense"])
def test_a_residual_after_the_activation_matches_numpy(template):
    spec = _spec(template, "silu")
    check_kernel(replace(spec, epilogue=Epilogue(True, True, "silu", residual_after_activation=True)), target=TARGET)
    with pytest.raises(SearchError, match="needs a residual and an activation"):
        Epilogue(True, False, "silu", residual_after_activation=True)


def test_an_unknown_activation_is_refused_naming_the_registered_ones():
    with pytest.raises(SearchError, match="unknown activation 'swish2'; registered activations: relu, "):
        Epilogue(activation="swish2")


def test_activation_attributes_are_part_of_the_kernel_key_only_when_set():
    from search.templates.workloads import epilogue_key

    assert epilogue_key(Epilogue(activation="relu")) == {"bias": True, "residual": False, "activation": "relu"}
    leaky = epilogue_key(Epilogue(activation="leaky_relu", activation_attrs=(("alpha", 0.1),)))
    assert leaky["activation_attrs"] == (("alpha", 0.1),)
    assert Epilogue(**{**leaky, "activation_attrs": [["alpha", 0.1]]}) == Epilogue(
        activation="leaky_relu", activation_attrs=(("alpha", 0.1),))  # as read back from JSON


# ------------------------------------------------------------------------------------------- ONNX forms after a conv
C = 8
SQRT2 = np.float32(np.sqrt(2.0))


def _nodes(helper, form: str) -> tuple[list, dict, int]:
    """The ONNX nodes computing activation ``form`` of "c" into "y", their initializers and the opset they need."""
    node = helper.make_node
    one, half, three, six = (np.float32(v) for v in (1, 0.5, 3, 6))
    forms = {
        "Relu": ([node("Relu", ["c"], ["y"])], {}, 17),
        "Clip(0,6)": ([node("Clip", ["c", "lo", "hi"], ["y"])], {"lo": np.float32(0), "hi": six}, 17),
        "Clip(-1,1)": ([node("Clip", ["c", "lo", "hi"], ["y"])], {"lo": np.float32(-1), "hi": one}, 17),
        "LeakyRelu": ([node("LeakyRelu", ["c"], ["y"], alpha=0.1)], {}, 17),
        "HardSwish": ([node("HardSwish", ["c"], ["y"])], {}, 17),
        "Mul(x,HardSigmoid(x))": ([node("HardSigmoid", ["c"], ["h"], alpha=1 / 6, beta=0.5),
                                   node("Mul", ["c", "h"], ["y"])], {}, 17),
        "x*Relu6(x+3)/6": ([node("Add", ["c", "three"], ["a"]), node("Clip", ["a", "lo", "six"], ["r"]),
                            node("Mul", ["c", "r"], ["m"]), node("Div", ["m", "six"], ["y"])],
                           {"three": three, "lo": np.float32(0), "six": six}, 17),
        "HardSigmoid": ([node("HardSigmoid", ["c"], ["y"], alpha=0.2, beta=0.5)], {}, 17),
        "Mul(x,Sigmoid(x))": ([node("Sigmoid", ["c"], ["s"]), node("Mul", ["c", "s"], ["y"])], {}, 17),
        "Mul(Sigmoid(x),x)": ([node("Sigmoid", ["c"], ["s"]), node("Mul", ["s", "c"], ["y"])], {}, 17),
        "Sigmoid": ([node("Sigmoid", ["c"], ["y"])], {}, 17),
        "Mish": ([node("Mish", ["c"], ["y"])], {}, 18),
        "Tanh": ([node("Tanh", ["c"], ["y"])], {}, 17),
        "Gelu": ([node("Gelu", ["c"], ["y"])], {}, 20),
        "Gelu(tanh)": ([node("Gelu", ["c"], ["y"], approximate="tanh")], {}, 20),
        "x*0.5*(1+erf(x/sqrt2))": ([node("Div", ["c", "sqrt2"], ["d"]), node("Erf", ["d"], ["e"]),
                                    node("Add", ["e", "one"], ["p"]), node("Mul", ["c", "p"], ["m"]),
                                    node("Mul", ["m", "half"], ["y"])], {"sqrt2": SQRT2, "one": one, "half": half},
                                   17),
    }
    return forms[form]


FORMS = {  # ONNX form -> (the activation it is, its attributes)
    "Relu": ("relu", {}), "Clip(0,6)": ("relu6", {}), "Clip(-1,1)": ("clip", {"min": -1.0, "max": 1.0}),
    "LeakyRelu": ("leaky_relu", {"alpha": 0.1}), "HardSwish": ("hardswish", {}),
    "Mul(x,HardSigmoid(x))": ("hardswish", {}), "x*Relu6(x+3)/6": ("hardswish", {}),
    "HardSigmoid": ("clip", {"min": 0.0, "max": 1.0}),  # the import folds 0.2 x + 0.5 into the convolution
    "Mul(x,Sigmoid(x))": ("silu", {}),
    "Mul(Sigmoid(x),x)": ("silu", {}), "Sigmoid": ("sigmoid", {}), "Mish": ("mish", {}), "Tanh": ("tanh", {}),
    "Gelu": ("gelu", {}), "Gelu(tanh)": ("gelu_tanh", {}), "x*0.5*(1+erf(x/sqrt2))": ("gelu", {}),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_each_onnx_form_after_a_convolution_is_one_kernel_call(form, tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from search.export import export
    from search.graph import extract_graph
    from search.plan import baseline_plan
    from search.zoo import load_model

    rng = np.random.default_rng(0)
    weights = {"w": (rng.standard_normal((C, 3, 3, 3)) * 0.5).astype(np.float32),
               "b": rng.standard_normal(C).astype(np.float32)}
    nodes, constants, opset = _nodes(helper, form)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), *nodes], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, C, 8, 8])],
        initializer=[numpy_helper.from_array(np.asarray(a), n) for n, a in {**weights, **constants}.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), str(tmp_path / "m.onnx"))
    extracted = extract_graph(load_model(str(tmp_path / "m.onnx")))
    (conv,) = extracted.ops
    activation, attrs = FORMS[form]
    assert conv.kind == "conv2d" and conv.attrs["activation"] == activation
    assert conv.attrs.get("activation_attrs", {}) == pytest.approx(attrs)
    compiled = export(extracted, baseline_plan(extracted, "nchw"), target=TARGET, threads=1)
    assert len(compiled.manifest["calls"]) == 1  # the convolution's kernel, its activation inside
    assert compiled.manifest["numerical_check"]["relative_error"] <= 1e-4


def test_a_shortcut_added_after_the_activation_is_in_the_convolutions_kernel(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from search.export import export
    from search.graph import extract_graph
    from search.plan import baseline_plan
    from search.zoo import load_model

    rng = np.random.default_rng(1)
    weights = {name: (rng.standard_normal((C, C, 3, 3)) * 0.3).astype(np.float32) for name in ("w0", "w1")}
    node = helper.make_node
    graph = helper.make_graph(  # a YOLOv8 bottleneck's end: a + silu(conv(a))
        [node("Conv", ["x", "w0"], ["a"], pads=[1, 1, 1, 1]), node("Conv", ["a", "w1"], ["c"], pads=[1, 1, 1, 1]),
         node("Sigmoid", ["c"], ["s"]), node("Mul", ["c", "s"], ["m"]), node("Add", ["a", "m"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, C, 6, 6])],
        initializer=[numpy_helper.from_array(w, name) for name, w in weights.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "m.onnx"))
    extracted = extract_graph(load_model(str(tmp_path / "m.onnx")))
    first, second = extracted.ops
    assert second.inputs == (first.name, first.name)  # its data and its shortcut
    assert second.attrs["activation"] == "silu" and second.attrs["residual_after_activation"]
    compiled = export(extracted, baseline_plan(extracted, "nchw8c"), target=TARGET, threads=1)
    assert [origin["op"] for call in compiled.manifest["calls"] for origin in call["computes"]
            if not origin["src"]] == [first.name, second.name]  # no add of its own
    assert compiled.manifest["numerical_check"]["relative_error"] <= 1e-4


def test_an_activation_after_a_matmul_of_two_activations_is_in_its_kernel(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from search.export import export
    from search.graph import extract_graph
    from search.plan import baseline_plan
    from search.zoo import load_model

    node = helper.make_node
    graph = helper.make_graph(
        [node("Transpose", ["x"], ["t"], perm=[0, 2, 1]), node("MatMul", ["x", "t"], ["m"]),
         node("Sigmoid", ["m"], ["s"]), node("Mul", ["m", "s"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5, 5])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "m.onnx"))
    extracted = extract_graph(load_model(str(tmp_path / "m.onnx")))
    (matmul,) = [op for op in extracted.ops if op.kind == "batch_matmul"]
    assert matmul.attrs["activation"] == "silu"
    assert not any(op.kind in FOLLOWERS for op in extracted.ops)
    compiled = export(extracted, baseline_plan(extracted, "nchw"), target=TARGET, threads=1)
    assert compiled.manifest["numerical_check"]["relative_error"] <= 1e-4
