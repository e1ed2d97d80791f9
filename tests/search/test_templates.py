"""Templates: every layout family and epilogue computes the right numbers (against the kinds' numpy references);
knob spaces; errors; scheduled TIR."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import tvm

from search.errors import SearchError
from search.host import make_target
from search.isa import AVX2, AVX512
from search.kinds import KINDS, check_kernel, kernel_kind
from search.kinds.checks import pairwise
from search.precision import bf16_settings, precision_of
from search.templates import BatchMatmulWorkload, Conv2DWorkload, DenseWorkload, Epilogue, KernelSpec
from search.templates.common import sized_for
from search.templates.common import unit as vector_unit
from search.templates.conv2d_dot import stored_pairs


def build_kernel(spec: KernelSpec, target) -> tvm.tirx.PrimFunc:
    return kernel_kind(spec.workload.kind).build(spec, target)


def knob_space(spec: KernelSpec, size: int | None = None):
    return kernel_kind(spec.workload.kind).knob_space(spec, size)

TARGET = make_target(2)


def check_conv(spec: KernelSpec) -> None:
    check_kernel(spec, target=TARGET)


CONV_3x3 = Conv2DWorkload(1, 8, 7, 6, 16, (3, 3), (1, 1), (1, 1, 1, 1))
CONV_1x1_S2 = Conv2DWorkload(2, 16, 6, 6, 8, (1, 1), (2, 2), (0, 0, 0, 0))
CONV_FIRST = Conv2DWorkload(1, 3, 11, 11, 16, (5, 5), (2, 2), (2, 1, 1, 3))
CONV_DILATED = Conv2DWorkload(1, 4, 9, 9, 8, (3, 3), (1, 2), (2, 2, 2, 1), dilation=(2, 2))
FULL = Epilogue(bias=True, residual=True, activation="relu")
CONV_PADDED = Conv2DWorkload(1, 8, 5, 17, 12, (3, 3), (1, 1), (1, 1, 1, 1))  # 12 channels, 17 wide: knobs pad both
CONV_PADDED_S2 = Conv2DWorkload(1, 16, 6, 33, 16, (1, 1), (2, 2), (0, 0, 0, 0))  # 17 wide after stride 2


@pytest.mark.parametrize(
    ("wl", "in_layout", "out_layout", "epilogue", "knobs"),
    [
        (CONV_3x3, "NCHW8c", "NCHW8c", Epilogue(bias=False), ()),
        (CONV_3x3, "NCHW4c", "NCHW16c", FULL, (("reg_n", 3), ("unroll_kw", 0))),
        (CONV_3x3, "NCHW8c", "NCHW4c", Epilogue(activation="relu6"), ()),
        (CONV_1x1_S2, "NCHW16c", "NCHW4c", Epilogue(residual=True), ()),
        (CONV_FIRST, "NCHW", "NCHW16c", Epilogue(activation="relu"), ()),
        (CONV_3x3, "NHWC", "NHWC", FULL, (("oc_bn", 8), ("reg_n", 2), ("unroll_kw", 1))),
        (CONV_1x1_S2, "NHWC", "NHWC", Epilogue(), ()),
        (CONV_3x3, "NCHW", "NCHW", FULL, ()),
        (CONV_1x1_S2, "NCHW", "NCHW", Epilogue(bias=False, activation="relu6"), (("oc_bn", 4), ("reg_n", 1))),
        (CONV_3x3, "NHWC", "NCHW8c", Epilogue(), ()),
        (CONV_3x3, "NCHW8c", "NHWC", FULL, ()),
        (CONV_3x3, "NCHW", "NHWC", Epilogue(residual=True), ()),
        (CONV_DILATED, "NCHW4c", "NCHW8c", FULL, ()),
        (CONV_PADDED, "NCHW8c", "NCHW", FULL, ()),
        (CONV_PADDED, "NCHW", "NHWC", FULL, (("oc_bn", 8), ("reg_n", 6), ("unroll_kw", 0))),
        (CONV_PADDED, "NHWC", "NCHW4c", Epilogue(residual=True, activation="relu6"), (("reg_n", 9), ("unroll_kw", 1))),
        (CONV_PADDED_S2, "NCHW16c", "NCHW16c", FULL, ()),
    ],
)
def test_conv_matches_numpy(wl, in_layout, out_layout, epilogue, knobs):
    check_conv(KernelSpec(wl, in_layout, out_layout, knobs, epilogue))


DEPTHWISE = Conv2DWorkload(1, 16, 9, 8, 16, (3, 3), (1, 1), (1, 1, 1, 1), groups=16)
DEPTHWISE_S2 = Conv2DWorkload(1, 8, 9, 9, 8, (3, 3), (2, 2), (1, 0, 1, 0), groups=8)
DEPTHWISE_DILATED = Conv2DWorkload(2, 8, 8, 8, 8, (3, 3), (1, 1), (2, 2, 2, 2), dilation=(2, 2), groups=8)


@pytest.mark.parametrize(
    ("wl", "layout", "epilogue", "knobs"),
    [
        (DEPTHWISE, "NCHW8c", FULL, ()),
        (DEPTHWISE, "NHWC", Epilogue(activation="relu6"), (("c_bn", 8), ("reg_n", 4), ("unroll_kw", 0))),
        (DEPTHWISE, "NCHW", FULL, ()),
        (DEPTHWISE_S2, "NCHW4c", Epilogue(bias=False), ()),
        (DEPTHWISE_S2, "NCHW", Epilogue(residual=True), ()),
        (DEPTHWISE_DILATED, "NHWC", FULL, ()),
    ],
)
def test_depthwise_matches_numpy(wl, layout, epilogue, knobs):
    check_conv(KernelSpec(wl, layout, layout, knobs, epilogue))


@pytest.mark.parametrize(
    ("wl", "epilogue", "knobs"),
    [
        (DenseWorkload(3, 32, 24), FULL, ()),
        (DenseWorkload(4, 12, 20), Epilogue(bias=False, activation="relu6"), (("k_unroll", 1), ("oc_bn", 4))),
    ],
)
def test_dense_matches_numpy(wl, epilogue, knobs):
    check_kernel(KernelSpec(wl, "NC", "NC", knobs, epilogue), target=TARGET)


@pytest.mark.parametrize(
    "spec",
    [
        KernelSpec(CONV_3x3, "NHWC", "NCHW", epilogue=FULL),
        KernelSpec(CONV_PADDED, "NCHW8c", "NHWC", epilogue=FULL),
        KernelSpec(DEPTHWISE_S2, "NCHW", "NCHW", epilogue=FULL),
        KernelSpec(DEPTHWISE, "NHWC", "NHWC", epilogue=FULL),
    ],
)
def test_every_pair_of_knob_values_is_correct(spec):
    for knobs in pairwise(knob_space(spec)):
        check_conv(replace(spec, knobs=knobs))


def test_the_conv_loop_order_knob_is_left_out_at_its_default():
    space = knob_space(KernelSpec(CONV_1x1_S2, "NCHW8c", "NCHW8c"))
    assert ("rows", 0) not in {item for knobs in space for item in knobs}  # the settings from before the knob
    assert space[1] == (*space[0], ("rows", 1))  # rows outermost: the default's first alternative
    check_conv(KernelSpec(CONV_PADDED, "NHWC", "NCHW4c", (("reg_n", 9), ("rows", 1)), FULL))
    with_prologue = KernelSpec(CONV_3x3, "NCHW8c", "NCHW8c", epilogue=Epilogue(prologue=True))
    assert not any(name == "rows" for knobs in knob_space(with_prologue) for name, _ in knobs)


def test_the_dense_loop_order_is_a_knob_feature_blocks_outermost_first():
    space = [k for k in knob_space(KernelSpec(DenseWorkload(8, 32, 64), "NC", "NC")) if precision_of(k) == "fp32"]
    assert dict(space[0])["rows"] == 0 and {dict(knobs)["rows"] for knobs in space} == {0, 1}
    for rows in (0, 1):  # 7 rows in padded tiles of 4, both orders
        check_kernel(KernelSpec(DenseWorkload(7, 16, 64), "NC", "NC", (("reg_b", 4), ("rows", rows)), FULL),
                     target=TARGET)


def test_every_pair_of_dense_knob_values_is_correct():
    spec = KernelSpec(DenseWorkload(4, 12, 32), "NC", "NC", epilogue=FULL)
    for knobs in pairwise(knob_space(spec)):
        check_kernel(replace(spec, knobs=knobs), target=TARGET)


@pytest.mark.parametrize(
    "spec",
    [
        KernelSpec(DEPTHWISE, "NCHW", "NCHW", epilogue=FULL),
        KernelSpec(DEPTHWISE, "NCHW16c", "NCHW16c", epilogue=FULL),
        KernelSpec(DenseWorkload(4, 12, 32), "NC", "NC", epilogue=FULL),
    ],
)
def test_other_templates_are_scheduled_tir(spec):
    func = build_kernel(spec, TARGET)
    assert "global_symbol" not in func.attrs and bool(func.attrs["tir.is_scheduled"])
    assert "T.parallel(" in func.script() and "T.vectorized(" in func.script()


def test_built_kernel_is_scheduled_tir():
    spec = KernelSpec(CONV_3x3, "NCHW8c", "NCHW16c", (), FULL)
    func = build_kernel(spec, TARGET)
    assert "global_symbol" not in func.attrs
    assert bool(func.attrs["tir.is_scheduled"])
    script = func.script()
    assert "T.parallel(" in script and "T.vectorized(16)" in script and "T.unroll(" in script
    assert "data_pad" not in script  # padding inlined into the reduction
    assert [tuple(int(e) for e in p.shape) for p in func.params] == [
        (1, 1, 7, 6, 8),
        (1, 1, 3, 3, 8, 16),
        (16,),
        (1, 1, 7, 6, 16),
        (1, 1, 7, 6, 16),
    ]


def test_supported_layouts():
    def supported_layouts(wl):
        return KINDS[wl.kind].supported_layouts(wl)

    pairs = supported_layouts(CONV_FIRST)
    assert ("NCHW", "NCHW16c") in pairs and ("NHWC", "NHWC") in pairs and ("NCHW", "NCHW") in pairs
    assert all(i in ("NCHW", "NHWC") for i, _ in pairs)  # 3 channels fit no block
    fp32 = [pair for pair in pairs if ".bf16" not in pair[1]]
    assert len(fp32) == 2 * len({o for _, o in fp32})
    assert pairs[len(fp32):] == ([("NCHW", "NCHW16c.bf16")] if bf16_settings() else [])  # a stem writing bf16
    vectored = ["NHWC", "NCHW4c", "NCHW8c", "NCHW16c"]
    fp32 = [("NCHW", "NCHW")] + [(i, o) for i in vectored for o in vectored]
    assert supported_layouts(DEPTHWISE) == fp32 + stored_pairs(16, 16)  # bf16 values: where the host has bf16
    assert supported_layouts(DenseWorkload(1, 8, 8)) == [("NC", "NC")]


@pytest.mark.parametrize(
    "spec",
    [
        KernelSpec(CONV_3x3, "NCHW8c", "NCHW16c"),
        KernelSpec(CONV_3x3, "NHWC", "NCHW"),
        KernelSpec(DEPTHWISE, "NHWC", "NHWC"),
        KernelSpec(DenseWorkload(4, 12, 32), "NC", "NC"),
    ],
)
def test_knob_space_deterministic_default_first_and_capped(spec):
    space = knob_space(spec)
    assert space == knob_space(spec) and len(space) == len(set(space)) > 1
    assert all(list(k) == sorted(k) for k in space)
    assert knob_space(spec, size=3) == space[:3]

    def script(knobs):
        return build_kernel(replace(spec, knobs=knobs), TARGET).script()

    assert script(space[0]) == script(()) != script(space[-1])


@pytest.mark.parametrize(
    ("unit", "reg_n"),
    [(AVX512, {"head": 12, "wide": 14, "8c": 9, "16c": 9}),  # one vector per row of 16 channels, 28 accumulators
     (AVX2, {"head": 6, "wide": 7, "8c": 9, "16c": 6})],  # two vectors per 16 channels, 14 accumulators
)
def test_knobs_pad_channels_and_width_only_where_divisors_waste_the_vector(unit, reg_n):
    def default(wl, out_layout="NCHW"):
        with sized_for(unit):
            return dict(knob_space(KernelSpec(wl, "NCHW", out_layout))[0])

    head = Conv2DWorkload(1, 16, 8, 71, 126, (3, 3), (1, 1), (1, 1, 1, 1))  # SSD's 126-channel heads, 71 wide
    assert default(head) == {"oc_bn": 16, "reg_n": reg_n["head"], "unroll_kw": 1}  # 128 channels, 72 columns computed
    assert default(replace(head, out_channels=128, width=56)) == {"oc_bn": 16, "reg_n": reg_n["wide"], "unroll_kw": 1}
    assert default(replace(head, out_channels=24, width=17), "NCHW8c")["reg_n"] == reg_n["8c"]
    assert default(replace(head, out_channels=32, width=17), "NCHW16c")["reg_n"] == reg_n["16c"]


def test_matmuls_pad_prime_rows_and_columns_and_drop_the_padding():
    """ViT's 197 tokens: no register tile of 4 or more and no vector block divides them, so padded ones come first
    (8 rows computed from 200, 16-lane blocks over 208 columns), every pair of knob values computes exactly, and the
    kernel's parameters keep the real shapes."""
    dense_spec = KernelSpec(DenseWorkload(13, 12, 32), "NC", "NC", epilogue=FULL)
    assert dict(knob_space(dense_spec)[0])["reg_b"] == 7  # 14 rows in 2 tiles: the least padded work of 4..8
    assert dict(knob_space(KernelSpec(DenseWorkload(197, 12, 32), "NC", "NC"))[0])["reg_b"] == 8
    for knobs in pairwise(knob_space(dense_spec)):
        check_kernel(replace(dense_spec, knobs=knobs), target=TARGET)
    scores = KernelSpec(BatchMatmulWorkload(2, 13, 8, 13), "BIJ", "BIJ", epilogue=Epilogue(bias=False))
    choices = knob_space(scores)
    blocks = {dict(k)["n_bn"] for k in choices if precision_of(k) == "fp32"}
    assert blocks >= {vector_unit().lanes} and 1 not in blocks
    for knobs in pairwise(choices):
        check_kernel(replace(scores, knobs=knobs), target=TARGET)
    func = build_kernel(replace(scores, knobs=choices[0]), TARGET)
    assert [tuple(int(e) for e in p.shape) for p in func.params] == [(2, 1, 13, 8), (2, 1, 8, 13), (2, 1, 13, 13)]


