"""bfloat16 as a precision of the candidate space: the bf16 convolution against numpy, plans mixing precisions, the
precision a search uses, and the refusal on a host without bf16 instructions."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from search import bf16_bits, precision
from search.candidates import Candidate, node_candidates
from search.errors import SearchError
from search.export import export
from search.graph import extract_graph
from search.host import Host, host, make_target
from search.kinds import kernel_kind
from search.kinds.checks import kernel_error
from search.kinds.conv2d import conv_reference
from search.layouts import layout
from search.plan import Plan, baseline_plan
from search.space import tuning_space
from search.templates import conv2d_dot, winograd_dot
from search.templates.workloads import BatchMatmulWorkload, Conv2DWorkload, DenseWorkload, Epilogue, KernelSpec
from tests.search.tiny_nets import dense_block_net, residual_concat_net

SETTINGS = precision.bf16_settings()
needs_bf16 = pytest.mark.skipif(not SETTINGS, reason="this CPU has no bf16 instructions (avx512_bf16, amx_bf16)")
WORKLOADS = [
    Conv2DWorkload(1, 64, 9, 9, 64, (3, 3), (1, 1), (1, 1, 1, 1)),
    Conv2DWorkload(1, 20, 5, 37, 24, (1, 1), (1, 1), (0, 0, 0, 0)),  # channels padded; 37 wide: 16 + 16 + 5 pixels
    Conv2DWorkload(1, 16, 11, 13, 32, (3, 3), (2, 2), (1, 1, 1, 1), (2, 2)),  # strided and dilated: row by row
    Conv2DWorkload(2, 40, 9, 11, 16, (1, 1), (2, 2), (0, 0, 0, 0)),  # strided 1x1: the pixels it reads packed
    Conv2DWorkload(1, 32, 7, 7, 48, (3, 2), (1, 1), (2, 0, 1, 3), (2, 1)),  # 6 rows of 10 (9 kept): one run of 59
    Conv2DWorkload(1, 3, 15, 17, 16, (7, 7), (2, 2), (3, 3, 3, 3)),  # a stem: 7 taps x 3 channels in one block
    Conv2DWorkload(1, 8, 9, 10, 24, (3, 3), (1, 1), (1, 2, 1, 0), (1, 2)),  # 3 dilated taps x 8 channels, stride 1
]


def _bf16(values: np.ndarray) -> np.ndarray:
    """``values`` rounded to bf16 (to nearest, ties to even), back in float64."""
    bits = bf16_bits.to_bf16_bits(values).astype(np.uint32) << 16
    return bits.view(np.float32).astype(np.float64)


@needs_bf16
@pytest.mark.parametrize("knobs", SETTINGS, ids=lambda k: f"bf16={k[0][1]}")
@pytest.mark.parametrize("workload", WORKLOADS, ids=["3x3", "1x1-padded", "strided-dilated", "1x1-strided",
                                                     "dilated-padded", "stem-folded", "folded-dilated"])
def test_a_bf16_convolution_is_the_convolution_of_bf16_rounded_operands(workload, knobs):
    spec = KernelSpec(workload, "NCHW", "NCHW16c" if workload.out_channels % 16 == 0 else "NCHW8c", knobs,
                      Epilogue(bias=False))
    rng = np.random.default_rng(0)
    data = rng.uniform(-1, 1, workload.in_shape)
    weight = rng.uniform(-1, 1, (workload.out_channels, workload.in_channels, *workload.kernel))
    import tvm

    func = kernel_kind("conv2d").build(spec, make_target(2))
    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), target=make_target(2)).jit()
    out_layout = layout(spec.out_layout)
    out = tvm.runtime.tensor(np.full(out_layout.physical_shape(workload.out_shape), np.nan, np.float32))
    lib["main"](tvm.runtime.tensor(data.astype(np.float32)),
                tvm.runtime.tensor(kernel_kind("conv2d").pack(spec, {"weight": weight})[0]), out)
    got = out_layout.to_logical(out.numpy())
    emulated = conv_reference(_bf16(data), _bf16(weight), workload)  # bf16 operands, exact sums
    exact = conv_reference(data, weight, workload)
    scale = np.abs(exact).max()
    assert np.abs(got - emulated).max() / scale < 1e-5  # only fp32 accumulation differs
    assert 1e-4 < np.abs(got - exact).max() / scale < precision.TOLERANCE  # bf16's rounding, within its tolerance


@needs_bf16
@pytest.mark.parametrize("channels, pair", [(16, ("NHWC", "NCHW")), (16, ("NCHW8c", "NHWC")),
                                            (4, ("NHWC", "NCHW8c")), (8, ("NCHW8c", "NCHW"))])  # 4, 8: taps folded
def test_a_bf16_convolution_with_its_epilogue_passes_the_conformance_check_in_any_layouts(channels, pair):
    workload = Conv2DWorkload(1, channels, 6, 7, 24, (3, 3), (1, 1), (1, 1, 1, 1))
    for knobs in SETTINGS:
        spec = KernelSpec(workload, *pair, knobs, Epilogue(True, True, "silu", residual_after_activation=True))
        assert kernel_error(spec, target=make_target(1)) <= precision.TOLERANCE


@needs_bf16
@pytest.mark.parametrize("epilogue", [Epilogue(activation="relu", prologue=True), Epilogue(bias=False, gate=True)],
                         ids=["pre-activation", "gate"])
@pytest.mark.parametrize("workload, pair", [
    (Conv2DWorkload(1, 40, 6, 7, 16, (1, 1), (1, 1), (0, 0, 0, 0)), ("NCHW8c", "NCHW16c")),  # channels padded
    (Conv2DWorkload(1, 16, 7, 9, 24, (3, 3), (2, 2), (1, 1, 1, 1)), ("NHWC", "NCHW")),  # strided, zero padding
    (Conv2DWorkload(1, 4, 9, 9, 16, (3, 3), (1, 1), (1, 1, 1, 1)), ("NCHW", "NHWC"))])  # taps folded
def test_a_bf16_convolution_reads_its_data_through_a_prologue(workload, pair, epilogue):
    for knobs in SETTINGS:  # the padding is zero after the prologue: a wrong order shows as shift on the borders
        spec = KernelSpec(workload, *pair, knobs, epilogue)
        assert 1e-4 < kernel_error(spec, target=make_target(1)) <= precision.TOLERANCE
    assert precision.precision_of(kernel_kind("conv2d").knob_space(spec)[-1]) == "bf16"


@needs_bf16
@pytest.mark.parametrize("workload, pair", [(DenseWorkload(130, 96, 48), ("CN32c", "CN16c")),  # 3 chunks of rows
                                            (DenseWorkload(1, 200, 100), ("NC", "NC"))])  # both sides padded
def test_a_bf16_linear_layer_matches_numpy_within_bf16s_tolerance(workload, pair):
    for knobs in SETTINGS:
        spec = KernelSpec(workload, *pair, knobs, Epilogue(True, True, "gelu"))
        assert 1e-4 < kernel_error(spec, target=make_target(2)) <= precision.TOLERANCE


@needs_bf16
@pytest.mark.parametrize("workload, pair", [(BatchMatmulWorkload(6, 70, 40, 19, heads=3), ("NHCW+NWCH", "BIJ")),
                                            (BatchMatmulWorkload(2, 3, 33, 32), ("BIJ", "BIJ"))])
def test_a_bf16_batch_matmul_of_two_activations_matches_numpy_within_bf16s_tolerance(workload, pair):
    for knobs in SETTINGS:  # rows in two chunks, the reduction and the columns padded; read and written permuted
        spec = KernelSpec(workload, *pair, knobs, Epilogue(bias=False, activation="gelu"))
        assert 1e-4 < kernel_error(spec, target=make_target(2)) <= precision.TOLERANCE
    offered = [precision.precision_of(knobs) for knobs in kernel_kind("batch_matmul").knob_space(spec)]
    assert offered.count("bf16") == len(SETTINGS) and offered.index("bf16") > offered.index("fp32")


def test_a_bf16_setting_takes_no_other_knob_and_groups_1():
    workload = WORKLOADS[0]
    with pytest.raises(SearchError, match="one knob bf16"):
        conv2d_dot.pack_weight(KernelSpec(workload, "NCHW", "NCHW", (("bf16", 1), ("reg_n", 4))), np.zeros(1))
    grouped = dataclasses.replace(workload, groups=2)
    with pytest.raises(SearchError, match="groups 1"):
        conv2d_dot.pack_weight(KernelSpec(grouped, "NCHW", "NCHW", (("bf16", 1),)), np.zeros(1))


def test_the_precision_searched_picks_the_settings_of_each_node():
    graph = extract_graph(residual_concat_net())
    conv, depthwise = graph.op("conv2d_1"), graph.op("depthwise_conv2d_0")
    fp32 = node_candidates(conv)
    assert all(precision.precision_of(c.knobs) == "fp32" for c in fp32)
    kind = kernel_kind("conv2d")
    fastest = [Candidate(i, o, knobs) for i, o in kind.layout_pairs(conv)  # direct, and Winograd where it applies
               for knobs in SETTINGS[:1] + winograd_dot.knob_space(kind.spec(conv, i, o, ()))[:1]]
    assert any(winograd_dot.is_bf16_winograd(c.knobs) for c in fastest) == bool(SETTINGS)
    assert sorted(c.name for c in node_candidates(conv, precision="bf16")) == sorted(c.name for c in fastest or fp32)
    assert sorted(c.name for c in node_candidates(conv, precision="auto")) == sorted(c.name for c in fp32 + fastest)
    on_values = [c for c in node_candidates(depthwise, precision="bf16") if c not in node_candidates(depthwise)]
    assert bool(on_values) == bool(SETTINGS)  # a depthwise convolution computes in bf16 on bf16 values alone
    assert all(precision.precision_of(c.knobs) == "bf16" and ".bf16" in c.in_layout + c.out_layout for c in on_values)
    assert tuning_space(graph) == tuning_space(graph, precision="fp32")
    auto = tuning_space(graph, precision="auto", space_size=3)
    for name, candidates in tuning_space(graph, space_size=3).items():  # the fp32 space, and the first bf16 ones
        bf16 = [c for c in auto[name] if precision.precision_of(c.knobs) == "bf16"]
        expected = 0 if not SETTINGS or name.startswith("concat") else 1 if name == "dense_0" else 3
        if name.startswith("depthwise") and SETTINGS:  # two of its pairs with bf16 values, alternating with fp32 ones
            expected = 2
        assert set(candidates) <= set(auto[name]) and len(bf16) == expected  # dense_0: one row, one layout pair


@needs_bf16
def test_a_plan_mixing_precisions_exports_checked_against_the_bf16_tolerance(tmp_path):
    graph = extract_graph(residual_concat_net())
    choices = dict(baseline_plan(graph, "nchw").choices)
    (knobs,) = SETTINGS[:1]
    choices["conv2d_1"] = Candidate("NCHW", "NCHW", knobs).name
    choices["conv2d_4"] = Candidate("NCHW", "NCHW", SETTINGS[-1]).name
    compiled = export(graph, Plan(choices, "tiny"), target=make_target(1), threads=1)
    check = compiled.manifest["numerical_check"]
    assert compiled.manifest["bf16_nodes"] == ["conv2d_1", "conv2d_4"]
    assert check["tolerance"] == precision.TOLERANCE and 0 < check["relative_error"] <= precision.TOLERANCE
    with pytest.raises(SearchError, match="numerical check failed"):
        export(graph, Plan(choices, "tiny"), target=make_target(1), threads=1, max_error=1e-6)
    fp32 = export(graph, baseline_plan(graph, "nchw"), target=make_target(1), threads=1)
    assert fp32.manifest["bf16_nodes"] == [] and fp32.manifest["numerical_check"]["relative_error"] < 1e-5


@needs_bf16
def test_convolutions_reading_through_a_pre_activation_or_a_gate_export_in_bf16():
    from tests.search.test_channel_gate import se_net

    for graph in (extract_graph(dense_block_net()), extract_graph(se_net())):
        through = [op.name for op in graph.tunable if op.attrs.get("prologue") or op.attrs.get("gate")]
        choices = dict(baseline_plan(graph, "nchw8c").choices)
        choices.update({name: Candidate("NCHW8c", "NCHW8c", SETTINGS[0]).name for name in through})
        compiled = export(graph, Plan(choices, "tiny"), target=make_target(1), threads=1)
        assert through and compiled.manifest["bf16_nodes"] == through
        assert 0 < compiled.manifest["numerical_check"]["relative_error"] <= precision.TOLERANCE


def test_a_host_without_bf16_instructions_offers_no_bf16_and_refuses_it(monkeypatch):
    avx512 = dataclasses.replace(host(), features=frozenset({"avx2", "fma", "avx512f", "avx512_vnni"}))
    monkeypatch.setattr(precision, "host", lambda: avx512)
    assert isinstance(avx512, Host) and precision.bf16_settings() == []
    with pytest.raises(SearchError, match="precision bf16 needs amx_bf16 or avx512_bf16, which this CPU"):
        precision.check_precision("bf16")
    graph = extract_graph(residual_concat_net())
    with pytest.raises(SearchError, match="precision bf16 needs"):
        tuning_space(graph, precision="bf16")
    assert tuning_space(graph, precision="auto") == tuning_space(graph)  # auto is fp32 there
    with pytest.raises(SearchError, match="precision must be one of fp32, bf16, int8, auto"):
        precision.check_precision("fp16")
    assert precision.bf16_settings({"avx512_bf16"}) == [(("bf16", precision.DOT),)]
    assert precision.bf16_settings({"amx_bf16", "avx512_bf16"}) == [(("bf16", precision.AMX),),
                                                                      (("bf16", precision.DOT),)]


def test_a_plan_with_bf16_on_a_host_without_it_is_refused_naming_the_instructions(monkeypatch):
    from search.plan import validate

    graph = extract_graph(residual_concat_net())
    plan = Plan({**baseline_plan(graph, "nchw").choices, "conv2d_1": "NCHW>NCHW:bf16=1"}, "tiny")
    monkeypatch.setattr(precision, "host", lambda: dataclasses.replace(host(), features=frozenset({"avx512_bf16"})))
    with pytest.raises(SearchError, match=r"conv2d_1.*bf16=1' computes in bf16, which needs amx_bf16"):
        validate(plan, graph)


def test_tirs_rounding_to_bf16_is_numpys_round_to_nearest_even():
    import tvm
    from tvm import te

    from search.templates.common import rounded

    rng = np.random.default_rng(0)
    ties = np.array([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 2**-130, 0.0, -0.0, 3.4e38], np.float32)  # even, odd
    values = np.concatenate([rng.standard_normal(4096).astype(np.float32) * 100, ties])
    data = te.placeholder(values.shape, "float32", name="data")
    out = te.compute(values.shape, lambda i: rounded(data[i]), name="out")
    lib = tvm.compile(te.create_prim_func([data, out]).with_attr("global_symbol", "main"), target=make_target(1))
    got = tvm.runtime.tensor(np.zeros(values.shape, np.uint16))
    lib["main"](tvm.runtime.tensor(values), got)
    assert np.array_equal(got.numpy(), bf16_bits.to_bf16_bits(values))
    assert list(bf16_bits.to_bf16_bits(ties[:2])) == [0x3F80, 0x3F82]  # ties to even: down, then up


def test_a_new_generation_of_bf16_kernels_changes_their_cache_keys_alone(monkeypatch):
    from cost_models.tasks import KernelTask
    from search.templates import bf16

    def keys() -> list[str]:  # of new tasks: a task keeps the key it was given
        return [KernelTask(KernelSpec(WORKLOADS[0], "NCHW", "NCHW", knobs)).key for knobs in [(("reg_n", 4),),
                                                                                             (("bf16", 1),)]]

    before = keys()
    monkeypatch.setattr(bf16, "VERSION", bf16.VERSION + 1)
    after = keys()
    assert after[0] == before[0] and after[1] != before[1]
