"""Winograd F(2x2, 3x3) in bf16: the kernel is the Winograd algorithm on bf16-rounded transforms, within bf16's
tolerance in any layouts (bf16 values too), F(4x4) is refused, a search offers it beside the direct bf16 kernel,
and a plan with it exports within its budget."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from search import bf16_bits, precision
from search.errors import SearchError
from search.export import export
from search.graph import extract_graph
from search.host import make_target
from search.kinds import kernel_kind
from search.kinds.checks import kernel_error
from search.layouts import layout
from search.plan import Plan, baseline_plan
from search.templates import winograd, winograd_dot
from search.templates.workloads import Conv2DWorkload, Epilogue, KernelSpec
from tests.search.test_bf16_storage import _run
from tests.search.tiny_nets import residual_concat_net

SETTINGS = precision.bf16_settings()
needs_bf16 = pytest.mark.skipif(not SETTINGS, reason="this CPU has no bf16 instructions (avx512_bf16, amx_bf16)")
WORKLOAD = Conv2DWorkload(1, 48, 7, 9, 32, (3, 3), (1, 1), (1, 1, 1, 1))  # 48 channels: a block padded; 9 wide: cropped


def _knobs(unit: int = 0) -> tuple:
    return tuple(sorted({**dict(SETTINGS[unit]), winograd.KNOB: 2}.items()))


def _bf16(values: np.ndarray) -> np.ndarray:
    return bf16_bits.from_bf16_bits(bf16_bits.to_bf16_bits(np.asarray(values, np.float32))).astype(np.float64)


def _emulated(x: np.ndarray, weight: np.ndarray, wl: Conv2DWorkload) -> np.ndarray:
    """F(2x2, 3x3) in float64 on bf16-rounded input and weight transforms: what the kernel computes, but its sums."""
    b, g, a = winograd.MATRICES[2]
    rows, columns = -(-wl.out_height // 2), -(-wl.out_width // 2)
    top, left = wl.padding[:2]
    padded = np.zeros((wl.in_channels, rows * 2 + 2, columns * 2 + 2))
    padded[:, top:top + wl.height, left:left + wl.width] = x[0]
    u = _bf16(np.einsum("ar,ocrs,bs->ocab", g, weight, g))
    out = np.zeros((wl.out_channels, rows * 2, columns * 2))
    for i in range(rows):
        for j in range(columns):
            v = _bf16(np.einsum("ra,crs,sb->cab", b, padded[:, 2 * i:2 * i + 4, 2 * j:2 * j + 4], b))
            products = np.einsum("ocab,cab->oab", u, v)
            out[:, 2 * i:2 * i + 2, 2 * j:2 * j + 2] = np.einsum("ar,oab,bs->ors", a, products, a)
    return out[None, :, :wl.out_height, :wl.out_width]


@needs_bf16
@pytest.mark.parametrize("pair", [("NCHW16c", "NHWC"), ("NHWC", "NCHW8c"), ("NCHW16c", "NCHW32c"),
                                  ("NCHW16c.bf16", "NCHW32c.bf16")])
def test_bf16_winograd_is_the_algorithm_on_bf16_rounded_transforms(pair):
    kind = kernel_kind("conv2d")
    wl = WORKLOAD
    spec = KernelSpec(wl, *pair, _knobs(), Epilogue(bias=False))
    assert _knobs() in kind.knob_space(dataclasses.replace(spec, knobs=()))
    rng = np.random.default_rng(3)
    x, weight = rng.uniform(-1, 1, wl.in_shape), rng.uniform(-1, 1, (wl.out_channels, wl.in_channels, 3, 3))
    stored_in, stored_out = layout(spec.in_layout), layout(spec.out_layout)
    if stored_in.storage == "bf16":
        x = _bf16(x)
    got = stored_out.to_logical(_run(kind.build(spec, make_target(2)), stored_in.from_logical(x.astype(np.float32)),
                                     *kind.pack(spec, {"weight": weight}),
                                     out=np.zeros(stored_out.physical_shape(wl.out_shape), stored_out.dtype)))
    expected = _emulated(x, weight, wl)
    if stored_out.storage == "bf16":
        expected = _bf16(expected)
    scale = np.abs(expected).max()
    assert np.abs(got - expected).max() / scale < (1e-2 if stored_out.storage == "bf16" else 1e-5)


@needs_bf16
@pytest.mark.parametrize("epilogue", [Epilogue(True, True, "relu"), Epilogue(bias=False)])
@pytest.mark.parametrize("pair", [("NCHW16c", "NCHW16c"), ("NCHW32c.bf16", "NCHW32c.bf16")])
def test_bf16_winograd_with_its_epilogue_is_within_bf16s_tolerance_and_less_exact_than_direct_bf16(epilogue, pair):
    spec = KernelSpec(dataclasses.replace(WORKLOAD, in_channels=64, out_channels=64), *pair, _knobs(), epilogue)
    error = kernel_error(spec, target=make_target(2))
    direct = kernel_error(dataclasses.replace(spec, knobs=SETTINGS[0]), target=make_target(2))
    assert direct < error <= precision.TOLERANCE


def test_f4x4_in_bf16_and_other_knobs_are_refused():
    spec = KernelSpec(WORKLOAD, "NCHW16c", "NCHW16c", (("bf16", precision.DOT), (winograd.KNOB, 4)), Epilogue())
    with pytest.raises(SearchError, match=r"winograd \(one of \[2\]\)"):
        winograd_dot.build(spec, make_target(1))
    with pytest.raises(SearchError, match="takes the knobs bf16"):
        winograd_dot.pack_weight(dataclasses.replace(spec, knobs=(("bf16", 2), ("reg_n", 4), ("winograd", 2))),
                                 np.zeros((32, 48, 3, 3)))
    odd = dataclasses.replace(spec, workload=dataclasses.replace(WORKLOAD, out_channels=24), knobs=_knobs())
    assert winograd_dot.knob_space(odd) == [] and not winograd_dot.supports(odd)  # 24 outputs: not blocks of 16


def test_a_search_takes_the_first_setting_of_each_bf16_algorithm():
    amx, dot = ("bf16", precision.AMX), ("bf16", precision.DOT)
    space = [(("reg_n", 8),), (("reg_n", 4),), (amx,), (dot,), (amx, ("winograd", 2)), (dot, ("winograd", 2)),
             (("int8", precision.DOT),)]
    assert precision.by_precision(space, "bf16") == [(amx,), (amx, ("winograd", 2))]
    assert precision.by_precision(space, "auto", 1) == [(("reg_n", 8),), (amx,), (amx, ("winograd", 2)),
                                                        (("int8", precision.DOT),)]
    assert precision.by_precision(space[:2], "bf16") == space[:2]  # no bf16 setting: the fp32 ones


@needs_bf16
def test_a_plan_with_bf16_winograd_exports_within_its_budget_and_names_it():
    graph = extract_graph(residual_concat_net())
    name = f"NCHW16c>NCHW16c:{','.join(f'{k}={v}' for k, v in _knobs())}"
    plan = Plan({**baseline_plan(graph, "nchw16c").choices, "conv2d_1": name}, model="tiny")
    compiled = export(graph, plan, target=make_target(1), threads=1, seed=1, max_error=precision.TOLERANCE)
    check = compiled.manifest["numerical_check"]
    assert compiled.manifest["bf16_nodes"] == ["conv2d_1"] and 1e-5 < check["relative_error"] <= precision.TOLERANCE
