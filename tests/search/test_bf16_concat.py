"""Concats and channel slices on bf16 values: layout nodes that only move values run on the bit patterns bf16 kernels
read and write (copying or in place), offered where bf16 may be chosen, priced as chains in their bf16 layout and held
to the error budget like the bf16 kernels around them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tvm
from tvm import relax

from cost_models.pricing import chain_task
from experiments.budget import _limited, to_limit
from search import bf16_bits, precision
from search.candidates import Candidate
from search.export import export, random_inputs, run_vm
from search.graph import extract_graph
from search.host import host, make_target
from search.kinds import get_kind
from search.layouts import layout
from search.plan import Plan, baseline_plan
from search.space import tuning_space
from solvers.problem import Node, Problem
from tests.search.tiny_nets import build

SETTINGS = precision.bf16_settings()
needs_bf16 = pytest.mark.skipif(not SETTINGS, reason="this CPU has no bf16 instructions (avx512_bf16, amx_bf16)")
WIDE = "NCHW32c.bf16"
TARGET = make_target(1)


def _net():
    """Two convolutions of one input concatenated (64 channels), a 1x1 convolution of the concat, the second half of
    its channels taken and convolved again."""

    def body(net, x):
        cat = net.bb.emit(relax.op.concat([net.conv(x, 32, k=1), net.conv(x, 32)], axis=1))
        wide = net.conv(cat, 64, k=1)
        return net.conv(net.bb.emit(relax.op.strided_slice(wide, axes=[1], begin=[32], end=[64])), 32, k=1)

    return build((1, 32, 6, 6), body)


def _plan(graph, values: str, in_place: bool) -> Plan:
    """Every convolution in bf16 (the first two reading fp32 values), its values between them in ``values``."""
    bf16, fp32 = SETTINGS[0], "NCHW16c"
    choices = {"conv2d_0": Candidate(fp32, values, bf16), "conv2d_1": Candidate(fp32, values, bf16),
               "concat_0": Candidate(values, values, (("in_place", 1),) if in_place else ()),
               "conv2d_2": Candidate(values, values, bf16), "channel_slice_0": Candidate(values, values),
               "conv2d_3": Candidate(values, fp32, bf16)}
    return Plan({**baseline_plan(graph, "nchw16c").choices, **{n: c.name for n, c in choices.items()}}, "tiny")


def test_only_layout_kinds_that_move_values_are_offered_bf16_values_and_only_where_bf16_may_be_chosen(monkeypatch):
    graph = extract_graph(_net())
    assert [op.kind for op in graph.tunable][:4] == ["conv2d", "conv2d", "concat", "conv2d"]
    assert get_kind("concat").moves_values and get_kind("channel_slice").moves_values
    assert not get_kind("add").moves_values and not get_kind("channel_gate").moves_values
    stored = {name: {c.name for c in candidates if ".bf16" in c.name}
              for name, candidates in tuning_space(graph, precision="auto").items()}
    if SETTINGS:
        assert stored["concat_0"] == {WIDE, "NCHW16c.bf16", f"{WIDE}>{WIDE}:in_place=1",
                                      "NCHW16c.bf16>NCHW16c.bf16:in_place=1"}
        assert stored["channel_slice_0"] == {WIDE, "NCHW16c.bf16"}
        assert all(Candidate.parse(name).precision == "bf16" for name in stored["concat_0"])
        small = tuning_space(graph, precision="auto", space_size=3)  # a short space keeps bf16 values too: the first
        assert sum(".bf16" in c.name for c in small["conv2d_2"]) == 2  # pair keeping them, the first other, the second
        assert {c.name for c in small["concat_0"] if ".bf16" in c.name} == stored["concat_0"]  # a layout kind: all
        restricted = tuning_space(graph, precision="auto", space_size=3, layouts=("NCHW16c", "NCHW32c"))
        bf16 = [c for c in restricted["conv2d_2"] if c.precision == "bf16"]  # within the layouts searched: both kinds
        assert [c.keeps_bf16 for c in bf16] == [True, False, True]
    for searched in ("fp32", "int8"):
        assert not any(".bf16" in c.name for c in tuning_space(graph, precision=searched)["concat_0"]
                       if searched == "fp32" or precision.int8_settings())
    without = dataclasses.replace(host(), features=frozenset({"avx2", "fma", "avx512f"}))
    monkeypatch.setattr(precision, "host", lambda: without)
    assert not any(".bf16" in i + o for i, o in get_kind("concat").layout_pairs(graph.op("concat_0")))


@needs_bf16
@pytest.mark.parametrize("in_place", [False, True])
def test_a_concat_and_a_slice_on_bf16_values_give_their_readers_the_values_they_would_have_rounded(in_place):
    graph = extract_graph(_net())
    kept = export(graph, _plan(graph, WIDE, in_place), target=TARGET, threads=1)
    widened = export(graph, _plan(graph, "NCHW16c", False), target=TARGET, threads=1)
    assert kept.manifest["bf16_values"] == ["channel_slice_0", "concat_0", "conv2d_0", "conv2d_1", "conv2d_2"]
    assert kept.manifest["layout_transforms"] == widened.manifest["layout_transforms"]  # no conversion
    symbols = [call["symbol"] for call in kept.manifest["calls"]]
    assert in_place == (sum(s.endswith("_into_concat_0") for s in symbols) == 2)
    check = kept.manifest["numerical_check"]
    assert check["passed"] and 1e-4 < check["relative_error"] <= precision.TOLERANCE
    inputs = random_inputs(graph, 1)  # every reader is a bf16 kernel, which rounds what it reads: the same bits
    assert np.array_equal(run_vm(kept.executable, inputs)[0], run_vm(widened.executable, inputs)[0])


@needs_bf16
@pytest.mark.parametrize("head", ["concat", "copy"])
def test_a_chain_on_bf16_values_moves_their_bits(head):
    graph = extract_graph(_net())
    op = graph.op("concat_0")
    candidate = Candidate(WIDE, WIDE, (("in_place", 1),) if head == "copy" else ())
    if head == "copy":
        graph.op("concat_0").attrs["copied"] = ("conv2d_0",)
    task = chain_task(graph, "concat_0", candidate, ())
    assert task.head == head and task.layout == WIDE
    stored = layout(WIDE)
    rng = np.random.default_rng(0)
    values = [rng.uniform(-2, 2, shape).astype(np.float32) for shape in task.inputs]
    bits = [stored.from_logical(value) for value in values]
    out = run_vm(tvm.compile(task.module(), target=TARGET), bits[:-1] if head == "copy" else bits)[0]
    assert out.dtype == np.uint16
    if head == "concat":
        assert np.array_equal(stored.to_logical(out), bf16_bits.from_bf16_bits(bf16_bits.to_bf16_bits(
            np.concatenate(values, axis=1))))
    else:  # the first input copied into the start of a buffer of the concat's shape
        first = op.input_shapes[0][1]
        assert np.array_equal(stored.to_logical(out)[:, :first], stored.to_logical(bits[0]))


def test_the_budget_limits_a_concat_on_bf16_values_like_a_bf16_node():
    names = ["NCHW16c", "NCHW16c.bf16", "NCHW16c>NCHW16c:bf16=2"]
    problem = Problem((Node("cat", tuple(names), np.array([2.0, 1.0, 5.0])),
                       Node("conv", (names[2], names[0]), np.array([1.0, 3.0]))), ())
    assignment = {"cat": "NCHW16c.bf16", "conv": "NCHW16c>NCHW16c:bf16=2"}
    assert sorted(to_limit(problem, assignment, ["cat", "conv"])) == ["cat"]  # gains least: 1 against 2
    limited = _limited(problem, {"cat": "bf16"})
    assert limited.nodes[0].costs[1] == float("inf") and limited.nodes[0].costs[0] == 2.0
