"""A plan's time outside the problem's terms, priced call by call from other plans' profiles: on synthetic profiles of
two hosts (one where a fixed operator's call costs more beside blocked layouts, as on an AMD `znver4` host, one where
it costs the same), and against a real profile of a tiny export."""

from __future__ import annotations

import statistics

import pytest

from cost_models.calibration import unpriced_ms
from cost_models.unpriced import UnpricedCalls, estimate, plan_calls
from search.artifact import load_artifact
from search.emit import Origin
from search.export import export
from search.graph import extract_graph
from search.host import make_target
from search.plan import baseline_plan, validate
from search.profile import CallTime, Profile, profile_artifact
from tests.search.tiny_nets import residual_concat_net, ssd_like_net

OVERHEAD_MS = 0.2
"""The VM's own calls in every synthetic profile."""


def _calls(graph, choices) -> list[tuple[Origin, ...]]:
    """What an export of ``choices`` on ``ssd_like_net`` calls, as TVM fuses it: each conv alone, each head's permute
    and reshape in one call with the transform of a blocked input to NCHW, and the concat with its reshape."""
    calls = [(Origin(op.name),) for op in graph.tunable]
    for conv, permute, reshape in (("conv2d_2", "permute_dims_0", "reshape_0"),
                                   ("conv2d_3", "permute_dims_1", "reshape_1")):
        layout = choices[conv].out_layout
        moved = (Origin(conv, layout, "NCHW", graph.op(conv).shape),) if layout != "NCHW" else ()
        calls.append((*moved, Origin(permute), Origin(reshape)))
    return [*calls, (Origin("concat_0"), Origin("reshape_2"))]


def _profile(graph, choices, blocked_head_ms: float) -> Profile:
    """A synthetic profile of ``choices``: a head's call takes ``blocked_head_ms`` where its input was blocked and
    0.1 ms where it was NCHW or NHWC; kernels 1 ms, the concat 0.05 ms."""
    times = []
    for computes in _calls(graph, choices):
        if len(computes) == 1:
            times.append(1.0)
        elif computes[0].op == "concat_0":
            times.append(0.05)
        else:
            times.append(blocked_head_ms if computes[0].src not in ("", "NHWC") else 0.1)
    calls = tuple(CallTime(f"f{i}", computes, ms, True) for i, (computes, ms) in
                  enumerate(zip(_calls(graph, choices), times)))
    return Profile(calls, OVERHEAD_MS, {}, sum(times) + OVERHEAD_MS, 10)


@pytest.mark.parametrize("blocked_head_ms", [0.4, 0.1], ids=["znver4-like", "even"])
def test_a_plan_is_priced_by_the_calls_of_other_plans_in_its_layout_context(blocked_head_ms):
    graph = extract_graph(ssd_like_net())
    plans = {name: validate(baseline_plan(graph, name), graph) for name in ("nchw", "nhwc", "nchw16c")}
    mixed = dict(plans["nchw"])
    mixed["conv2d_2"] = plans["nchw16c"]["conv2d_2"]  # one head beside a blocked layout, the other beside NCHW
    profiles = {name: _profile(graph, choices, blocked_head_ms) for name, choices in {**plans, "mixed": mixed}.items()}
    unpriced = {name: UnpricedCalls.of(graph, choices, profiles[name]) for name, choices in
                {**plans, "mixed": mixed}.items()}
    for name, choices in {**plans, "mixed": mixed}.items():  # the calls that are no task: heads, concat, the VM
        assert unpriced[name].total_ms == pytest.approx(unpriced_ms(graph, choices, profiles[name]))
    truth = unpriced["mixed"].total_ms
    assert truth == pytest.approx(0.1 + blocked_head_ms + 0.05 + OVERHEAD_MS)
    others = [unpriced[name] for name in plans]
    assert estimate(plan_calls(graph, mixed, [call.computes for call in profiles["mixed"].calls]), others) \
        == pytest.approx(truth)
    median = statistics.median(other.total_ms for other in others)  # one constant for every plan
    assert (median == pytest.approx(truth)) == (blocked_head_ms == 0.1)


def test_a_call_no_other_plan_made_is_priced_by_its_operators_shares():
    graph = extract_graph(ssd_like_net())
    nchw = validate(baseline_plan(graph, "nchw"), graph)
    profile = _profile(graph, nchw, 0.4)
    merged = [call.computes for call in profile.calls if len(call.computes) == 1] + [
        (Origin("permute_dims_0"), Origin("reshape_0"), Origin("permute_dims_1"), Origin("reshape_1"),
         Origin("concat_0"), Origin("reshape_2"))]  # both heads and the concat in one call
    assert estimate(plan_calls(graph, nchw, merged), [UnpricedCalls.of(graph, nchw, profile)]) == pytest.approx(
        0.1 + 0.1 + 0.05 + OVERHEAD_MS)


def test_a_real_export_priced_by_its_own_profile_is_its_unpriced_time(tmp_path):
    graph = extract_graph(residual_concat_net())
    plan = baseline_plan(graph, "nhwc")
    export(graph, plan, target=make_target(1), threads=1).save(tmp_path)
    chosen = validate(plan, graph)
    profile = profile_artifact(load_artifact(tmp_path), runs=3)
    own = UnpricedCalls.of(graph, chosen, profile)
    assert own.total_ms == pytest.approx(unpriced_ms(graph, chosen, profile))
    assert own.total_ms >= profile.overhead_ms > 0
    assert estimate(plan_calls(graph, chosen, [call.computes for call in profile.calls]), [own]) == pytest.approx(
        own.total_ms)
    assert estimate([], []) == 0.0
