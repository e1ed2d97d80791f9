"""A depthwise convolution reads one layout and writes another: the conversion is
a candidate of the kernel, priced against a separate transform, and the solver picks either."""

from __future__ import annotations

import numpy as np
import pytest

from cost_models.cache import CostRecord
from cost_models.pricing import build_problem
from cost_models.tasks import KernelTask
from search.candidates import Candidate
from search.emit import emit_module
from search.errors import SearchError
from search.export import export
from search.graph import extract_graph
from search.host import make_target
from search.kinds import kernel_kind
from search.kinds.checks import check_kernel
from search.plan import Plan, baseline_plan, plan_from_assignment, validate
from search.precision import precision_of
from search.space import tuning_space
from search.templates import depthwise
from search.templates.conv2d_dot import stored_pairs
from search.templates.workloads import Conv2DWorkload, Epilogue, KernelSpec
from solvers import solve
from tests.search.tiny_nets import residual_concat_net

TARGET = make_target(1)
FULL = Epilogue(True, True, "relu")
WL = Conv2DWorkload(1, 32, 9, 8, 32, (3, 3), (1, 1), (1, 1, 1, 1), groups=32)
WL_S2 = Conv2DWorkload(2, 16, 9, 9, 16, (3, 3), (2, 2), (1, 0, 1, 0), groups=16)


def test_every_pair_of_vectorised_layouts_and_nchw_with_itself():
    pairs = depthwise.supported_layouts(WL)
    vectored = ["NHWC", "NCHW4c", "NCHW8c", "NCHW16c", "NCHW32c"]
    assert pairs == [("NCHW", "NCHW")] + [(i, o) for i in vectored for o in vectored] + stored_pairs(32, 32)
    with pytest.raises(SearchError, match="no depthwise_conv2d kernel for layouts NCHW8c -> NCHW "):
        kernel_kind("depthwise_conv2d").check_spec(KernelSpec(WL, "NCHW8c", "NCHW"))


@pytest.mark.parametrize(
    ("wl", "in_layout", "out_layout", "knobs"),
    [
        (WL, "NCHW8c", "NCHW32c", ()),  # the input block shorter: each 32-channel vector is four 8-channel loads
        (WL, "NCHW32c", "NCHW8c", (("rows", 1),)),
        (WL, "NHWC", "NCHW16c", (("rows", 0), ("reg_n", 4))),
        (WL, "NCHW16c", "NHWC", (("c_bn", 32),)),  # a compute block longer than the input's
        (WL, "NCHW4c", "NHWC", (("c_bn", 8), ("rows", 0))),
        (WL_S2, "NHWC", "NCHW8c", ()),
        (WL_S2, "NCHW16c", "NCHW4c", (("rows", 1),)),
    ],
)
def test_a_kernel_converting_on_the_way_matches_numpy(wl, in_layout, out_layout, knobs):
    check_kernel(KernelSpec(wl, in_layout, out_layout, knobs, FULL), target=TARGET)


def test_the_rows_knob_is_a_setting_of_every_vectorised_pair():
    for pair in depthwise.supported_layouts(WL):
        if pair in stored_pairs(32, 32):  # bf16 values: the bf16 setting alone
            continue
        space = depthwise.knob_space(KernelSpec(WL, *pair))
        rows = {dict(knobs).get("rows") for knobs in space if precision_of(knobs) == "fp32"}  # int8: the defaults
        assert rows == ({None} if pair == ("NCHW", "NCHW") else {0, 1})
    assert dict(depthwise.knob_space(KernelSpec(WL, "NHWC", "NCHW8c"))[0])["rows"] == 1  # NHWC: rows outermost
    assert dict(depthwise.knob_space(KernelSpec(WL, "NCHW8c", "NCHW8c"))[0])["rows"] == 0


# residual_concat_net: conv2d_4 -> depthwise_conv2d_0 -> conv2d_5
AROUND = {"conv2d_4": "NCHW16c>NCHW8c", "conv2d_5": "NHWC>NCHW16c"}


def _transform_names(graph, choices) -> set[str]:
    emitted = emit_module(graph, validate(Plan(choices, "tiny", {}), graph), TARGET)
    return {b.var.name for block in emitted.module["main"].body.blocks for b in block.bindings if "_to_" in b.var.name}


def test_the_converting_kernel_replaces_the_transforms_around_it(tmp_path):
    graph = extract_graph(residual_concat_net())
    base = {**baseline_plan(graph, "nchw16c").choices, **AROUND}
    separate = _transform_names(graph, {**base, "depthwise_conv2d_0": "NCHW8c>NCHW8c"})
    inside = {**base, "depthwise_conv2d_0": "NCHW8c>NHWC"}
    assert "depthwise_conv2d_0_to_NHWC" in separate
    converted = _transform_names(graph, inside)
    assert not any(name.startswith(("conv2d_4_to", "depthwise_conv2d_0_to")) for name in converted)
    compiled = export(graph, Plan(inside, "tiny", {}), target=TARGET, threads=1, seed=4)
    assert compiled.manifest["numerical_check"]["passed"]
    compiled.save(tmp_path / "art")
    assert '"NCHW8c>NHWC' in (tmp_path / "art" / "plan.json").read_text()


@pytest.mark.parametrize(("transform_ms", "converts"), [(5.0, True), (0.01, False)])
def test_the_solver_converts_in_the_kernel_where_a_transform_costs_more(transform_ms, converts):
    graph = extract_graph(residual_concat_net())
    fixed = {node: Candidate.parse(choice) for node, choice in AROUND.items()}

    def costs(tasks):  # the converting depthwise kernels 2 ms, the same-layout ones 1 ms, every transform as given
        return [CostRecord(_cost(task), 0.0, 3) for task in tasks]

    def _cost(task) -> float:
        if isinstance(task, KernelTask):
            if task.spec.workload.kind == "depthwise_conv2d":
                return 1.0 if task.spec.in_layout == task.spec.out_layout else 2.0
            return 1.0
        return transform_ms

    space = tuning_space(graph, layouts=("NHWC", "NCHW8c", "NCHW16c"))
    space = {node: [c for c in candidates if node not in fixed
                    or (c.in_layout, c.out_layout) == (fixed[node].in_layout, fixed[node].out_layout)]
             for node, candidates in space.items()}
    problem = build_problem(graph, space, costs)
    solution = solve(problem)
    plan = plan_from_assignment(solution.assignment, "tiny", {}, auxiliary=problem.meta.get("auxiliary", ()))
    chosen = Candidate.parse(plan.choices["depthwise_conv2d_0"])
    assert (chosen.in_layout != chosen.out_layout) == converts
    if converts:
        assert (chosen.in_layout, chosen.out_layout) == ("NCHW8c", "NHWC")
    assert np.isfinite(solution.cost)
