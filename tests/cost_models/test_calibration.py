"""Calibration on the network itself: profiled calls attributed to tasks, in-network records beside isolated ones,
isolated times scaled by their kind's in-network ratio near when they were measured."""

from __future__ import annotations

import pytest

from cost_models.cache import CostCache
from cost_models.calibration import (
    NETWORK,
    CalibratedCosts,
    Factors,
    bare_bases,
    chosen_context,
    network_context,
    network_times,
    priced_ms,
    store_network_times,
    unpriced_ms,
)
from cost_models.tasks import ChainTask, KernelTask, TransformTask
from search.artifact import load_artifact
from search.candidates import kernel_spec
from search.emit import Origin
from search.export import export
from search.graph import extract_graph
from search.host import make_target
from search.kinds import KernelKind, get_kind
from search.plan import baseline_plan, validate
from search.profile import CallTime, Profile, profile_artifact
from search.templates import Conv2DWorkload, Epilogue, KernelSpec
from tests.cost_models.test_measure import provider
from tests.search.tiny_nets import add_node_net, residual_concat_net, unknown_ops_net


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    graph = extract_graph(residual_concat_net())
    plan = baseline_plan(graph, "nchw16c")
    directory = tmp_path_factory.mktemp("art")
    export(graph, plan, target=make_target(1), threads=1).save(directory)
    return graph, validate(plan, graph), profile_artifact(load_artifact(directory), runs=3)


def test_every_kernel_of_the_plan_gets_its_in_network_time(profiled):
    graph, chosen, profile = profiled
    times = network_times(graph, chosen, profile)
    kernels = {task.spec for task in times if isinstance(task, KernelTask)}
    expected = {kernel_spec(op, chosen[op.name]) for op in graph.tunable if isinstance(get_kind(op.kind), KernelKind)}
    assert kernels == expected  # conv2d_2 and conv2d_5 share one spec: one task
    assert all(ms > 0 for task, ms in times.items() if isinstance(task, KernelTask))
    transforms = [task for task in times if isinstance(task, TransformTask)]
    assert transforms and all(task.src != task.dst for task in transforms)
    chains = [task for task in times if isinstance(task, ChainTask)]
    assert {task.head for task in chains} == {"concat", "output"}  # the concat; the pools after conv2d_1, conv2d_5
    assert 0 < priced_ms(graph, chosen, profile) <= profile.calls_ms
    assert unpriced_ms(graph, chosen, profile) == pytest.approx(profile.calls_ms - priced_ms(graph, chosen, profile)
                                                        + profile.overhead_ms)


@pytest.mark.parametrize("bare, fused", [(0.010, 0.030), (0.020, 0.110)])
def test_transforms_fused_into_a_fixed_operators_call_get_what_the_call_takes_beyond_the_operator(bare, fused):
    # two hosts' profiles of a plan in NCHW, where the fixed sin between two convolutions runs on its own, and of one
    # in NHWC, where TVM fuses the conversions to NCHW and back into sin's call: on one host they add 2x sin's time,
    # on the other 4.5x (the isolated records priced such conversions at twice what the whole call took)
    graph = extract_graph(unknown_ops_net())
    sin = next(op for op in graph.ops if op.kind == "sin")
    shape = tuple(sin.input_shapes[0])
    there, back = TransformTask(shape, "NHWC", "NCHW"), TransformTask(shape, "NCHW", "NHWC")
    nchw, nhwc = (validate(baseline_plan(graph, name), graph) for name in ("nchw", "nhwc"))

    def profile(*calls: CallTime) -> Profile:
        return Profile(calls, 0.0, {}, sum(call.ms for call in calls), 3)

    alone = profile(CallTime("fused_sin", (Origin(sin.name),), bare, True))
    moved = profile(CallTime("fused_layout_transform_sin_layout_transform", (
        Origin(sin.inputs[0], "NHWC", "NCHW", shape), Origin(sin.name), Origin(sin.name, "NCHW", "NHWC", shape)),
        fused, True))
    bases = bare_bases([alone, moved])
    assert bases == {frozenset({sin.name}): bare}
    times = network_times(graph, nhwc, moved, bases)
    assert times[there] == pytest.approx((fused - bare) / 2) and times[back] == pytest.approx((fused - bare) / 2)
    assert unpriced_ms(graph, nhwc, moved, bases) == pytest.approx(bare)  # as the NCHW plan's sin: the same offset
    assert unpriced_ms(graph, nchw, alone, bases) == pytest.approx(bare)
    assert there not in network_times(graph, nhwc, moved)  # without the bases: unpriced, as before
    assert network_times(graph, nhwc, moved, bare_bases([moved])) == network_times(graph, nhwc, moved)


