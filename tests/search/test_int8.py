"""int8 convolutions, depthwise convolutions, linear layers and batched matmuls (``search.templates.conv2d_dot``,
``depthwise``, ``dense_dot`` and ``batch_matmul_dot`` with knob ``int8``): the quantisation, and the kernels against
numpy's integer arithmetic on the same quantised operands and against the fp32 result within the quantisation's
error."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from search import precision
from search.errors import SearchError
from search.host import make_target
from search.kinds.conv2d import conv_reference
from search.kinds.epilogue import apply_epilogue
from search.layouts import layout
from search.templates import batch_matmul_dot, conv2d_dot, dense_dot, depthwise, int8
from search.templates.workloads import BatchMatmulWorkload, Conv2DWorkload, DenseWorkload, Epilogue, KernelSpec

SETTINGS = precision.int8_settings()
needs_int8 = pytest.mark.skipif(not SETTINGS, reason="this CPU has no int8 dot products (avx512_vnni, amx_int8)")
WORKLOADS = [
    Conv2DWorkload(1, 64, 9, 9, 64, (3, 3), (1, 1), (1, 1, 1, 1)),
    Conv2DWorkload(1, 20, 5, 37, 24, (1, 1), (1, 1), (0, 0, 0, 0)),  # channels padded; 37 wide: 16 + 16 + 5 pixels
    Conv2DWorkload(1, 80, 11, 13, 32, (3, 3), (2, 2), (1, 1, 1, 1), (2, 2)),  # two blocks; strided and dilated
    Conv2DWorkload(2, 40, 9, 11, 16, (1, 1), (2, 2), (0, 0, 0, 0)),  # strided 1x1: the pixels it reads packed
    Conv2DWorkload(1, 32, 7, 7, 48, (3, 2), (1, 1), (2, 0, 1, 3), (2, 1)),  # 6 rows of 10 (9 kept): one run of 59
    Conv2DWorkload(1, 3, 15, 17, 16, (7, 7), (2, 2), (3, 3, 3, 3)),  # a stem: 7 taps x 3 channels in one block
    Conv2DWorkload(1, 8, 9, 10, 24, (3, 3), (1, 1), (1, 2, 1, 0), (1, 2)),  # 3 dilated taps x 8 channels, stride 1
    Conv2DWorkload(1, 16, 9, 9, 32, (3, 3), (2, 2), (1, 1, 1, 1)),  # 5 rows of 5 pixels: four rows per call
]
IDS = ["3x3", "1x1-padded", "strided-dilated", "1x1-strided", "dilated-padded", "stem-folded", "folded-dilated",
       "short-rows"]


def test_a_quantisation_holds_zero_exactly_and_spans_the_range():
    relu = int8.quantisation(0.0, 6.0)
    assert relu.zero == 0 and relu.scale == pytest.approx(6 / 255)
    both = int8.quantisation(-1.0, 3.0)
    assert both.zero == 64 and both.scale == pytest.approx(4 / 255)
    values = np.array([-1.0, 0.0, 3.0, 7.0, -5.0], np.float32)
    assert list(int8.quantised_data(values, both)) == [0, 64, 255, 255, 0]  # clamped outside the range
    assert int8.quantisation(2.0, 5.0).zero == 0  # the range widened to hold 0
    assert int8.quantisation(0.0, 0.0) == int8.Quantisation(1.0, 0)
    with pytest.raises(SearchError, match="finite"):
        int8.quantisation(1.0, float("nan"))


def test_weights_are_quantised_per_output_channel_symmetrically():
    weight = np.array([[[[0.5, -1.0]]], [[[0.0, 0.0]]], [[[254.0, 127.0]]]])
    q, scale = int8.quantised_weights(weight)
    assert q.dtype == np.int8 and q[:, 0, 0].tolist() == [[64, -127], [0, 0], [127, 64]]  # 63.5 to even: 64
    assert np.allclose(scale, [1 / 127, 1.0, 2.0])


def test_tirs_quantisation_is_numpys():
    import tvm
    from tvm import te

    q = int8.Quantisation(0.037, 71)
    rng = np.random.default_rng(0)
    steps = np.arange(-80, 200) + 0.5  # ties: to even both ways
    values = np.concatenate([rng.uniform(-4, 8, 4096), steps * q.scale]).astype(np.float32)
    data, quant = te.placeholder(values.shape, "float32", name="data"), te.placeholder((2,), "float32", name="quant")
    out = te.compute(values.shape, lambda i: int8.quantised(data[i], quant), name="out")
    lib = tvm.compile(te.create_prim_func([data, quant, out]).with_attr("global_symbol", "main"),
                      target=make_target(1))
    got = tvm.runtime.tensor(np.zeros(values.shape, np.uint8))
    lib["main"](tvm.runtime.tensor(values), tvm.runtime.tensor(np.array([1 / q.scale, q.zero], np.float32)), got)
    assert np.array_equal(got.numpy(), int8.quantised_data(values, q))


def _run(spec: KernelSpec, data: np.ndarray, weight: np.ndarray, bias: np.ndarray | None,
         residual: np.ndarray | None, quantisation: int8.Quantisation, template=conv2d_dot) -> np.ndarray:
    """The int8 kernel of ``spec`` (built by ``template``) on logical fp32 operands, its output logical."""
    import tvm

    target = make_target(2)
    func = template.build(spec, target)
    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), target=target).jit()
    stored_in, stored_out = layout(spec.in_layout), layout(spec.out_layout)
    constants = template.pack_int8(spec, weight, bias, quantisation)
    out_shape = (spec.workload.batch, weight.shape[0]) if weight.ndim == 2 else spec.workload.out_shape
    out = tvm.runtime.tensor(np.full(stored_out.physical_shape(out_shape), np.nan, np.float32))
    args = [stored_in.from_logical(data.astype(np.float32)), *constants]
    if residual is not None:
        args.append(stored_out.from_logical(residual.astype(np.float32)))
    lib["main"](*(tvm.runtime.tensor(np.ascontiguousarray(a)) for a in args), out)
    return stored_out.to_logical(out.numpy())


def _check_convolution(spec: KernelSpec, data: np.ndarray, weight: np.ndarray, bias: np.ndarray | None,
                       residual: np.ndarray | None, template) -> None:
    """The int8 kernel of ``spec`` (by ``template``), its data quantised over its own range, against the integer
    convolution of its quantised operands and against the fp32 result."""
    workload, epilogue = spec.workload, spec.epilogue
    q = int8.quantisation(data.min(), data.max())
    got = _run(spec, data, weight, bias, residual, q, template)
    q_weight, weight_scale = int8.quantised_weights(weight)
    centred = int8.quantised_data(data, q).astype(np.float64) - q.zero  # the padding is the zero point: 0 here
    sums = conv_reference(centred, q_weight.astype(np.float64), workload)  # exact: integers below 2**53
    scale = (q.scale * weight_scale).astype(np.float32).astype(np.float64)
    emulated = apply_epilogue(sums * scale[None, :, None, None], epilogue, bias, residual)
    _check_quantised(got, emulated, apply_epilogue(conv_reference(data, weight, workload), epilogue, bias, residual))


def _check_quantised(got: np.ndarray, emulated: np.ndarray, exact: np.ndarray) -> None:
    """``got`` equals the emulated integer arithmetic but for the fp32 scaling of its sums, and the fp32 result
    within the quantisation's error."""
    peak = np.abs(exact).max()
    assert np.abs(got - emulated).max() / peak < 1e-5  # only the fp32 scaling of the int32 sums differs
    assert 1e-4 < np.abs(got - exact).max() / peak < 3e-2  # the quantisation's error


