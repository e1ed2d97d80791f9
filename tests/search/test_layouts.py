"""The Layout value type: parsing, blocks, shapes, numpy conversions, TVM index maps, the helpers built on it."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax

from search.host import make_target
from search.layouts import (
    Layout,
    LayoutError,
    activation_layout,
    candidate_layouts,
    layout,
    nearest_layout,
    searchable_layouts,
    view_block,
)

SHAPE = (2, 16, 3, 5)  # logical n, c, h, w


@pytest.mark.parametrize(
    ("name", "axes", "logical", "block", "physical"),
    [
        ("NCHW", (("N", None), ("C", None), ("H", None), ("W", None)), "NCHW", None, (2, 16, 3, 5)),
        ("NHWC", (("N", None), ("H", None), ("W", None), ("C", None)), "NCHW", None, (2, 3, 5, 16)),
        ("NCHW8c", (("N", None), ("C", None), ("H", None), ("W", None), ("C", 8)), "NCHW", 8, (2, 2, 3, 5, 8)),
        ("NHWC4c", (("N", None), ("H", None), ("W", None), ("C", None), ("C", 4)), "NCHW", 4, (2, 3, 5, 4, 4)),
    ],
)
def test_parse_and_shapes(name, axes, logical, block, physical):
    parsed = Layout.parse(name)
    assert parsed.axes == axes and parsed.logical == logical and parsed.block() == block and str(parsed) == name
    assert parsed.physical_shape(SHAPE) == physical and parsed.ndim == len(physical)
    assert Layout.parse(name) is parsed and layout(parsed) is parsed  # parsed once


def test_two_dimensional_layouts():
    nc = Layout.parse("NC")
    assert nc.logical == "NC" and nc.physical_shape((3, 7)) == (3, 7) and nc.stored_axis("C") == 1
    assert Layout.parse("NC8c").physical_shape((3, 16)) == (3, 2, 8)


@pytest.mark.parametrize("name", ["", "nchw", "NCHW0c", "NCHW16", "NCHWC", "NCHW8c8c", "NCHW8h8h", "NCHW8d", "NC HW",
                                  "NCHW-8c", 16])
def test_malformed_layouts_are_refused(name):
    with pytest.raises(LayoutError, match="unknown layout"):
        Layout.parse(name)


def test_check_names_the_block_and_the_channels():
    with pytest.raises(LayoutError, match="NCHW32c needs channels divisible by 32, tensor has 16"):
        Layout.parse("NCHW32c").check(SHAPE)
    with pytest.raises(LayoutError, match="4-D"):
        Layout.parse("NCHW").check((1, 16))
    assert Layout.parse("NCHW16c").fits(SHAPE) and not Layout.parse("NCHW32c").fits(SHAPE)


@pytest.mark.parametrize("name", ["NCHW", "NHWC", "NCHW4c", "NCHW16c", "NHWC8c"])
def test_numpy_round_trip_matches_the_stored_order(name):
    x = np.random.default_rng(0).standard_normal(SHAPE)
    parsed = Layout.parse(name)
    stored = parsed.from_logical(x)
    assert stored.shape == parsed.physical_shape(SHAPE) and stored.flags.c_contiguous
    np.testing.assert_array_equal(parsed.to_logical(stored), x)
    to_logical = parsed.logical_coordinates()
    for index in [(0,) * parsed.ndim, tuple(e - 1 for e in stored.shape),
                  tuple(min(i, e - 1) for i, e in zip((1, 1, 2, 1, 3), stored.shape))]:
        assert stored[index] == x[to_logical(*index)]
        assert parsed.stored_coordinates()(*to_logical(*index)) == index


def test_blocked_conversion_is_the_classic_nchwc_one():
    x = np.arange(np.prod(SHAPE)).reshape(SHAPE)
    expected = x.reshape(2, 2, 8, 3, 5).transpose(0, 1, 3, 4, 2)
    np.testing.assert_array_equal(Layout.parse("NCHW8c").from_logical(x), expected)


@pytest.mark.parametrize(("src", "dst"), [("NCHW", "NCHW8c"), ("NCHW8c", "NCHW16c"), ("NCHW16c", "NHWC"),
                                          ("NHWC", "NCHW4c")])
def test_index_maps_transform_as_numpy_does(src, dst):
    x = np.random.default_rng(1).standard_normal(SHAPE).astype("float32")
    a, b = Layout.parse(src), Layout.parse(dst)
    data = relax.Var("x", relax.TensorType(a.physical_shape(SHAPE), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [data]):
        bb.emit_func_output(bb.emit(relax.op.layout_transform(data, index_map=a.index_map(b))))
    target = make_target(1)
    vm = relax.VirtualMachine(tvm.compile(bb.get(), target=target), tvm.cpu())
    out = vm["main"](tvm.runtime.tensor(a.from_logical(x), tvm.cpu())).numpy()
    np.testing.assert_array_equal(out, b.from_logical(x))
    with pytest.raises(LayoutError, match="different axes"):
        a.index_map(Layout.parse("NC"))


def test_activation_layouts_have_the_activation_axes():
    assert activation_layout("NCHW8c", SHAPE).block() == 8 and activation_layout("NC", (1, 3)).logical == "NC"
    with pytest.raises(LayoutError, match="unknown layout 'LAYOUT' for a 4-D activation: its axes are LAYOUT"):
        activation_layout("LAYOUT", SHAPE)
    with pytest.raises(LayoutError, match="'NCHW' for a 2-D activation"):
        activation_layout("NCHW", (1, 16))
    with pytest.raises(LayoutError, match="divisible by 32"):
        activation_layout("NCHW32c", SHAPE)
    assert "NCWH" not in searchable_layouts() and Layout.parse("NCWH").logical == "NCHW"  # well-formed, not searched


def test_helpers():
    assert candidate_layouts(24) == ["NCHW", "NHWC", "NCHW4c", "NCHW8c"]
    assert nearest_layout("NCHW16c", 24) == "NCHW8c" and nearest_layout("NCHW16c", 3) == "NCHW"
    assert nearest_layout("NHWC", 3) == "NHWC" and nearest_layout("NCHW16c", 32, 48) == "NCHW16c"
    assert (view_block("NCHW", 24), view_block("NHWC", 24), view_block("NCHW8c", 24)) == (1, 24, 8)
