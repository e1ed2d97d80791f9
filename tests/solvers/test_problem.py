"""The problem format: construction, JSON round trip, validation messages, evaluation."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from solvers.problem import Problem, ProblemError

GOOD = {
    "nodes": [
        {"name": "a", "candidates": ["x", "y"], "costs": [1, 2]},
        {"name": "b", "candidates": ["x", "y", "z"], "costs": [2, None, 1]},
    ],
    "edges": [{"src": "a", "dst": "b", "costs": [[0, 1, None], [1, 0, 2]]}],
    "meta": {"model": "toy"},
}


def test_round_trip(tmp_path):
    p = Problem.from_dict(GOOD)
    p.save(tmp_path / "p.json")
    q = Problem.load(tmp_path / "p.json")
    assert q.to_dict() == p.to_dict()
    assert json.loads((tmp_path / "p.json").read_text())["nodes"][1]["costs"][1] is None


def test_evaluate_and_violations():
    p = Problem.from_dict(GOOD)
    assert p.evaluate({"a": "y", "b": "z"}) == 2 + 1 + 2
    assert p.evaluate((1, 2)) == 5
    assert math.isinf(p.evaluate({"a": "x", "b": "z"}))
    assert p.violations({"a": "x", "b": "z"}) == ["pair 'a'='x', 'b'='z' is forbidden"]
    assert p.violations({"a": "x", "b": "y"}) == ["node 'b' candidate 'y' is forbidden"]


def test_duplicate_edges_are_merged_in_either_direction():
    p = Problem.build(
        [("a", ["x", "y"], [0, 0]), ("b", ["x", "y", "z"], [0, 0, 0])],
        [("a", "b", np.ones((2, 3))), ("b", "a", np.full((3, 2), 2.0))],
    )
    assert len(p.edges) == 1
    assert p.evaluate((0, 0)) == 3.0


def _with(path, value):
    data = json.loads(json.dumps(GOOD))
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


@pytest.mark.parametrize(
    "data, message",
    [
        (_with(["edges", 0, "dst"], "ghost"), "unknown node 'ghost'"),
        (_with(["nodes", 1, "name"], "a"), "duplicate node name 'a'"),
        (_with(["edges", 0, "costs"], [[0, 1], [1, 0]]), "shape 2x2, expected 2x3"),
        (_with(["nodes", 0, "costs"], [1, float("nan")]), "NaN"),
        (_with(["nodes", 0, "costs"], [1, -2]), "non-negative"),
        (_with(["nodes", 0, "costs"], [1, "fast"]), "not a number"),
        (_with(["nodes", 0, "costs"], [None, None]), "every candidate is forbidden"),
        (_with(["edges", 0, "dst"], "a"), "self-loops"),
        (_with(["nodes", 0, "candidates"], ["x", "x"]), "appears twice"),
        (_with(["nodes"], []), "non-empty list"),
        ({"nodes": GOOD["nodes"], "extra": 1}, "unknown top-level key"),
        (_with(["nodes", 0], {"name": "a"}), "missing key"),
        (_with(["edges", 0, "costs"], [[0, 1, 2], [1]]), "expected 2x3"),
    ],
)
def test_validation_messages(data, message):
    with pytest.raises(ProblemError, match=message):
        Problem.from_dict(data)


def test_empty_problem_rejected():
    with pytest.raises(ProblemError, match="at least one node"):
        Problem.build([])


def test_load_reports_file_faults(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ProblemError, match="not valid JSON"):
        Problem.load(bad)
    with pytest.raises(ProblemError, match="cannot read"):
        Problem.load(tmp_path / "missing.json")


def test_assignment_errors():
    p = Problem.from_dict(GOOD)
    with pytest.raises(ProblemError, match="misses"):
        p.evaluate({"a": "x"})
    with pytest.raises(ProblemError, match="no candidate 'q'"):
        p.evaluate({"a": "q", "b": "x"})
    with pytest.raises(ProblemError, match="out of range"):
        p.evaluate((0, 5))


def test_forbidding_candidates_keeps_the_rest_of_the_problem():
    p = Problem.build([("a", ["x", "y"], [1, 2]), ("b", ["x", "y"], [2, 1])], [("a", "b", [[0, 5], [5, 0]])])
    restricted = p.forbidding(lambda node, candidate: node == "b" and candidate == "y")
    assert restricted.evaluate({"a": "x", "b": "x"}) == p.evaluate({"a": "x", "b": "x"}) == 3.0
    assert math.isinf(restricted.evaluate({"a": "y", "b": "y"})) and p.evaluate({"a": "y", "b": "y"}) == 3.0
    assert np.array_equal(restricted.pairs[(0, 1)], p.pairs[(0, 1)]) and list(p.nodes[1].costs) == [2, 1]  # p unchanged
