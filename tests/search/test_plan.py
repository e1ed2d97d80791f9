"""Candidate spaces (names, bounds) and plans (JSON, validation messages, uniform baselines)."""

from __future__ import annotations

import json

import pytest

from search.candidates import Candidate, candidate_space, node_candidates
from search.errors import SearchError
from search.graph import extract_graph
from search.isa import HOST
from search.layouts import nearest_layout
from search.plan import Plan, baseline_plan, validate
from tests.search.tiny_nets import add_node_net, residual_concat_net


@pytest.fixture(scope="module")
def graph():
    return extract_graph(residual_concat_net())


def test_candidate_names_round_trip(graph):
    space = candidate_space(graph, knobs_per_layout=2)
    names = [c.name for candidates in space.values() for c in candidates]
    assert all(Candidate.parse(c.name) == c for candidates in space.values() for c in candidates)
    assert len(set(names)) > len(space)
    assert Candidate.parse("NCHW8c>NCHW16c:reg_n=14,oc_bn=4") == Candidate("NCHW8c", "NCHW16c", (("oc_bn", 4),
                                                                                                    ("reg_n", 14)))
    assert Candidate.parse("NCHW16c") == Candidate("NCHW16c", "NCHW16c")
    with pytest.raises(SearchError, match="malformed"):
        Candidate.parse("NCHW>NHWC:reg_n=many")


def test_space_covers_layout_pairs_and_respects_bounds(graph):
    conv = graph.op("conv2d_1")  # 16 -> 16 channels: 5 layouts each side
    one_each = node_candidates(conv, knobs_per_layout=1)
    assert len(one_each) == 25 and len({(c.in_layout, c.out_layout) for c in one_each}) == 25
    assert len(node_candidates(conv, knobs_per_layout=3)) > 25
    bounded = node_candidates(conv, knobs_per_layout=3, space_size=30)
    assert len(bounded) == 30 and bounded[:25] == one_each  # every pair's default before any second choice
    depthwise = node_candidates(graph.op("depthwise_conv2d_0"), knobs_per_layout=1)
    assert {(c.in_layout, c.out_layout) for c in depthwise} == {("NCHW", "NCHW")} | {
        (i, o) for i in ("NHWC", "NCHW4c", "NCHW8c", "NCHW16c") for o in ("NHWC", "NCHW4c", "NCHW8c", "NCHW16c")}
    concat = node_candidates(graph.op("concat_0"))
    layouts = ["NCHW", "NHWC", "NCHW4c", "NCHW8c", "NCHW16c"]  # 16 | each input, 32 not; copying, then in place
    assert [c.name for c in concat] == layouts + [f"{name}>{name}:in_place=1" for name in layouts]


def test_plan_json_round_trip(graph, tmp_path):
    plan = baseline_plan(graph, "nhwc", model="tiny", args={"batch": 1})
    plan.save(tmp_path / "plan.json")
    loaded = Plan.load(tmp_path / "plan.json")
    assert loaded == plan and json.loads((tmp_path / "plan.json").read_text())["model"] == "tiny"
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(SearchError, match="not valid JSON"):
        Plan.load(tmp_path / "bad.json")
    assert json.loads((tmp_path / "plan.json").read_text())["vector_unit"] == HOST.name  # whose default knobs
    older = {k: v for k, v in plan.to_dict().items() if k != "vector_unit"}
    assert Plan.from_dict(older).vector_unit == ""  # an older file: read against the host's unit


def test_plan_records_the_vector_unit_its_knobs_were_chosen_for(graph, tmp_path):
    plan = Plan(baseline_plan(graph, "nchw").choices, "tiny", {}, "avx512")
    plan.save(tmp_path / "plan.json")
    assert Plan.load(tmp_path / "plan.json") == plan
    data = json.loads((tmp_path / "plan.json").read_text())
    assert data["vector_unit"] == "avx512"
    (tmp_path / "plan.json").write_text(json.dumps({**data, "vector_unit": "sve"}))
    with pytest.raises(SearchError, match="plan.json: unknown vector unit 'sve'; known: avx2, avx512"):
        Plan.load(tmp_path / "plan.json")


@pytest.mark.parametrize(
    "change, message",
    [
        ({"conv2d_9": "NCHW>NCHW"}, "unknown node.*conv2d_9"),
        ({"conv2d_0": "NCHW>NCHW32c"}, "conv2d_0.*divisible by 32, tensor has 16"),
        ({"conv2d_0": "NCHW>NCHW:reg_n=99"}, "conv2d_0.*reg_n=99"),
        ({"conv2d_0": "NCHW>NCHW:warp=2"}, "conv2d_0.*warp=2"),
        ({"depthwise_conv2d_0": "NCHW8c>NCHW"}, "depthwise_conv2d_0.*no kernel for NCHW8c -> NCHW"),
        ({"concat_0": "NCHW>NHWC"}, "concat_0.*no kernel for NCHW -> NHWC"),
        ({"concat_0": "NCHW32c"}, "concat_0.*divisible by 32"),
        ({"dense_0": "NCHW>NCHW"}, "dense_0.*unknown layout 'NCHW' for a 2-D activation"),
            ({"dense_0": "NC>NC2c"}, "dense_0.*no kernel for NC -> NC2c; possible: NC>NC"),
        ({"conv2d_0": "LAYOUT>NCHW"}, "conv2d_0.*unknown layout 'LAYOUT'"),
    ],
)
def test_validation_messages(graph, change, message):
    choices = {**baseline_plan(graph, "nchw").choices, **change}
    with pytest.raises(SearchError, match=message):
        validate(Plan(choices), graph)


@pytest.mark.parametrize(
    ("data", "message"),
    [({"choices": {"a": 1}}, "node names to candidate strings"), ({"choices": {}, "args": [1, 2]}, "'args' must be an"),
     ({"choices": {}, "model": 7}, "'model' must be a string"), ({"choices": []}, "a 'choices' object")],
)
def test_malformed_plan_files_are_search_errors(data, message):
    with pytest.raises(SearchError, match=message):
        Plan.from_dict(data)
    assert Plan.from_dict({"choices": {}, "model": None, "args": None}).args == {}  # null: the default


def test_missing_node_is_reported(graph):
    choices = dict(baseline_plan(graph, "nchw").choices)
    del choices["concat_0"]
    with pytest.raises(SearchError, match="no candidate for node.*concat_0"):
        validate(Plan(choices), graph)


def test_nchw16c_baseline_falls_back_to_the_largest_dividing_block():
    assert nearest_layout("NCHW16c", 24) == "NCHW8c" and nearest_layout("NCHW16c", 3) == "NCHW"
    graph = extract_graph(add_node_net())  # 4 input channels, 8 everywhere else
    plan = baseline_plan(graph, "nchw16c")
    chosen = validate(plan, graph)
    assert (chosen["conv2d_0"].in_layout, chosen["conv2d_0"].out_layout) == ("NCHW4c", "NCHW8c")
    assert chosen["add_0"].name == "NCHW8c" and chosen["dense_0"].in_layout == "NC"
    with pytest.raises(SearchError, match="unknown baseline"):
        baseline_plan(graph, "nchw32c")