@needs_int8
@pytest.mark.parametrize("knobs", SETTINGS, ids=lambda k: f"int8={k[0][1]}")
@pytest.mark.parametrize("workload", WORKLOADS, ids=IDS)
def test_an_int8_convolution_is_the_integer_convolution_of_its_quantised_operands(workload, knobs):
    rng = np.random.default_rng(0)
    low = 0.0 if workload.in_channels % 2 else -0.5  # unsigned data (after a ReLU) and data with a zero point
    data = rng.uniform(low, 1, workload.in_shape)
    weight = rng.uniform(-1, 1, (workload.out_channels, workload.in_channels, *workload.kernel))
    bias, residual = rng.uniform(-1, 1, workload.out_channels), rng.uniform(-1, 1, workload.out_shape)
    epilogue = Epilogue(True, True, "relu") if workload.batch == 1 else Epilogue(bias=False)
    spec = KernelSpec(workload, "NCHW", "NCHW16c" if workload.out_channels % 16 == 0 else "NCHW8c", knobs, epilogue)
    bias, residual = (bias if epilogue.bias else None), (residual if epilogue.residual else None)
    _check_convolution(spec, data, weight, bias, residual, conv2d_dot)


@needs_int8
@pytest.mark.parametrize("knobs", SETTINGS, ids=lambda k: f"int8={k[0][1]}")
@pytest.mark.parametrize("workload, layouts, epilogue", [
    (DenseWorkload(128, 96, 48), ("NC", "NC"), Epilogue(True, False, "gelu")),  # two chunks of rows; features padded
    (DenseWorkload(70, 64, 40), ("CN16c", "NC"), Epilogue(False, True, "gelu_tanh")),  # last chunk 6 rows; 40 outputs
    (DenseWorkload(1, 200, 32), ("NC", "NC"), Epilogue(True, True, "relu")),  # one row, four blocks of 64 features
], ids=["gelu", "blocked-rows-residual", "one-row"])
def test_an_int8_linear_layer_is_the_integer_matmul_of_its_quantised_operands(workload, layouts, epilogue, knobs):
    rng = np.random.default_rng(1)
    data = rng.uniform(-0.5, 1, (workload.batch, workload.in_features))
    weight = rng.uniform(-1, 1, (workload.out_features, workload.in_features))
    bias = rng.uniform(-1, 1, workload.out_features)
    residual = rng.uniform(-1, 1, (workload.batch, workload.out_features))
    spec = KernelSpec(workload, *layouts, knobs, epilogue)
    q = int8.quantisation(data.min(), data.max())
    bias, residual = (bias if epilogue.bias else None), (residual if epilogue.residual else None)
    got = _run(spec, data, weight, bias, residual, q, dense_dot)
    q_weight, weight_scale = int8.quantised_weights(weight[:, :, None, None])
    sums = (int8.quantised_data(data, q).astype(np.float64) - q.zero) @ q_weight[:, :, 0, 0].T.astype(np.float64)
    scale = (q.scale * weight_scale).astype(np.float32).astype(np.float64)
    emulated = apply_epilogue(sums * scale[None, :], epilogue, bias, residual)
    _check_quantised(got, emulated, apply_epilogue(data @ weight.T, epilogue, bias, residual))


