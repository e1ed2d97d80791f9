"""Squeeze-and-excitation: the gate multiply is a ``channel_gate`` node that runs in whatever layout the plan gives it,
so the block needs no fixed op and no layout transform of the gated activation."""

from __future__ import annotations

import pytest
from tvm import relax

from search.export import export
from search.graph import extract_graph
from search.host import make_target
from search.plan import baseline_plan
from tests.search.tiny_nets import build

TARGET = make_target(1)


def se_net(gate_first: bool = False):
    """conv -> SE (global pool, 1x1 conv + ReLU, 1x1 conv + sigmoid, multiply) -> conv."""

    def body(net, x):
        y = net.conv(x, 16)
        pooled = net.bb.emit(relax.op.nn.adaptive_avg_pool2d(y, output_size=(1, 1)))
        squeezed = net.conv(pooled, 4, k=1)
        gate = net.bb.emit(relax.op.sigmoid(net.conv(squeezed, 16, k=1, act=None)))
        gated = net.bb.emit(relax.op.multiply(gate, y) if gate_first else relax.op.multiply(y, gate))
        return net.conv(gated, 16)

    return build((1, 8, 8, 8), body)


@pytest.mark.parametrize("gate_first", [False, True])
def test_the_gate_multiply_is_a_layout_node_reading_the_activation_and_its_gate(gate_first):
    graph = extract_graph(se_net(gate_first))
    assert [(op.kind, op.role) for op in graph.ops] == [
        ("conv2d", "tunable"), ("adaptive_avg_pool2d", "follower"), ("conv2d", "tunable"), ("conv2d", "tunable"),
        ("channel_gate", "tunable"), ("conv2d", "tunable")]
    assert graph.op("channel_gate_0").inputs == ("conv2d_0", "conv2d_2")
    assert graph.op("conv2d_2").attrs["activation"] == "sigmoid"


@pytest.mark.parametrize("baseline", ["nchw", "nchw16c"])
def test_a_network_with_squeeze_and_excitation_exports_checked_without_transforms_in_one_layout(baseline):
    graph = extract_graph(se_net())
    compiled = export(graph, baseline_plan(graph, baseline), target=TARGET, threads=1)
    assert compiled.manifest["numerical_check"]["relative_error"] <= 1e-4
    assert compiled.manifest["layout_transforms"] <= 2  # the network's input and output only