def test_a_fused_call_of_several_fixed_operators_is_priced_beyond_the_bare_calls_it_contains():
    # the fixed sin and grouped convolution ran as two bare calls in one plan; in another TVM fused the conversion
    # before them into one call of both: the transform gets what that call takes beyond the two bare calls, the
    # largest bare group first; an operator no call ran bare (as a reshape TVM runs free) counts as free
    graph = extract_graph(unknown_ops_net())
    sin, grouped = (next(op for op in graph.ops if op.kind == kind) for kind in ("sin", "nn.conv2d"))
    shape = tuple(sin.input_shapes[0])
    there = TransformTask(shape, "NHWC", "NCHW")
    nhwc = validate(baseline_plan(graph, "nhwc"), graph)

    def profile(*calls: CallTime) -> Profile:
        return Profile(calls, 0.0, {}, sum(call.ms for call in calls), 3)

    apart = profile(CallTime("fused_sin", (Origin(sin.name),), 0.010, True),
                    CallTime("fused_conv2d", (Origin(grouped.name),), 0.040, True))
    together = profile(CallTime("fused_sin_conv2d", (Origin(sin.name), Origin(grouped.name)), 0.045, True))
    moved = profile(CallTime("fused_layout_transform_sin_conv2d", (
        Origin(sin.inputs[0], "NHWC", "NCHW", shape), Origin(sin.name), Origin(grouped.name)), 0.080, True))
    assert network_times(graph, nhwc, moved, bare_bases([apart, moved]))[there] == pytest.approx(0.030)
    assert network_times(graph, nhwc, moved, bare_bases([apart, together]))[there] == pytest.approx(0.035)
    only_sin = bare_bases([profile(apart.calls[0])])
    assert network_times(graph, nhwc, moved, only_sin)[there] == pytest.approx(0.070)
    only_grouped = profile(CallTime("fused_layout_transform_conv2d", (
        Origin(sin.name, "NHWC", "NCHW", shape), Origin(grouped.name)), 0.080, True))
    assert there not in network_times(graph, nhwc, only_grouped, only_sin)  # no bare call of its operators: unpriced


def test_a_conversion_fused_with_a_fixed_operator_and_the_tunable_nodes_beside_it_is_priced_beyond_their_bare_call():
    # TVM fuses a resize with the adds around it, and in NHWC with the conversions too (a detector's upsampling): the
    # conversion gets what the call takes beyond the same operators' call without it, nothing where it takes less
    graph = extract_graph(unknown_ops_net())
    sin, concat = (next(op for op in graph.ops if op.kind == kind) for kind in ("sin", "concat"))
    shape = tuple(sin.input_shapes[0])
    there = TransformTask(shape, "NHWC", "NCHW")
    nhwc = validate(baseline_plan(graph, "nhwc"), graph)

    def profile(ms: float, *computes: Origin) -> Profile:
        return Profile((CallTime("fused", computes, ms, True),), 0.0, {}, ms, 3)

    bare = profile(0.050, Origin(sin.name), Origin(concat.name))
    for fused, share in ((0.080, 0.030), (0.040, 0.0)):
        moved = profile(fused, Origin(sin.inputs[0], "NHWC", "NCHW", shape), Origin(sin.name), Origin(concat.name))
        assert network_times(graph, nhwc, moved, bare_bases([bare, moved]))[there] == pytest.approx(share)


def conv(out_layout: str) -> KernelTask:
    wl = Conv2DWorkload(1, 8, 8, 8, 16, (3, 3), (1, 1), (1, 1, 1, 1))
    return KernelTask(KernelSpec(wl, "NCHW8c", out_layout, (), Epilogue()))


