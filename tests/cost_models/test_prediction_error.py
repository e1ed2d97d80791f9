"""A prediction's error split into the kernels', the transforms', the unpriced time's and the machine's drift, on a
real profile of a tiny network's export."""

from __future__ import annotations

import pytest

from cost_models.calibration import network_times, unpriced_ms
from cost_models.prediction_error import PARTS, plan_parts, split_error
from cost_models.pricing import measurement_tasks
from cost_models.tasks import TransformTask
from search.artifact import load_artifact
from search.export import export
from search.graph import extract_graph
from search.host import make_target
from search.plan import baseline_plan, validate
from search.profile import profile_artifact
from tests.search.tiny_nets import residual_concat_net


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    graph = extract_graph(residual_concat_net())
    plan = baseline_plan(graph, "nhwc")  # NHWC kernels: the input transformed from NCHW
    directory = tmp_path_factory.mktemp("art")
    export(graph, plan, target=make_target(1), threads=1).save(directory)
    chosen = validate(plan, graph)
    space = {op.name: [chosen[op.name]] for op in graph.tunable}
    profile = profile_artifact(load_artifact(directory), runs=3)
    in_network = network_times(graph, chosen, profile)
    # the tasks the profile names none of (a transform TVM turned into a reshape) ran in no call: 0
    prices = {task: 0.0 for task in measurement_tasks(graph, space) if not task.free} | in_network
    return graph, space, chosen, profile, prices


def test_a_prediction_priced_by_the_plans_own_profile_misses_by_nothing(profiled):
    graph, space, chosen, profile, prices = profiled
    split = split_error(graph, space, prices, unpriced_ms(graph, chosen, profile), chosen, profile, profile.run_ms)
    # the problem's sum over the plan's tasks at their in-network times is what the profile attributed to them
    assert split.unpriced_ms == pytest.approx(0.0, abs=1e-6 * profile.run_ms)
    assert (split.kernels_ms, split.transforms_ms, split.drift_ms) == (0.0, 0.0, 0.0)


def test_each_miss_lands_in_its_own_part_and_the_parts_add_up(profiled):
    graph, space, chosen, profile, prices = profiled
    kernels, transforms = plan_parts(graph, space, prices, chosen)
    assert kernels > 0 and transforms > 0
    slower = {task: ms + (1.0 if isinstance(task, TransformTask) else ms) for task, ms in prices.items()}
    measured = 1.25 * profile.run_ms
    split = split_error(graph, space, slower, 0.3, chosen, profile, measured)
    assert split.kernels_ms == pytest.approx(kernels)  # every kernel and chain priced at twice its time
    assert split.transforms_ms >= 1.0 - 1e-9  # at least one transform, each priced 1 ms over its time
    assert split.transforms_ms == pytest.approx(plan_parts(graph, space, slower, chosen)[1] - transforms)
    assert split.unpriced_ms == pytest.approx(0.3 - unpriced_ms(graph, chosen, profile), abs=1e-6)
    assert split.drift_ms == pytest.approx(-0.25 * profile.run_ms)
    predicted = sum(plan_parts(graph, space, slower, chosen)) + 0.3
    assert split.error_ms == pytest.approx(predicted - measured)
    shares = split.relative()
    assert sum(shares[part] for part in PARTS) == pytest.approx(shares["total"])
