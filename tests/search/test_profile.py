"""Profiling an exported network: every listed call matched to what it computes and timed inside the network."""

from __future__ import annotations

import pytest

from search.artifact import load_artifact
from search.errors import SearchError
from search.export import export
from search.graph import extract_graph
from search.host import make_target
from search.plan import baseline_plan
from search.profile import _match, profile_artifact
from tests.search.tiny_nets import add_node_net, build


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    graph = extract_graph(add_node_net())
    directory = tmp_path_factory.mktemp("art")
    export(graph, baseline_plan(graph, "nchw16c"), target=make_target(1), threads=1).save(directory)
    return graph, profile_artifact(load_artifact(directory), runs=5)


def test_every_kernel_and_transform_is_a_timed_call(profiled):
    graph, profile = profiled
    kernels = {call.computes[0].op for call in profile.calls if len(call.computes) == 1 and call.ran}
    assert {op.name for op in graph.tunable if op.kind != "add"} <= kernels
    transforms = [c.computes[0] for c in profile.calls if c.computes and c.computes[0].is_transform]
    assert ("data", "NCHW", "NCHW4c", (1, 4, 8, 8)) in [(t.op, t.src, t.dst, t.shape) for t in transforms]
    assert all(call.ms > 0 for call in profile.calls if call.ran)
    assert all(call.ms == 0 for call in profile.calls if not call.ran)


def test_fused_groups_name_their_members_and_the_vm_overhead_is_separate(profiled):
    _, profile = profiled
    group = next(call for call in profile.calls if any(o.op == "add_0" for o in call.computes))
    # relu6_0, the group's last member, is one FuseOps renames: the manifest names it by the call it makes
    assert {o.op for o in group.computes} >= {"avg_pool2d_0", "add_0", "channel_scale_0", "channel_shift_0", "relu6_0"}
    reshaped = [c for c in profile.calls if not c.ran]  # 1x1 spatial tensors: the VM reshapes instead
    assert reshaped and all(c.computes for c in reshaped)
    assert profile.overhead_ms > 0 and "vm.builtin.alloc_tensor" in profile.builtins
    assert profile.calls_ms + profile.overhead_ms == pytest.approx(profile.run_ms) and profile.runs == 5
    assert 0 < profile.scale < 1  # the instrument's own time taken off: µs kernels, µs of instrument per call


def test_each_call_of_one_fused_function_names_its_own_operators():
    # two sin -> cos pairs of one shape: FuseOps makes one function of both groups, named after the first
    from tvm import relax

    def body(net, x):
        for _ in range(2):
            x = net.conv(net.bb.emit(relax.op.cos(net.bb.emit(relax.op.sin(net.conv(x, 8))))), 8)
        return x

    graph = extract_graph(build((1, 4, 8, 8), body))
    calls = export(graph, baseline_plan(graph, "nchw"), target=make_target(1), threads=1).manifest["calls"]
    groups = [{o["op"] for o in call["computes"]} for call in calls if len(call["computes"]) > 1]
    assert sorted(map(sorted, groups)) == [["cos_0", "sin_0"], ["cos_1", "sin_1"]]


def test_a_profile_moves_to_a_latency_measured_elsewhere_keeping_its_split(profiled):
    _, profile = profiled
    moved = profile.at(3 * profile.run_ms)
    assert moved.run_ms == 3 * profile.run_ms and moved.calls_ms + moved.overhead_ms == pytest.approx(moved.run_ms)
    assert [c.ms for c in moved.calls] == pytest.approx([3 * c.ms for c in profile.calls])
    assert moved.builtins == pytest.approx({s: 3 * ms for s, ms in profile.builtins.items()})
    assert [c.ran for c in moved.calls] == [c.ran for c in profile.calls] and moved.runs == profile.runs
    with pytest.raises(SearchError, match="positive run time"):
        profile.at(0.0)


def test_matching_skips_calls_that_did_not_run_and_refuses_strangers():
    assert _match(["a", "b", "a", "c"], [("a", 1.0), ("a", 2.0), ("c", 3.0)]) == [1.0, None, 2.0, 3.0]
    with pytest.raises(SearchError, match="manifest lists no such call"):
        _match(["a"], [("a", 1.0), ("b", 1.0)])