@needs_int8
@pytest.mark.parametrize("workload, layouts, epilogue", [
    (Conv2DWorkload(1, 32, 9, 8, 32, (3, 3), (1, 1), (1, 1, 1, 1), groups=32), ("NCHW16c", "NCHW16c"),
     Epilogue(True, True, "relu")),
    (Conv2DWorkload(1, 48, 10, 11, 48, (3, 3), (2, 2), (1, 0, 1, 0), groups=48), ("NHWC", "NCHW8c"),
     Epilogue(False, False, "silu")),  # strided, padded on one side; the blocked view NHWC is read through
    (Conv2DWorkload(1, 16, 9, 9, 16, (5, 5), (1, 1), (4, 4, 4, 4), (2, 2), groups=16), ("NCHW8c", "NHWC"),
     Epilogue(True, False, None)),  # dilated; padding the size of the window
], ids=["3x3-residual", "strided-nhwc", "dilated-5x5"])
def test_an_int8_depthwise_convolution_is_the_integer_convolution_of_its_quantised_operands(workload, layouts,
                                                                                             epilogue):
    rng = np.random.default_rng(2)
    data = rng.uniform(-0.5, 1, workload.in_shape)
    weight = rng.uniform(-1, 1, (workload.out_channels, 1, *workload.kernel))
    bias, residual = rng.uniform(-1, 1, workload.out_channels), rng.uniform(-1, 1, workload.out_shape)
    spec = KernelSpec(workload, *layouts, (("int8", precision.DOT),), epilogue)
    bias, residual = (bias if epilogue.bias else None), (residual if epilogue.residual else None)
    _check_convolution(spec, data, weight, bias, residual, depthwise)


