"""The dot-product micro-kernels (``search/microkernels.cc``) of each precision against numpy: bf16 sums within fp32
rounding, int8 sums exactly."""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from search import bf16_bits, microkernels, precision
from search.templates.bf16 import BF16, pack_weights
from search.templates.dot import LANES, DotProduct, blocked_weights
from search.templates.int8 import INT8

SETTINGS = [(BF16, knobs) for knobs in precision.bf16_settings()] + [
    (INT8, knobs) for knobs in precision.int8_settings()]
IDS = [f"{knobs[0][0]}={knobs[0][1]}" for _, knobs in SETTINGS]
needs_dot_products = pytest.mark.skipif(not SETTINGS, reason="this CPU has no bf16 or int8 dot-product instructions")


def test_the_micro_kernels_compile_to_amx_and_avx512_dot_products_on_any_host(tmp_path):
    assembly = tmp_path / "microkernels.s"
    subprocess.run([microkernels.compiler(), "-S", *microkernels.OPTIONS, str(microkernels.SOURCE), "-o",
                    str(assembly)], check=True)
    text = assembly.read_text()
    assert all(instruction in text for instruction in ("ldtilecfg", "tdpbf16ps", "vdpbf16ps", "tdpbusd", "vpdpbusd"))


def _operands(product: DotProduct, seed: int, blocks: int, pixels: int) -> tuple[np.ndarray, ...]:
    """Random operands of a micro-kernel over ``blocks`` blocks of input channels and 16 output channels: the input
    ``(blocks, pixels, block)`` and the packed weights as the kernel reads them, and both as float64 values, the
    weights as a ``(blocks * block, 16)`` matrix."""
    rng = np.random.default_rng(seed)
    block, group = product.block, product.group
    if product is BF16:
        data = bf16_bits.to_bf16_bits(rng.standard_normal((blocks, pixels, block)).astype(np.float32))
        packed = pack_weights(rng.standard_normal((LANES, blocks * block, 1, 1)).astype(np.float32))
        values = (data.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        weights = (packed.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    else:  # the extremes of both types among them: 255 x -128 products summed
        data = rng.integers(0, 256, (blocks, pixels, block), dtype=np.uint8)
        data[0, 0] = 255
        packed = blocked_weights(rng.integers(-128, 128, (LANES, blocks * block, 1, 1), dtype=np.int8), product)
        packed.reshape(-1)[: block * LANES] = -128
        values, weights = data.astype(np.float64), packed.astype(np.float64)
    weights = weights.reshape(blocks, block // group, LANES, group).transpose(0, 1, 3, 2).reshape(-1, LANES)
    return np.ascontiguousarray(data), np.ascontiguousarray(packed), values, weights


def _check(product: DotProduct, out: np.ndarray, expected: np.ndarray, message: str) -> None:
    if product is BF16:
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4, err_msg=message)
    else:
        assert np.array_equal(out, expected.astype(np.int64)), message


def _pointer(array: np.ndarray) -> ctypes.c_void_p:
    return array.ctypes.data_as(ctypes.c_void_p)


@needs_dot_products
@pytest.mark.parametrize("product, knobs", SETTINGS, ids=IDS)
def test_the_micro_kernels_sum_the_products_for_every_run_width(product, knobs):
    blocks, widest = 2, 45  # runs of 1 to 45 pixels: three tiles of 14 and every remainder
    data, packed, values, weights = _operands(product, 1, blocks, widest)
    function = getattr(microkernels.load(), product.functions[dict(knobs)[product.knob]])
    for width in range(1, widest + 1):
        out = np.full((width, LANES), -1, product.sum)
        assert function(_pointer(data), _pointer(packed), _pointer(out), blocks, 0, widest * product.block, 1, 1, 1,
                        1, 1, width) == 0
        expected = values[:, :width].transpose(1, 0, 2).reshape(width, -1) @ weights
        _check(product, out, expected, f"a run of {width} pixels")


@needs_dot_products
@pytest.mark.parametrize("product, knobs", SETTINGS, ids=IDS)
def test_the_rows_micro_kernels_compute_each_short_run_from_its_own_rows(product, knobs):
    blocks, longest, most, step = 2, 16, 6, 40  # runs of 1 to 16 pixels, 1 to 6 of them (two calls' worth on AMX)
    data, packed, values, weights = _operands(product, 3, blocks, most * step)
    function = getattr(microkernels.load(), product.rows[dict(knobs)[product.knob]])
    block = product.block
    for width in range(1, longest + 1):
        for runs in range(1, most + 1):
            out = np.full((runs * width, LANES), -1, product.sum)
            assert function(_pointer(data), _pointer(packed), _pointer(out), blocks, 0, most * step * block, 1, 1,
                            1, 1, 1, step * block, width, runs * width) == 0
            pixels = np.concatenate([np.arange(run * step, run * step + width) for run in range(runs)])
            expected = values[:, pixels].transpose(1, 0, 2).reshape(runs * width, -1) @ weights
            _check(product, out, expected, f"{runs} runs of {width}")
