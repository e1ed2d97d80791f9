"""Winograd convolution as a choice of the plan: which nodes get it, export with its numerical check, the solver's
choice, and its error against the direct build."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from cost_models.cache import CostRecord
from cost_models.pricing import build_problem
from cost_models.tasks import KernelTask
from search.artifact import load_artifact
from search.candidates import Candidate
from search.export import export
from search.graph import extract_graph
from search.host import make_target
from search.kinds import get_kind
from search.kinds.checks import check_kernel
from search.plan import Plan, baseline_plan, plan_from_assignment
from search.space import tuning_space
from search.templates import winograd
from search.templates.workloads import Conv2DWorkload, Epilogue, KernelSpec
from solvers import solve
from tests.search.tiny_nets import residual_concat_net

TARGET = make_target(1)
LAYOUTS = ("NCHW", "NHWC", "NCHW8c", "NCHW16c")


@pytest.fixture(scope="module")
def graph():
    return extract_graph(residual_concat_net())


def _winograd(candidate: Candidate) -> bool:
    return winograd.is_winograd(candidate.knobs)


def test_only_3x3_stride_1_convolutions_in_vector_friendly_layouts_get_winograd(graph):
    space = tuning_space(graph, layouts=LAYOUTS)
    with_it = {node for node, candidates in space.items() if any(map(_winograd, candidates))}
    # conv2d_0 reads 3 channels, conv2d_2 and conv2d_5 are 1x1, the depthwise and dense nodes are other kinds
    assert with_it == {"conv2d_1", "conv2d_3", "conv2d_4"}
    for candidate in filter(_winograd, space["conv2d_1"]):
        assert "NCHW" not in (candidate.in_layout, candidate.out_layout)
    assert not any(map(_winograd, tuning_space(graph, layouts=LAYOUTS, space_size=len(LAYOUTS) ** 2)["conv2d_1"]))
    stride_2 = KernelSpec(Conv2DWorkload(1, 16, 8, 8, 16, (3, 3), (2, 2), (1, 1, 1, 1)), "NCHW16c", "NCHW16c", (),
                          Epilogue())
    assert not any(map(winograd.is_winograd, get_kind("conv2d").knob_space(stride_2)))


@pytest.mark.parametrize("m", winograd.TILES)
@pytest.mark.parametrize("layouts", [("NCHW16c", "NHWC"), ("NHWC", "NCHW8c")])
def test_both_tile_sizes_compute_the_convolution_with_every_epilogue(m, layouts):
    workload = Conv2DWorkload(1, 16, 9, 10, 24, (3, 3), (1, 1), (1, 1, 1, 1))  # 24 channels: blocks of 8
    spec = KernelSpec(workload, *layouts, (), Epilogue(True, True, "relu"))
    knobs = next(k for k in get_kind("conv2d").knob_space(spec) if dict(k).get(winograd.KNOB) == m)
    for epilogue in (Epilogue(bias=False), Epilogue(True, True, "relu"), Epilogue(True, False, "relu6")):
        check_kernel(replace(spec, knobs=knobs, epilogue=epilogue), target=TARGET)


def test_a_plan_with_winograd_exports_passes_the_check_and_names_it(graph, tmp_path):
    choices = {**baseline_plan(graph, "nchw16c").choices,
               "conv2d_1": "NCHW16c>NHWC:oc_bn=16,reg_n=4,winograd=4",  # with the residual, read in NHWC
               "conv2d_3": "NHWC>NCHW16c:reg_n=4,winograd=2",  # 4x4 px: four tiles
               "conv2d_4": "NCHW16c>NCHW8c:reg_n=4,winograd=4"}
    plan = Plan(choices, model="tiny")
    compiled = export(graph, plan, target=TARGET, threads=1, seed=1)
    winograd_error = compiled.manifest["numerical_check"]["relative_error"]
    direct = export(graph, baseline_plan(graph, "nchw16c"), target=TARGET, threads=1, seed=1)
    direct_error = direct.manifest["numerical_check"]["relative_error"]
    assert winograd_error <= 1e-4 and direct_error <= winograd_error  # more error than direct, within the check
    compiled.save(tmp_path / "art")
    saved = load_artifact(tmp_path / "art").plan.choices
    assert saved["conv2d_1"].endswith("winograd=4") and saved["conv2d_3"].endswith("winograd=2")


@pytest.mark.parametrize("factor", [0.5, 2.0])
def test_the_solver_takes_winograd_where_it_is_cheaper_and_not_where_it_is_not(graph, factor):
    space = tuning_space(graph, layouts=LAYOUTS)

    def costs(tasks):  # every kernel 1 ms, Winograd kernels `factor` ms; transforms and chains 0.1 ms
        return [CostRecord(factor if isinstance(t, KernelTask) and winograd.is_winograd(t.spec.knobs) else
                           1.0 if isinstance(t, KernelTask) else 0.1, 0.0, 3) for t in tasks]

    problem = build_problem(graph, space, costs)
    solution = solve(problem)
    plan = plan_from_assignment(solution.assignment, "tiny", {}, auxiliary=problem.meta.get("auxiliary", ()))
    chosen = {node for node, name in plan.choices.items() if _winograd(Candidate.parse(name))}
    assert chosen == ({"conv2d_1", "conv2d_3", "conv2d_4"} if factor < 1 else set())


def test_the_weights_are_transformed_in_float64_once():
    rng = np.random.default_rng(0)
    weight = rng.uniform(-1, 1, (32, 16, 3, 3))
    spec = KernelSpec(Conv2DWorkload(1, 16, 8, 8, 32, (3, 3), (1, 1), (1, 1, 1, 1)), "NCHW16c", "NCHW16c",
                      (("reg_n", 4), ("winograd", 2)), Epilogue())
    packed = winograd.pack_weight(spec, weight)
    assert packed.shape == (4, 4, 2, 16, 16) and packed.dtype == np.float32
    _, g, _ = winograd.MATRICES[2]
    first = g @ weight[17, 5] @ g.T  # output channel 17 = block 1, lane 1
    assert np.allclose(packed[:, :, 1, 5, 1], first, atol=1e-6)
