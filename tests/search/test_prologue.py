"""A convolution that reads its input through a pre-activation ``relu(x * scale + shift)`` (DenseNet's BatchNorm-ReLU
before each 1x1 convolution) or a squeeze-and-excitation gate applies it in the kernel: where, is the knob
``prologue`` the solver chooses."""

from __future__ import annotations

import numpy as np
import pytest
from tvm import relax

from cost_models.cache import CostRecord
from cost_models.features import feature_row
from cost_models.pricing import build_problem
from cost_models.tasks import KernelTask
from search.candidates import Candidate
from search.errors import SearchError
from search.export import export
from search.graph import extract_graph
from search.host import make_target
from search.kinds import kernel_kind
from search.kinds.checks import kernel_error
from search.plan import baseline_plan, plan_from_assignment
from search.space import tuning_space
from search.templates.conv2d import PROLOGUES
from search.templates.workloads import Conv2DWorkload, Epilogue, KernelSpec
from solvers import solve
from tests.search.tiny_nets import build, dense_block_net, pre_activation

TARGET = make_target(1)
CONV = kernel_kind("conv2d")


def _prologue_convs(graph):
    return [op for op in graph.tunable if op.attrs.get("prologue")]


def test_the_pre_activations_are_absorbed_by_the_convolutions_reading_them():
    graph = extract_graph(dense_block_net())
    convs = _prologue_convs(graph)
    assert [op.input_shapes[0][1] for op in convs] == [16, 24, 32]
    assert [op.inputs[0] for op in convs] == ["conv2d_0", "concat_0", "concat_1"]
    assert all(op.params["scale"].shape == op.params["shift"].shape == (op.input_shapes[0][1],) for op in convs)
    assert not [op for op in graph.ops if op.role == "follower"]  # no BatchNorm or ReLU left to run on its own
    for op in convs:  # the first three settings of a layout pair place the prologue each way
        names = [c.name for c in tuning_space(graph, layouts=("NCHW8c",), space_size=3)[op.name]]
        assert [dict(Candidate.parse(n).knobs)["prologue"] for n in names[:3]] == list(PROLOGUES)


def test_a_pre_activation_read_elsewhere_too_stays_a_follower_chain():
    def body(net, x):
        a = net.conv(x, 16)
        h = pre_activation(net, a, 16)
        return net.bb.emit(relax.op.add(net.conv(h, 16, k=1, act=None), h))  # h is read twice

    graph = extract_graph(build((1, 8, 5, 5), body))
    assert not _prologue_convs(graph)
    assert [op.kind for op in graph.ops if op.role == "follower"] == ["channel_scale", "channel_shift", "relu"]


PRE_ACTIVATION, GATE = Epilogue(True, False, "relu", prologue=True), Epilogue(True, True, "silu", gate=True)


@pytest.mark.parametrize("where", PROLOGUES)
@pytest.mark.parametrize(("workload", "layouts", "epilogue"), [
    (Conv2DWorkload(1, 32, 6, 7, 16, (1, 1), (1, 1), (0, 0, 0, 0)), ("NCHW", "NCHW16c"), PRE_ACTIVATION),
    (Conv2DWorkload(1, 16, 5, 9, 12, (3, 3), (1, 1), (1, 1, 1, 1)), ("NHWC", "NCHW"), PRE_ACTIVATION),  # pads zeros
    (Conv2DWorkload(1, 24, 8, 9, 16, (1, 1), (2, 2), (0, 0, 0, 0)), ("NCHW8c", "NHWC"), PRE_ACTIVATION),
    (Conv2DWorkload(2, 32, 6, 7, 16, (1, 1), (1, 1), (0, 0, 0, 0)), ("NCHW", "NCHW16c"), GATE),  # two images' gates
    (Conv2DWorkload(1, 24, 8, 9, 16, (1, 1), (2, 2), (0, 0, 0, 0)), ("NCHW8c", "NHWC"), GATE),
])
def test_every_placement_matches_the_reference(workload, layouts, epilogue, where):
    space = CONV.knob_space(KernelSpec(workload, *layouts, (), epilogue))
    knobs = next(k for k in space if dict(k)["prologue"] == where)
    assert kernel_error(KernelSpec(workload, *layouts, knobs, epilogue)) < 1e-5


def test_kernels_without_a_prologue_keep_their_keys_and_features_tell_the_placement():
    workload = Conv2DWorkload(1, 32, 6, 7, 16, (1, 1), (1, 1), (0, 0, 0, 0))
    plain = KernelTask(KernelSpec(workload, "NCHW8c", "NCHW8c", (), Epilogue()))
    assert '"prologue"' not in plain.key
    rows = [feature_row(KernelTask(KernelSpec(workload, "NCHW8c", "NCHW8c", (("prologue", p),),
                                                  Epilogue(prologue=True))).key) for p in PROLOGUES]
    assert len({tuple(row) for row in rows}) == len(PROLOGUES)
    with pytest.raises(SearchError, match="depthwise_conv2d kernels have no prologue"):
        kernel_kind("depthwise_conv2d").build(
            KernelSpec(Conv2DWorkload(1, 8, 4, 4, 8, (3, 3), (1, 1), (1, 1, 1, 1), groups=8), "NCHW8c", "NCHW8c",
                       (), Epilogue(prologue=True)), TARGET)


@pytest.mark.parametrize("name", ["nchw", "nhwc", "nchw8c", "nchw16c"])
def test_uniform_plans_export_and_pass_the_check(name):
    graph = extract_graph(dense_block_net(batch=2))
    compiled = export(graph, baseline_plan(graph, name), target=TARGET, threads=1, seed=5)
    assert compiled.manifest["numerical_check"]["passed"]
    assert not any("multiply" in call["symbol"] for call in compiled.manifest["calls"])


def test_the_solver_chooses_the_placement_and_the_plan_file_shows_it(tmp_path):
    graph = extract_graph(dense_block_net())
    favoured = {"conv2d_1": 0, "conv2d_3": 2, "conv2d_5": 1}  # SEPARATE, ON_READ, PER_ROW

    def costs(tasks):  # each prologue conv's favoured placement 1 ms, its others 3 ms, everything else 1 ms
        return [CostRecord(_cost(task), 0.0, 3) for task in tasks]

    def _cost(task) -> float:
        if not isinstance(task, KernelTask) or not task.spec.epilogue.prologue:
            return 1.0
        where = dict(task.spec.knobs).get("prologue")
        wanted = favoured[_node_of(task)]
        return 1.0 if where == wanted else 3.0

    def _node_of(task) -> str:
        return {op.input_shapes[0][1]: op.name for op in _prologue_convs(graph)}[task.spec.workload.in_channels]

    assert sorted(favoured) == [op.name for op in _prologue_convs(graph)]
    space = tuning_space(graph, layouts=("NCHW8c", "NCHW16c"))
    problem = build_problem(graph, space, costs)
    solution = solve(problem)
    plan = plan_from_assignment(solution.assignment, "tiny", {}, auxiliary=problem.meta.get("auxiliary", ()))
    for node, where in favoured.items():
        assert dict(Candidate.parse(plan.choices[node]).knobs)["prologue"] == where
    compiled = export(graph, plan, target=TARGET, threads=1, seed=6)
    assert compiled.manifest["numerical_check"]["passed"]
    compiled.save(tmp_path / "art")
    assert "prologue=2" in (tmp_path / "art" / "plan.json").read_text()
    assert np.isfinite(solution.cost)