def test_in_network_times_where_known_else_isolated_times_scaled_by_their_kind(tmp_path):
    a, b, c = conv("NCHW16c"), conv("NCHW8c"), conv("NCHW")
    moved, free = TransformTask((1, 16, 8, 8), "NCHW", "NCHW16c"), TransformTask((1, 16, 8, 8), "NHWC", "NHWC")
    with provider(tmp_path / "c.sqlite") as measured:
        isolated = dict(zip([a, b, c, moved], measured.measure([a, b, c, moved])))
        store_network_times(measured, {a: 2 * isolated[a].median_ms, b: 3 * isolated[b].median_ms, free: 1.0}, 3)
        cache = CostCache(tmp_path / "c.sqlite")
        assert len(cache.get_many(network_context(measured.context), [a.key, b.key, free.key])) == 2  # free: never
        assert network_context(measured.context).timing == NETWORK
        calibrated = CalibratedCosts(measured)
        records = dict(zip([a, b, c, moved, free], calibrated.measure([a, b, c, moved, free])))
    assert records[a].median_ms == pytest.approx(2 * isolated[a].median_ms)  # its own in-network time
    assert records[c].median_ms == pytest.approx(2.5 * isolated[c].median_ms)  # conv2d's median ratio
    assert records[moved].median_ms == pytest.approx(isolated[moved].median_ms)  # no transform profiled: as is
    assert records[free].median_ms == 0
    assert calibrated.stats == {"tasks": 4, "in_network": 2, "scaled": 2, "factors": {"conv2d": 2.5}}


def test_a_layout_with_enough_profiled_tasks_gets_its_own_factor_the_others_their_kinds():
    def conv_in(layout: str, channels: int) -> KernelTask:
        wl = Conv2DWorkload(1, channels, 8, 8, 16, (3, 3), (1, 1), (1, 1, 1, 1))
        return KernelTask(KernelSpec(wl, layout, layout, (), Epilogue()))

    blocked = {conv_in("NCHW16c", 16 * i): 2.0 for i in (1, 2, 3)}
    plain = {conv_in(layout, 16 * i): 4.0 for layout in ("NCHW", "NHWC") for i in (1, 2)}
    factors = Factors.fit({**blocked, **plain}, by_layout=True)
    assert factors.of(conv_in("NCHW16c", 64)) == 2.0  # three NCHW16c tasks: their own median
    assert factors.of(conv_in("NCHW", 64)) == 4.0  # two NCHW tasks: conv2d's median over all seven
    assert factors.of(TransformTask((1, 16, 8, 8), "NCHW", "NCHW16c")) == 1.0  # no transform profiled
    assert factors.summary() == {"conv2d": 4.0, "conv2d NCHW16c": 2.0}
    assert Factors.fit({**blocked, **plain}).of(conv_in("NCHW16c", 64)) == 4.0  # by kind alone: the default


@pytest.mark.parametrize("picked", [1.0, 1.25])
def test_tasks_no_profile_ran_are_priced_by_the_ratio_of_the_tasks_a_solver_chose_on_each_host(picked):
    # two hosts' profiles: on one, the kernels a solver's plan ran are as far above their isolated records in the
    # network as the uniform baselines' (1.05x); on the other 1.25x (as seen on an AVX2 host): a re-solved plan adds
    # kernels picked the same way
    baseline = {conv_of(8 * i): 1.05 for i in range(1, 10)}
    chosen = {conv_of(8 * i): picked * 1.05 for i in range(10, 13)}
    when = {task: 1000.0 + i for i, task in enumerate([*baseline, *chosen])}
    keys = {task.key for task in chosen}
    factors = Factors.fit({**baseline, **chosen}, measured_at=when, chosen=keys)
    assert factors.of(conv_of(800), 1005.0) == pytest.approx(picked * 1.05)
    assert factors.of(conv_of(800)) == pytest.approx(picked * 1.05)  # when unknown: the chosen tasks' median
    assert factors.summary()["conv2d (chosen)"] == pytest.approx(picked * 1.05)
    assert Factors.fit({**baseline, **chosen}, measured_at=when).of(conv_of(800), 1005.0) == 1.05  # none marked
    few = Factors.fit({**baseline, **chosen}, measured_at=when, chosen=set(list(keys)[:2]))
    assert few.of(conv_of(800), 1005.0) == 1.05  # two chosen: every profiled task of the kind


