"""The generic schedule of non-template operators: same numbers as the unscheduled build, pooling windows vectorised."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax

from search.host import make_target
from search.lower import schedule_legalised
from search.templates.common import unit

TARGET = make_target(2)
SHAPES = {"NCHW16c": (1, 2, 9, 7, 16), "NCHW": (1, 32, 9, 7), "NHWC": (1, 9, 7, 96)}  # NHWC: 6 vectors of 16


def pooling(kind: str, layout: str) -> tvm.IRModule:
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(SHAPES[layout], "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            if kind == "avg":
                y = relax.op.nn.avg_pool2d(x, (3, 3), (1, 1), (1, 1, 1, 1), layout=layout, out_layout=layout)
            elif kind == "max":
                y = relax.op.nn.max_pool2d(x, (3, 3), (2, 2), (0, 0, 1, 1), layout=layout, out_layout=layout)
            else:
                y = relax.op.nn.adaptive_avg_pool2d(x, (1, 1), layout=layout, out_layout=layout)
            out = bb.emit_output(bb.emit(relax.op.nn.relu(y)))
        bb.emit_func_output(out)
    return bb.get()


def run(mod: tvm.IRModule, data: np.ndarray) -> np.ndarray:
    with TARGET:
        lowered = relax.get_pipeline("default")(mod)
    vm = relax.VirtualMachine(tvm.compile(lowered, target=TARGET, relax_pipeline=None), tvm.cpu())
    return vm["main"](tvm.runtime.tensor(data, tvm.cpu())).numpy()


@pytest.mark.parametrize("layout", list(SHAPES))
@pytest.mark.parametrize("kind", ["avg", "max", "global"])
def test_scheduled_pooling_matches_the_unscheduled_build(kind, layout):
    mod = pooling(kind, layout)
    data = np.random.default_rng(0).uniform(-1, 1, SHAPES[layout]).astype("float32")
    scheduled = schedule_legalised(mod, TARGET)
    expected = run(relax.transform.LegalizeOps()(mod), data)
    np.testing.assert_allclose(run(scheduled, data), expected, rtol=1e-6, atol=1e-6)
    (func,) = [f for f in scheduled.functions.values() if isinstance(f, tvm.tirx.PrimFunc)]
    assert func.attrs["tir.is_scheduled"]
    # the channels (the NCHW16c block, NHWC's 96 by 16) are vectorised inside the window loops; NCHW's window is not
    assert reduction_vectorised(func) == (layout != "NCHW")


def reduction_vectorised(func: tvm.tirx.PrimFunc) -> bool:
    sch = tvm.s_tir.Schedule(func)
    (block,) = [b for b in sch.get_child_blocks(sch.get_sblock("root"))
                if any(iv.iter_type == tvm.tirx.IterVar.CommReduce for iv in sch.get(b).iter_vars)]
    return sch.get(sch.get_loops(block)[-1]).kind == tvm.tirx.ForKind.VECTORIZED


def last_axis(kind: str, width: int) -> tuple[tvm.IRModule, np.ndarray, np.ndarray]:
    """A softmax or layer norm over the last axis of a (2, 4, 8, width) input, with numpy's answer."""
    data = np.random.default_rng(1).standard_normal((2, 4, 8, width)).astype("float32")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(data.shape, "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            if kind == "softmax":
                y = relax.op.nn.softmax(x, axis=-1)
                shifted = np.exp(data - data.max(-1, keepdims=True))
                expected = shifted / shifted.sum(-1, keepdims=True)
            else:
                ones, zeros = (relax.const(np.full(width, v, "float32")) for v in (1, 0))
                y = relax.op.nn.layer_norm(x, ones, zeros, axes=[-1], epsilon=1e-5)
                expected = (data - data.mean(-1, keepdims=True)) / np.sqrt(data.var(-1, keepdims=True) + 1e-5)
            out = bb.emit_output(bb.emit(y))
        bb.emit_func_output(out)
    return bb.get(), data, expected


@pytest.mark.parametrize("kind", ["softmax", "layer_norm"])
@pytest.mark.parametrize("vectors", [3, None])  # rows of 3 whole vectors, or of a prime length
def test_last_axis_reductions_keep_partial_sums_per_lane_where_rows_are_whole_vectors(kind, vectors):
    lanes = unit().lanes
    mod, data, expected = last_axis(kind, 3 * lanes if vectors else 13)
    scheduled = schedule_legalised(mod, TARGET)
    np.testing.assert_allclose(run(scheduled, data), expected, rtol=1e-5, atol=1e-6)
    (func,) = [f for f in scheduled.functions.values() if isinstance(f, tvm.tirx.PrimFunc)]
    assert func.attrs["tir.is_scheduled"]
    sch = tvm.s_tir.Schedule(func)
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    names = [sch.get(block).name_hint for block in blocks]
    reductions = sum(1 for name in names if name.endswith("_rf"))
    outer = {sch.get(sch.get_loops(block)[0]) for block in blocks}
    assert all(loop.kind == tvm.tirx.ForKind.PARALLEL for loop in outer)
    if vectors:  # each reduction (max and sum, or mean and variance) through a vectorised per-lane partial
        assert reductions == 2 and len(outer) == len(blocks)
        for block in blocks:
            if sch.get(block).name_hint.endswith("_rf"):
                assert sch.get(sch.get_loops(block)[-1]).kind == tvm.tirx.ForKind.VECTORIZED
    else:  # 13 lanes split no vector: dlight's rule, every block under one parallel loop over the rows
        assert reductions == 0 and len(outer) == 1
    if kind == "softmax":  # fast math: the exp is the vectorisable polynomial, no scalar library call is left
        assert "T.exp(" not in func.script()