def test_padded_kernel_shapes():
    """A knob setting valid with both vector units: 16 channels (4 padded) and tiles of 6 columns (18 computed)."""
    spec = KernelSpec(CONV_PADDED, "NCHW8c", "NCHW", (("oc_bn", 16), ("reg_n", 6), ("unroll_kw", 1)))
    func = build_kernel(spec, TARGET)
    weight, out = (tuple(int(e) for e in func.params[i].shape) for i in (1, -1))
    assert weight == (1, 1, 3, 3, 8, 16) and out == (1, 12, 5, 17)
    weights = kernel_kind(spec.workload.kind).pack(spec, {"weight": np.ones((12, 8, 3, 3)), "bias": np.zeros(12)})[0]
    assert weights.sum() == 12 * 8 * 9  # the 4 padded channels are zeros


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (KernelSpec(CONV_3x3, "NCHW16c", "NCHW8c"), "no conv2d kernel"),  # 8 input channels
        (KernelSpec(CONV_3x3, "NCHW8c", "NCHW32c"), "no conv2d kernel"),
        (KernelSpec(CONV_3x3, "NCHWc", "NCHW8c"), "no conv2d kernel"),
        (KernelSpec(DEPTHWISE, "NCHW", "NCHW8c"), "no depthwise_conv2d kernel"),
        (KernelSpec(DenseWorkload(1, 8, 8), "NCHW", "NC"), "no dense kernel"),
        (KernelSpec(Conv2DWorkload(1, 8, 5, 5, 8, (3, 3), (1, 1), (1, 1, 1, 1), groups=2), "NCHW", "NCHW"), "groups"),
        (KernelSpec(CONV_3x3, "NCHW8c", "NCHW8c", (("reg_n", 5),)), "reg_n=5"),
        (KernelSpec(CONV_3x3, "NCHW8c", "NCHW8c", (("tile", 2),)), "unknown knob"),
        (KernelSpec(CONV_3x3, "NCHW8c", "NCHW8c", (("oc_bn", 8),)), "unknown knob"),  # block fixed by layout
    ],
)
def test_unsupported_specs_raise(spec, message):
    with pytest.raises(SearchError, match=message):
        build_kernel(spec, TARGET)


def test_bad_activation_raises():
    with pytest.raises(SearchError, match="activation"):
        Epilogue(activation="swish")


def test_workload_shapes_and_flops():
    assert (CONV_FIRST.out_height, CONV_FIRST.out_width) == (5, 6)
    assert CONV_1x1_S2.flops == 2 * 2 * 8 * 3 * 3 * 16
    assert DEPTHWISE.is_depthwise and not CONV_3x3.is_depthwise
    assert DEPTHWISE.flops == 2 * 16 * 9 * 8 * 9
