"""Values kept in bf16 between operators: layouts of bf16 values, the conversions on the edges where neighbours
disagree, bf16 convolutions reading and writing them, the search space offering them and a plan exporting them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from search import bf16_bits, precision
from search.candidates import Candidate
from search.conversions import conversion_kernel, converts
from search.export import export
from search.graph import extract_graph
from search.host import host, make_target
from search.kinds import kernel_kind
from search.kinds.checks import kernel_error
from search.layouts import BF16, LayoutError, layout, stored_as
from search.plan import Plan, baseline_plan
from search.space import tuning_space
from search.templates import conv2d_dot
from search.templates.workloads import Conv2DWorkload, Epilogue, KernelSpec
from tests.search.tiny_nets import residual_concat_net

SETTINGS = precision.bf16_settings()
needs_bf16 = pytest.mark.skipif(not SETTINGS, reason="this CPU has no bf16 instructions (avx512_bf16, amx_bf16)")
STORED, WIDE = "NCHW16c.bf16", "NCHW32c.bf16"


def _run(func, *arrays, out):
    import tvm

    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), target=make_target(1)).jit()
    result = tvm.runtime.tensor(out)
    lib["main"](*(tvm.runtime.tensor(a) for a in arrays), result)
    return result.numpy()


def test_a_layout_of_bf16_values_stores_their_bit_patterns():
    stored = layout(STORED)
    assert (stored.storage, stored.dtype, stored.block(), stored.logical) == ("bf16", "uint16", 16, "NCHW")
    assert layout("NCHW16c").dtype == "float32" and stored.axes == layout("NCHW16c").axes
    assert stored_as("NCHW16c", "bf16") == STORED and stored_as(STORED, "fp32") == "NCHW16c"
    values = np.random.default_rng(0).uniform(-3, 3, (1, 32, 3, 5)).astype(np.float32)
    bits = stored.from_logical(values)
    assert bits.dtype == np.uint16 and bits.shape == (1, 2, 3, 5, 16)
    back = stored.to_logical(bits)
    assert back.dtype == np.float32 and 0 < np.abs(back - values).max() <= 2 ** -8 * np.abs(values).max()
    assert np.array_equal(stored.from_logical(back), bits)  # bf16 values round to themselves
    for bad in ("NCHW16c.fp16", "NCHW16c.", ".bf16"):
        with pytest.raises(LayoutError, match="unknown layout"):
            layout(bad)


def test_a_conversion_rounds_to_nearest_even_on_the_way_in_and_widens_exactly_on_the_way_out():
    shape = (1, 32, 3, 5)
    values = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    values[0, 0, 0, :2] = [1.00390625, 1.01171875]  # halfway between bf16 values: down to even, up to even
    assert converts("NCHW", STORED) and converts(STORED, "NHWC") and not converts("NCHW", "NCHW16c")
    into = _run(conversion_kernel(shape, "NCHW", STORED), values,
                out=np.zeros(layout(STORED).physical_shape(shape), np.uint16))
    assert np.array_equal(into, layout(STORED).from_logical(values))
    assert list(layout(STORED).to_logical(into)[0, 0, 0, :2]) == [1.0, 1.015625]
    out = _run(conversion_kernel(shape, STORED, "NHWC"), into, out=np.zeros((1, 3, 5, 32), np.float32))
    assert np.array_equal(out, bf16_bits.from_bf16_bits(into).reshape(1, 2, 3, 5, 16)
                          .transpose(0, 2, 3, 1, 4).reshape(1, 3, 5, 32))


@needs_bf16
@pytest.mark.parametrize("pair", [("NCHW16c", WIDE), (WIDE, "NCHW16c"), (WIDE, WIDE), ("NCHW16c", STORED),
                                  (STORED, STORED)])
@pytest.mark.parametrize("epilogue", [Epilogue(True, True, "relu"), Epilogue(activation="relu6", prologue=True)],
                         ids=["residual", "prologue"])
@pytest.mark.parametrize("window", [3, 1])
def test_a_bf16_convolution_reads_and_writes_bf16_values(pair, epilogue, window):
    kind = kernel_kind("conv2d")
    channels = 48 if STORED in pair else 32  # bf16 values of 48 channels in blocks of 16, of 32 in one block
    workload = Conv2DWorkload(1, channels, 7, 9, channels, (window, window), (1, 1), (window // 2,) * 4)
    spec = KernelSpec(workload, *pair, (), epilogue)
    assert pair in kind.supported_layouts(workload) and kind.knob_space(spec)[:1] == SETTINGS[:1]  # direct first
    assert 1e-4 < kernel_error(spec, target=make_target(2)) <= precision.TOLERANCE
    # writing bf16 values is rounding what the kernel writing fp32 computes, exactly
    fp32_out = dataclasses.replace(spec, out_layout="NCHW16c", knobs=SETTINGS[0])
    bf16_out = dataclasses.replace(spec, out_layout=conv2d_dot.bf16_values(channels), knobs=SETTINGS[0])
    rng = np.random.default_rng(2)
    data = layout(spec.in_layout).from_logical(rng.uniform(-1, 1, workload.in_shape).astype(np.float32))
    params = kind.random_params(workload, epilogue, rng)
    residual = rng.uniform(-1, 1, workload.out_shape).astype(np.float32)
    outs = []
    for out_spec in (fp32_out, bf16_out):
        stored = layout(out_spec.out_layout)
        extra = [stored.from_logical(residual)] if epilogue.residual else []
        outs.append(stored.to_logical(_run(kind.build(out_spec, make_target(2)), data, *kind.pack(out_spec, params),
                                           *extra, out=np.zeros(stored.physical_shape(workload.out_shape),
                                                                stored.dtype))))
    if not epilogue.residual:  # the residual read as bf16 values differs from the fp32 one
        assert np.array_equal(outs[1], bf16_bits.from_bf16_bits(bf16_bits.to_bf16_bits(outs[0])))
    # a 1x1 convolution without prologue reads bf16 values in blocks of 32 channels as they are: no pack pass
    assert ("sblock(\"pack\")" not in kind.build(spec, make_target(2)).script()) == (
        window == 1 and spec.in_layout == WIDE and not epilogue.reads_through)


def test_only_bf16_hosts_offer_layouts_of_bf16_values_and_only_to_bf16_kernels(monkeypatch):
    graph = extract_graph(residual_concat_net())
    space = tuning_space(graph, precision="auto")
    stored = {name: [c for c in candidates if ".bf16" in c.name] for name, candidates in space.items()}
    assert all(precision.precision_of(c.knobs) == "bf16" for name, candidates in stored.items()
               if graph.op(name).kind != "concat" for c in candidates)  # a concat moves bf16 values: no kernel
    assert not any(".bf16" in c.name for c in sum(tuning_space(graph).values(), []))  # fp32 search: none
    followed = {op.name for op in graph.tunable if graph.followers_of(op.name)}
    for name in followed:  # followers run on fp32 values: such a node writes none
        assert not any(layout(c.out_layout).storage == "bf16" for c in stored[name])
    if SETTINGS:
        assert followed and stored["conv2d_2"] and any(layout(c.out_layout).storage == "bf16"
                                                       for c in stored["conv2d_2"])
    without = dataclasses.replace(host(), features=frozenset({"avx2", "fma", "avx512f"}))
    monkeypatch.setattr(precision, "host", lambda: without)
    workload = Conv2DWorkload(1, 32, 7, 9, 32, (3, 3), (1, 1), (1, 1, 1, 1))
    assert not any(".bf16" in i + o for i, o in kernel_kind("conv2d").supported_layouts(workload))


@needs_bf16
def test_a_plan_keeping_values_in_bf16_exports_with_a_conversion_where_a_reader_wants_fp32():
    graph = extract_graph(residual_concat_net())
    choices = dict(baseline_plan(graph, "nchw16c").choices)
    # conv2d_0 writes bf16 values; conv2d_1 reads them as they are, and its residual (the same value) as fp32
    choices["conv2d_0"] = Candidate("NCHW", STORED, SETTINGS[0]).name
    choices["conv2d_1"] = Candidate(STORED, "NCHW16c", SETTINGS[0]).name
    compiled = export(graph, Plan(choices, "tiny"), target=make_target(1), threads=1)
    uniform = export(graph, baseline_plan(graph, "nchw16c"), target=make_target(1), threads=1)
    assert compiled.manifest["layout_transforms"] == uniform.manifest["layout_transforms"] + 1
    check = compiled.manifest["numerical_check"]
    assert check["passed"] and 1e-4 < check["relative_error"] <= precision.TOLERANCE
    assert compiled.manifest["bf16_nodes"] == ["conv2d_0", "conv2d_1"] and compiled.manifest["bf16_values"] == [
        "conv2d_0"]
    conversions = [call for call in compiled.manifest["calls"] if call["symbol"].startswith("convert_")]
    assert [[(o["op"], o["src"], o["dst"]) for o in call["computes"]] for call in conversions] == [
        [("conv2d_0", STORED, "NCHW16c")]]  # the residual's read, listed as the transform it is
    assert not set(compiled.manifest["kernel_symbols"]) & {call["symbol"] for call in conversions}


@needs_bf16
@pytest.mark.parametrize("pair", [("NCHW16c", WIDE), (WIDE, WIDE), (WIDE, "NCHW16c")])
def test_a_depthwise_convolution_on_bf16_values_rounds_the_sums_of_the_fp32_kernel_on_the_same_values(pair):
    kind = kernel_kind("depthwise_conv2d")
    workload = Conv2DWorkload(1, 32, 9, 8, 32, (3, 3), (1, 1), (1, 1, 1, 1), groups=32)
    spec = KernelSpec(workload, *pair, (), Epilogue(True, True, "relu6"))
    assert pair in kind.supported_layouts(workload) and kind.knob_space(spec) == SETTINGS[:1]
    assert not any(precision.precision_of(k) == "bf16" for k in kind.knob_space(dataclasses.replace(
        spec, in_layout="NCHW32c", out_layout="NCHW32c")))  # on fp32 values: fp32 settings alone
    assert 1e-4 < kernel_error(spec, target=make_target(2)) <= precision.TOLERANCE
    rng = np.random.default_rng(4)
    values = bf16_bits.from_bf16_bits(bf16_bits.to_bf16_bits(rng.uniform(-1, 1, workload.in_shape)))
    residual = bf16_bits.from_bf16_bits(bf16_bits.to_bf16_bits(rng.uniform(-1, 1, workload.out_shape)))
    params = kind.random_params(workload, spec.epilogue, rng)
    params["weight"] = bf16_bits.from_bf16_bits(bf16_bits.to_bf16_bits(params["weight"]))
    outs = []
    for layouts in (pair, ("NCHW32c", "NCHW32c")):  # the same values and bf16 weights, the second in fp32
        run = dataclasses.replace(spec, in_layout=layouts[0], out_layout=layouts[1])
        weights = kind.pack(run, params)
        stored_in, stored_out = layout(run.in_layout), layout(run.out_layout)
        outs.append(stored_out.to_logical(_run(
            kind.build(run, make_target(2)), stored_in.from_logical(values), *weights,
            stored_out.from_logical(residual), out=np.zeros(stored_out.physical_shape(workload.out_shape),
                                                              stored_out.dtype))))
    expected = outs[1] if layout(pair[1]).storage == "fp32" else bf16_bits.from_bf16_bits(
        bf16_bits.to_bf16_bits(outs[1]))
    assert np.array_equal(outs[0], expected)


@needs_bf16
def test_a_chain_of_convolution_depthwise_convolution_and_convolution_keeps_its_values_in_bf16():
    graph = extract_graph(residual_concat_net())  # conv2d_4 -> depthwise_conv2d_0 -> conv2d_5, 16 channels
    choices = dict(baseline_plan(graph, "nchw16c").choices)
    choices["conv2d_4"] = Candidate("NCHW16c", STORED, SETTINGS[0]).name
    choices["depthwise_conv2d_0"] = Candidate(STORED, STORED, SETTINGS[0]).name
    choices["conv2d_5"] = Candidate(STORED, "NCHW16c", SETTINGS[0]).name
    compiled = export(graph, Plan(choices, "tiny"), target=make_target(1), threads=1)
    uniform = export(graph, baseline_plan(graph, "nchw16c"), target=make_target(1), threads=1)
    assert compiled.manifest["layout_transforms"] == uniform.manifest["layout_transforms"]  # no conversion
    check = compiled.manifest["numerical_check"]
    assert check["passed"] and 1e-4 < check["relative_error"] <= precision.TOLERANCE
    assert compiled.manifest["bf16_values"] == ["conv2d_4", "depthwise_conv2d_0"]
    assert "depthwise_conv2d_0" in compiled.manifest["bf16_nodes"]
    space = tuning_space(graph, precision="auto")["depthwise_conv2d_0"]
    assert Candidate(STORED, STORED, SETTINGS[0]) in space
    assert not any(BF16 in (c.in_layout + c.out_layout) for c in tuning_space(graph)["depthwise_conv2d_0"])
