"""Channel slices (YOLOv8's C2f split) are layout nodes: a blocked plan takes them in its blocks, with no transform
to NCHW and back, where the slice is whole blocks; the task key carries the range."""

from __future__ import annotations

import pytest
from tvm import relax

from cost_models.pricing import chain_task
from search.candidates import Candidate
from search.export import export
from search.graph import extract_graph
from search.host import make_target
from search.plan import baseline_plan
from tests.search.tiny_nets import build

TARGET = make_target(1)


def c2f_net(split: int = 8):
    """conv(16) -> [channels :split, split:] -> conv of the second -> concat of all three -> conv."""

    def body(net, x):
        y = net.conv(x, 16, k=1)
        first = net.bb.emit(relax.op.strided_slice(y, axes=[1], begin=[0], end=[split]))
        second = net.bb.emit(relax.op.strided_slice(y, axes=[1], begin=[split], end=[16]))
        return net.conv(net.bb.emit(relax.op.concat([first, second, net.conv(second, 8)], axis=1)), 16, k=1)

    return build((1, 8, 6, 6), body)


def test_channel_slices_are_layout_nodes_with_their_range():
    graph = extract_graph(c2f_net())
    slices = [op for op in graph.ops if op.kind == "channel_slice"]
    assert [(op.attrs["begin"], op.attrs["end"], op.shape[1]) for op in slices] == [(0, 8, 8), (8, 16, 8)]
    assert all(op.role == "tunable" for op in slices)
    second = slices[1]
    task = chain_task(graph, second.name, Candidate("NCHW8c", "NCHW8c"))
    assert '"attrs":{"begin":8,"end":16}' in task.key


@pytest.mark.parametrize(("split", "sliced"), [(8, "NCHW8c"), (4, "NCHW4c")])
def test_a_blocked_plan_slices_in_its_blocks_where_the_range_is_whole_blocks(split, sliced):
    graph = extract_graph(c2f_net(split))
    plan = baseline_plan(graph, "nchw8c")
    assert {plan.candidate(op.name).out_layout for op in graph.ops if op.kind == "channel_slice"} == {sliced}
    compiled = export(graph, plan, target=TARGET, threads=1)
    assert compiled.manifest["numerical_check"]["relative_error"] <= 1e-5
    if split == 8:  # in the plan's blocks throughout: only the network's input and output are transformed
        assert compiled.manifest["layout_transforms"] == 2
