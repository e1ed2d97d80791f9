"""Graph extraction on tiny Relax CNNs: node kinds, fused epilogues, multi-input edges, followers, boundaries."""

from __future__ import annotations

import pytest
from tvm import relax

from search.graph import extract_graph
from tests.search.tiny_nets import add_node_net, build, residual_concat_net, ssd_like_net


@pytest.fixture(scope="module")
def graph():
    return extract_graph(residual_concat_net())


def test_tunable_nodes_in_topological_order(graph):
    kinds = [(op.name, op.kind) for op in graph.tunable]
    assert kinds == [
        ("conv2d_0", "conv2d"), ("conv2d_1", "conv2d"), ("conv2d_2", "conv2d"), ("conv2d_3", "conv2d"),
        ("concat_0", "concat"), ("conv2d_4", "conv2d"), ("depthwise_conv2d_0", "depthwise_conv2d"),
        ("conv2d_5", "conv2d"), ("dense_0", "dense"),
    ]


def test_conv_absorbs_bias_residual_and_activation(graph):
    conv = graph.op("conv2d_1")
    assert conv.attrs["bias"] and conv.attrs["residual"] and conv.attrs["activation"] == "relu"
    assert conv.inputs == ("conv2d_0", "conv2d_0")  # data and residual
    assert len(conv.bindings) == 4 and conv.params["weight"].shape == (16, 16, 3, 3)
    assert conv.params["bias"].shape == (16,)
    assert graph.op("conv2d_4").attrs["activation"] == "relu6"
    assert graph.op("conv2d_3").attrs["activation"] is None
    dense = graph.op("dense_0")
    assert dense.params["weight"].shape == (10, 16) and dense.attrs["bias"]


def test_followers_and_fixed_ops(graph):
    roles = {op.name: op.role for op in graph.ops if op.role != "tunable"}
    assert roles == {"max_pool2d_0": "follower", "adaptive_avg_pool2d_0": "follower", "reshape_0": "fixed"}
    assert graph.op("max_pool2d_0").attrs["pool_size"] == (2, 2)


def test_concat_gets_one_edge_per_input(graph):
    edges = [e for e in graph.edges if e.dst == "concat_0"]
    assert [(e.src, e.dst_input, e.shape) for e in edges] == [
        ("conv2d_2", 0, (1, 16, 4, 4)), ("conv2d_3", 1, (1, 16, 4, 4))
    ]


def test_residual_edge_must_arrive_in_the_output_layout(graph):
    into = {(e.dst_input, e.dst_side) for e in graph.edges if e.dst == "conv2d_1"}
    assert into == {(0, "in"), (1, "out")}


def test_edges_run_through_followers_with_the_consumed_shape(graph):
    edge = next(e for e in graph.edges if e.dst == "conv2d_2")
    assert edge.src == "conv2d_1" and edge.shape == (1, 16, 4, 4)
    assert graph.source("max_pool2d_0") == "conv2d_1"


def test_boundaries(graph):
    assert [(r.node, r.shape) for r in graph.boundary_reads] == [("conv2d_0", (1, 3, 8, 8)), ("dense_0", (1, 16))]
    assert [(w.node, w.consumer, w.shape) for w in graph.boundary_writes] == [
        ("conv2d_5", "reshape_0", (1, 16, 1, 1)), ("dense_0", "output", (1, 10))
    ]  # the classifier's rows (2-D) read from and written to fixed NC values
    assert not any(e.dst == "dense_0" or e.src == "dense_0" for e in graph.edges)


def test_standalone_add_node_tuple_outputs_and_output_boundary():
    graph = extract_graph(add_node_net())
    add = graph.op("add_0")
    assert add.role == "tunable" and add.inputs == ("avg_pool2d_0", "max_pool2d_0")
    assert {(e.src, e.dst_input) for e in graph.edges if e.dst == "add_0"} == {("conv2d_0", 0), ("conv2d_1", 1)}
    assert graph.op("relu6_0").role == "follower" and graph.source("relu6_0") == "add_0"
    assert graph.op("relu6_0").inputs == ("channel_shift_0",) and graph.op("channel_scale_0").inputs == ("add_0",)
    assert graph.op("channel_scale_0").params["value"].shape == (8,)
    assert graph.output_is_tuple and graph.outputs == ("softmax_0", "conv2d_2")
    assert ("conv2d_2", "output", (1, 8, 4, 4)) in [(w.node, w.consumer, w.shape) for w in graph.boundary_writes]
    assert not graph.op("conv2d_2").attrs["bias"]


def test_ssd_outputs_are_fixed_and_predictors_write_to_them():
    graph = extract_graph(ssd_like_net())
    assert [op.kind for op in graph.tunable] == ["conv2d"] * 4
    fixed = [op.kind for op in graph.ops if op.role == "fixed"]
    assert fixed == ["permute_dims", "reshape", "permute_dims", "reshape", "concat", "reshape"]  # 2-D concat: fixed
    assert [(w.node, w.consumer) for w in graph.boundary_writes] == [
        ("conv2d_2", "permute_dims_0"), ("conv2d_3", "permute_dims_1")
    ]
    assert graph.outputs == ("reshape_2",) and not graph.output_is_tuple


def test_the_later_conv_takes_an_add_of_two_convs():
    def body(net, x):
        a = net.conv(x, 8, act=None)
        b = net.conv(x, 8, act=None)
        return net.act(net.bb.emit(relax.op.add(a, b)), "relu")

    graph = extract_graph(build((1, 4, 8, 8), body))
    assert [op.kind for op in graph.ops] == ["conv2d", "conv2d"]
    later = graph.op("conv2d_1")
    assert later.inputs == ("data", "conv2d_0") and later.attrs["residual"] and later.attrs["activation"] == "relu"


def test_operators_without_a_kind_are_fixed_ops_between_tunable_nodes():
    def body(net, x):
        a = net.conv(x, 8)
        t = net.bb.emit(relax.op.sin(a), name_hint="mystery")  # no kind knows sin
        g = net.conv(t, 8, groups=2)  # grouped, not depthwise: no template
        odd = net.bb.emit(relax.op.add(g, net.const((1, 8, 8, 8))))  # neither a bias nor per-channel
        return net.conv(odd, 8)

    graph = extract_graph(build((1, 4, 8, 8), body))
    assert [(op.kind, op.role) for op in graph.ops] == [
        ("conv2d", "tunable"), ("sin", "fixed"), ("nn.conv2d", "fixed"), ("channel_shift", "follower"),
        ("relu", "follower"), ("add", "fixed"), ("conv2d", "tunable"),
    ]
    assert graph.op("sin_0").bindings == ("mystery",)
    assert [(w.node, w.consumer) for w in graph.boundary_writes] == [("conv2d_0", "sin_0"), ("conv2d_1", "output")]
    assert [(r.node, r.input) for r in graph.boundary_reads] == [("conv2d_0", 0), ("conv2d_1", 0)]
    assert not graph.edges


def test_a_conv_with_a_weight_input_is_a_fixed_op():
    bb = relax.BlockBuilder()
    data = relax.Var("data", relax.TensorType((1, 4, 8, 8), "float32"))
    weight = relax.Var("w", relax.TensorType((8, 4, 3, 3), "float32"))
    with bb.function("main", [data, weight]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.nn.conv2d(data, weight, padding=1))
        bb.emit_func_output(out)
    graph = extract_graph(bb.get())
    assert [(op.kind, op.role) for op in graph.ops] == [("nn.conv2d", "fixed")]
    assert graph.op("nn.conv2d_0").inputs == ("data", "w")