@needs_int8
@pytest.mark.parametrize("knobs", SETTINGS, ids=lambda k: f"int8={k[0][1]}")
@pytest.mark.parametrize("workload, layouts, activation", [
    (BatchMatmulWorkload(4, 70, 200, 40, heads=2), ("BIJ", "BIJ"), "gelu"),  # 2 chunks of rows; k and n padded
    (BatchMatmulWorkload(6, 17, 64, 17, heads=3), ("NHCW+NWCH", "BIJ"), None),  # attention's scores, keys as they lie
    (BatchMatmulWorkload(6, 17, 17, 64, heads=3), ("NCHW+NHCW", "NHCW"), None),  # its context, written token-major
], ids=["padded-gelu", "scores", "context"])
def test_an_int8_batch_matmul_is_the_integer_matmul_of_its_quantised_operands(workload, layouts, activation, knobs):
    import tvm

    rng = np.random.default_rng(3)
    outer = (workload.batch // workload.heads, workload.heads)
    a = rng.uniform(-0.3, 1, (*outer, workload.m, workload.k))  # a zero point
    w = rng.uniform(-0.6, 1, (*outer, workload.k, workload.n))  # a lopsided range: the larger bound sets the scale
    spec = KernelSpec(workload, *layouts, knobs, Epilogue(bias=False, activation=activation))
    q, w_scale = int8.quantisation(a.min(), a.max()), int8.signed_scale(w.min(), w.max())
    target = make_target(2)
    lib = tvm.compile(tvm.IRModule({"main": batch_matmul_dot.build(spec, target).with_attr("global_symbol", "main")}),
                      target=target).jit()
    a_layout, w_layout = (layout(name) for name in batch_matmul_dot.layouts.operand_layouts(spec.in_layout))
    out_layout = layout(batch_matmul_dot.layouts.result_layout(spec.out_layout))
    out = tvm.runtime.tensor(np.full(out_layout.physical_shape((*outer, workload.m, workload.n)), np.nan, np.float32))
    args = [a_layout.from_logical(a.astype(np.float32)), *batch_matmul_dot.pack_int8(spec, (q, w_scale)),
            w_layout.from_logical(w.astype(np.float32))]
    lib["main"](*(tvm.runtime.tensor(np.ascontiguousarray(x)) for x in args), out)
    got = out_layout.to_logical(out.numpy())
    epilogue = spec.epilogue
    sums = (int8.quantised_data(a, q).astype(np.float64) - q.zero) @ int8.signed_quantised_data(w, w_scale)
    emulated = apply_epilogue(sums * float(np.float32(q.scale * w_scale)), epilogue, None)
    _check_quantised(got, emulated, apply_epilogue(a @ w, epilogue, None))


def test_a_signed_quantisation_is_symmetric_over_the_larger_bound():
    assert int8.signed_scale(-2.0, 1.0) == pytest.approx(2 / 127) and int8.signed_scale(0.0, 0.0) == 1.0
    assert list(int8.signed_quantised_data(np.array([-2.0, 1.0, 3.0, -0.007]), 2 / 127)) == [-127, 64, 127, 0]
    with pytest.raises(SearchError, match="low <= high"):
        int8.signed_scale(1.0, -1.0)


def test_an_int8_depthwise_setting_needs_fp32_values_a_vectorised_output_and_no_other_knob():
    workload = Conv2DWorkload(1, 32, 9, 8, 32, (3, 3), (1, 1), (1, 1, 1, 1), groups=32)
    weight, q = np.zeros((32, 1, 3, 3)), int8.Quantisation(1.0, 0)
    setting = (("int8", precision.DOT),)
    for spec in (KernelSpec(workload, "NCHW", "NCHW", setting),
                 KernelSpec(workload, "NCHW16c", "NCHW16c", (*setting, ("reg_n", 4))),
                 KernelSpec(workload, "NCHW32c.bf16", "NCHW16c", setting),
                 KernelSpec(workload, "NCHW16c", "NCHW16c", setting, Epilogue(prologue=True))):
        with pytest.raises(SearchError, match="int8 depthwise kernel takes"):
            depthwise.pack_int8(spec, weight, None, q)
    offered = [precision.precision_of(k) for k in depthwise.knob_space(KernelSpec(workload, "NCHW16c", "NCHW16c"))]
    assert offered.count("int8") == (1 if SETTINGS else 0) and offered[-1] == ("int8" if SETTINGS else "fp32")
    assert "int8" not in map(precision.precision_of, depthwise.knob_space(KernelSpec(workload, "NCHW", "NCHW")))


def test_an_int8_setting_takes_no_other_knob_no_prologue_and_its_own_constants():
    workload = WORKLOADS[0]
    weight = np.zeros((workload.out_channels, workload.in_channels, *workload.kernel))
    with pytest.raises(SearchError, match="one knob int8"):
        conv2d_dot.pack_int8(KernelSpec(workload, "NCHW", "NCHW", (("int8", 1), ("reg_n", 4))), weight, None,
                             int8.Quantisation(1.0, 0))
    with pytest.raises(SearchError, match="no prologue"):
        conv2d_dot.pack_int8(KernelSpec(workload, "NCHW", "NCHW", (("int8", 1),), Epilogue(prologue=True)), weight,
                             None, int8.Quantisation(1.0, 0))
    with pytest.raises(SearchError, match="no bf16 setting"):
        conv2d_dot.pack_weight(KernelSpec(workload, "NCHW", "NCHW", (("int8", 1),)), weight)
    with pytest.raises(SearchError, match="no bf16 setting"):
        dense_dot.pack_weight(KernelSpec(DenseWorkload(2, 8, 16), "NC", "NC", (("int8", 1),)), np.zeros((16, 8)))
    grouped = dataclasses.replace(workload, groups=2)
    with pytest.raises(SearchError, match="groups 1"):
        conv2d_dot.pack_int8(KernelSpec(grouped, "NCHW", "NCHW", (("int8", 2),)), weight, None,
                             int8.Quantisation(1.0, 0))


def test_int8_settings_follow_the_cpus_instructions():
    assert precision.int8_settings({"avx512_vnni", "amx_int8"}) == [(("int8", 1),), (("int8", 2),)]
    assert precision.int8_settings({"avx512_vnni", "amx_bf16"}) == [(("int8", 2),)]
    assert precision.int8_settings({"avx2", "avx512f"}) == []
    assert precision.precision_of((("int8", 1),)) == "int8"