def test_a_solvers_in_network_times_are_kept_as_chosen_and_price_the_unprofiled_tasks(tmp_path):
    from cost_models.cache import CostRecord

    baseline, chosen, unprofiled = [conv_of(8 * i) for i in range(1, 10)], [conv_of(8 * i) for i in range(10, 13)], \
        conv_of(800)
    with provider(tmp_path / "c.sqlite") as measured:
        measured.cache.put_many(measured.context, {task.key: CostRecord(1.0, 0.01, 10, measured_at=1000.0)
                                                   for task in [*baseline, *chosen, unprofiled]})
        store_network_times(measured, {task: 1.0 for task in baseline}, 3)
        store_network_times(measured, {task: 1.4 for task in chosen}, 3, chosen=True)
        assert len(measured.cache.get_many(chosen_context(measured.context), [t.key for t in baseline + chosen])) == 3
        calibrated = CalibratedCosts(measured)
        records = calibrated.measure([*baseline, *chosen, unprofiled])
    assert records[-1].median_ms == pytest.approx(1.4)
    assert calibrated.stats["factors"] == {"conv2d": 1.0, "conv2d (chosen)": 1.4}


@pytest.mark.parametrize("real", [0.93, 2.44])
def test_transforms_tvm_elided_in_the_network_set_no_factor(real):
    # inception_v3's profiles on a znver4 host: two of its three profiled transforms (NCHW16c/32c -> NCHW of its 1x1
    # map) became reshapes, 0 ms; the third ran 0.93x its record (another host's transforms: 2.44x). Their median, 0,
    # priced every transform no profile ran at nothing
    elided = {TransformTask((1, 2048, 1, 1), src, "NCHW"): 0.0 for src in ("NCHW16c", "NCHW32c")}
    ran = {TransformTask((1, 3, 299, 299), "NCHW", "NHWC"): real}
    factors = Factors.fit({**elided, **ran}, measured_at={task: 1000.0 for task in [*elided, *ran]})
    unprofiled = TransformTask((1, 64, 73, 73), "NCHW16c", "NHWC")
    assert factors.of(unprofiled) == factors.of(unprofiled, 1000.0) == real
    assert Factors.fit(elided).of(unprofiled) == 1.0  # only elided ones: as if none was profiled


def conv_of(channels: int) -> KernelTask:
    wl = Conv2DWorkload(1, channels, 8, 8, 16, (3, 3), (1, 1), (1, 1, 1, 1))
    return KernelTask(KernelSpec(wl, "NCHW8c", "NCHW8c", (), Epilogue()))


def test_a_factor_is_read_off_the_tasks_measured_nearest_in_time(tmp_path):
    # two sittings an hour apart: the first one's records 1.5x what the network runs, the second's level with it
    first = {conv_of(8 * i): 2.0 + 0.01 * i for i in range(1, 12)}  # 11 tasks, factors 2.01 .. 2.11
    second = {conv_of(8 * i): 1.0 for i in range(12, 22)}
    when = {task: 1000.0 + i for i, task in enumerate(first)} | {task: 4600.0 + i for i, task in enumerate(second)}
    factors = Factors.fit({**first, **second}, measured_at=when)
    assert factors.of(conv_of(800), 1004.0) == pytest.approx(2.05)  # the 9 nearest: 2.01 .. 2.09
    assert factors.of(conv_of(800), 5000.0) == 1.0
    assert factors.of(conv_of(800), 2800.0) == pytest.approx(2.07)  # nearer the first sitting's end: 2.03 .. 2.11
    assert factors.of(conv_of(800)) == factors.by_kind["conv2d"] == 2.01  # when unknown: the kind's median
    assert factors.of(TransformTask((1, 16, 8, 8), "NCHW", "NCHW16c"), 1004.0) == 1.0  # no transform profiled


def test_calibrated_costs_scale_each_task_by_its_own_sittings_factor(tmp_path):
    from cost_models.cache import CostRecord

    early = [conv_of(8 * i) for i in range(1, 10)]
    late = [conv_of(8 * i) for i in range(10, 19)]
    unprofiled = {conv_of(400): 1500.0, conv_of(408): 9500.0}  # measured with the early and the late sitting
    with provider(tmp_path / "c.sqlite") as measured:
        isolated = {task.key: CostRecord(1.0, 0.01, 10, measured_at=1000.0 + i) for i, task in enumerate(early)}
        isolated |= {task.key: CostRecord(1.0, 0.01, 10, measured_at=9000.0 + i) for i, task in enumerate(late)}
        isolated |= {task.key: CostRecord(1.0, 0.01, 10, measured_at=at) for task, at in unprofiled.items()}
        measured.cache.put_many(measured.context, isolated)
        store_network_times(measured, {task: 1.3 for task in early} | {task: 0.9 for task in late}, 3)
        records = CalibratedCosts(measured).measure([*early, *late, *unprofiled])  # a problem's tasks, priced at once
    assert [record.median_ms for record in records[-2:]] == pytest.approx([1.3, 0.9])


