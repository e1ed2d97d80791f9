"""Squeeze-and-excitation: the gate multiply before a convolution is read through by its kernel (the knob ``prologue``
places it: ``test_prologue`` checks each placement), and elsewhere is a ``channel_gate`` node that runs in whatever
layout the plan gives it, so the block needs no fixed op and no layout transform of the gated activation."""

from __future__ import annotations

import pytest
from tvm import relax

from cost_models.features import feature_row
from cost_models.tasks import KernelTask
from search.errors import SearchError
from search.export import export
from search.graph import extract_graph
from search.host import make_target
from search.kinds import kernel_kind
from search.plan import baseline_plan
from search.templates.workloads import Conv2DWorkload, Epilogue, KernelSpec
from tests.search.tiny_nets import build

TARGET = make_target(1)


def se_net(gate_first: bool = False, into_conv: bool = True):
    """conv -> SE (global pool, 1x1 conv + ReLU, 1x1 conv + sigmoid, multiply) -> conv (or, not ``into_conv``, an add
    of the gated and the ungated activation)."""

    def body(net, x):
        y = net.conv(x, 16)
        pooled = net.bb.emit(relax.op.nn.adaptive_avg_pool2d(y, output_size=(1, 1)))
        squeezed = net.conv(pooled, 4, k=1)
        gate = net.bb.emit(relax.op.sigmoid(net.conv(squeezed, 16, k=1, act=None)))
        gated = net.bb.emit(relax.op.multiply(gate, y) if gate_first else relax.op.multiply(y, gate))
        return net.conv(gated, 16) if into_conv else net.bb.emit(relax.op.add(gated, y))

    return build((1, 8, 8, 8), body)


@pytest.mark.parametrize("gate_first", [False, True])
def test_the_gate_before_a_convolution_is_read_through_by_its_kernel(gate_first):
    graph = extract_graph(se_net(gate_first))
    assert [(op.kind, op.role) for op in graph.ops] == [
        ("conv2d", "tunable"), ("adaptive_avg_pool2d", "follower"), ("conv2d", "tunable"), ("conv2d", "tunable"),
        ("conv2d", "tunable")]
    gated = graph.op("conv2d_3")
    assert gated.attrs["gate"] and gated.inputs == ("conv2d_0", "conv2d_2") and gated.input_sides == ("in", "in")
    assert graph.op("conv2d_2").attrs["activation"] == "sigmoid"


def test_a_gate_read_by_anything_else_is_a_layout_node_reading_the_activation_and_its_gate():
    graph = extract_graph(se_net(into_conv=False))
    assert [op.kind for op in graph.ops] == ["conv2d", "adaptive_avg_pool2d", "conv2d", "conv2d", "channel_gate",
                                             "add"]
    assert graph.op("channel_gate_0").inputs == ("conv2d_0", "conv2d_2")


@pytest.mark.parametrize(("baseline", "into_conv"), [("nchw16c", True), ("nchw", False)])
def test_a_network_with_squeeze_and_excitation_exports_checked_without_transforms_in_one_layout(baseline, into_conv):
    graph = extract_graph(se_net(into_conv=into_conv))
    compiled = export(graph, baseline_plan(graph, baseline), target=TARGET, threads=1)
    assert compiled.manifest["numerical_check"]["relative_error"] <= 1e-4
    assert compiled.manifest["layout_transforms"] <= 2  # the network's input and output only
    assert not any("multiply" in call["symbol"] for call in compiled.manifest["calls"]) or not into_conv


def test_a_gate_is_in_the_key_and_the_features_only_where_a_kernel_has_one():
    workload = Conv2DWorkload(1, 32, 6, 7, 16, (1, 1), (1, 1), (0, 0, 0, 0))
    plain, gated = (KernelTask(KernelSpec(workload, "NCHW8c", "NCHW8c", (), Epilogue(gate=gate)))
                    for gate in (False, True))
    assert '"gate"' not in plain.key and '"gate":true' in gated.key
    assert feature_row(plain.key).tolist() != feature_row(gated.key).tolist()
    with pytest.raises(SearchError, match="a pre-activation or a gate, not both"):
        Epilogue(prologue=True, gate=True)
    with pytest.raises(SearchError, match="depthwise_conv2d kernels have no prologue"):
        kernel_kind("depthwise_conv2d").check_spec(
            KernelSpec(Conv2DWorkload(1, 8, 4, 4, 8, (3, 3), (1, 1), (1, 1, 1, 1), groups=8), "NCHW8c", "NCHW8c",
                       (), Epilogue(gate=True)))