@pytest.mark.parametrize("fused_ms", [0.060, 0.240])
def test_a_call_tvm_fused_from_several_nodes_chains_is_split_among_them_by_their_values_sizes(fused_ms):
    # conv2d_1's max pool and the add node's own op with its scale, shift and relu6, fused by TVM into one call (the
    # detector's gates and adds): each node's chain gets the share of its ops' outputs (1 of 5 ops, all of one size),
    # on a host where the call is cheap as on one where it is not; before, neither chain got a time of its own
    from cost_models.pricing import chain_task

    graph = extract_graph(add_node_net())
    chosen = validate(baseline_plan(graph, "nchw8c"), graph)
    ops = ("max_pool2d_0", "add_0", "channel_scale_0", "channel_shift_0", "relu6_0")
    call = CallTime("fused_max_pool2d_add_multiply_add_clip", tuple(Origin(op) for op in ops), fused_ms, True)
    profile = Profile((call,), 0.0, {}, fused_ms, 3)
    times = network_times(graph, chosen, profile)
    pooled, added = (chain_task(graph, node, chosen[node]) for node in ("conv2d_1", "add_0"))
    assert times[pooled] == pytest.approx(fused_ms / 5) and times[added] == pytest.approx(fused_ms * 4 / 5)
    assert priced_ms(graph, chosen, profile) == pytest.approx(fused_ms)


def test_the_operators_part_of_a_call_with_fused_transforms_goes_to_their_chains_and_the_fixed_ones_stay_unpriced():
    # the same chains fused with the fixed reshape and a conversion: the conversion gets what the call takes beyond
    # the operators' bare call, the rest is split by output sizes (the reshape's share unpriced); without a bare call
    # of those operators nothing of the call is priced, as before
    from cost_models.pricing import chain_task

    graph = extract_graph(add_node_net())
    chosen = validate(baseline_plan(graph, "nchw8c"), graph)
    shape = graph.op("conv2d_1").shape
    ops = ("max_pool2d_0", "add_0", "reshape_0")
    bare = CallTime("fused_max_pool2d_add_reshape", tuple(Origin(op) for op in ops), 0.0264, True)
    moved = CallTime("fused_layout_transform_max_pool2d_add_reshape",
                     (Origin("conv2d_1", "NCHW8c", "NCHW", shape), *(Origin(op) for op in ops)), 0.0464, True)
    profile = Profile((moved,), 0.0, {}, 0.0464, 3)
    times = network_times(graph, chosen, profile, bare_bases([Profile((bare,), 0.0, {}, 0.0264, 3)]))
    pooled, added = (chain_task(graph, node, chosen[node]) for node in ("conv2d_1", "add_0"))
    assert times[TransformTask(shape, "NCHW8c", "NCHW")] == pytest.approx(0.020)
    assert times[pooled] == pytest.approx(0.0264 * 128 / 264) == times[added]
    assert unpriced_ms(graph, chosen, profile, bare_bases([Profile((bare,), 0.0, {}, 0.0264, 3)])) == pytest.approx(
        0.0264 * 8 / 264)
    assert network_times(graph, chosen, profile) == {}


def test_a_share_of_a_call_no_task_prices_is_unpriced(monkeypatch):
    # the same fused call, where the problem has no chain task for conv2d_1 (as for a dense's followers on a 2-D
    # value): its share of the call is no task's time, so it stays unpriced as a fixed operator's does
    import cost_models.calibration as calibration

    graph = extract_graph(add_node_net())
    chosen = validate(baseline_plan(graph, "nchw8c"), graph)
    ops = ("max_pool2d_0", "add_0", "channel_scale_0", "channel_shift_0", "relu6_0")
    call = CallTime("fused_max_pool2d_add_multiply_add_clip", tuple(Origin(op) for op in ops), 0.05, True)
    profile = Profile((call,), 0.01, {}, 0.06, 3)
    assert unpriced_ms(graph, chosen, profile) == pytest.approx(0.01)  # the VM's own calls only
    chain_task = calibration.chain_task
    monkeypatch.setattr(calibration, "chain_task", lambda graph, node, candidate:
                        None if node == "conv2d_1" else chain_task(graph, node, candidate))
    assert unpriced_ms(graph, chosen, profile) == pytest.approx(0.01 + 0.05 / 5)
    assert sum(network_times(graph, chosen, profile).values()) == pytest.approx(0.05 * 4 / 5)
