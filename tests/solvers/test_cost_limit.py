"""Costs as large as a problem may hold: ``COST_LIMIT`` is enforced when a problem is built, numbers beyond a float
are refused when one is read, and every solver still finds the right answer at the limit (no sum overflows)."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

from solvers import SOLVERS, solve
from solvers.problem import COST_LIMIT, Edge, Node, Problem, ProblemError, parse_json
from solvers.testing import brute_force, random_problem

EXACT = ("auto", "dp", "ilp", "toulbar2")
"""The solvers that prove their optimum on these tiny problems."""


def _scaled_to_the_limit(problem: Problem, fill: float = 0.99) -> tuple[Problem, float]:
    """``problem`` with every cost multiplied so that the largest finite costs of its nodes and edges sum to
    ``fill * COST_LIMIT``, and the factor."""
    arrays = [n.costs for n in problem.nodes] + [e.costs for e in problem.edges]
    peaks = sum(float(np.max(a, where=np.isfinite(a), initial=0.0)) for a in arrays)
    factor = fill * COST_LIMIT / peaks
    nodes = tuple(Node(n.name, n.candidates, n.costs * factor) for n in problem.nodes)
    edges = tuple(Edge(e.src, e.dst, e.costs * factor) for e in problem.edges)
    return Problem(nodes, edges, problem.meta), factor


def test_costs_summing_past_the_limit_are_refused_naming_it():
    at_limit = Problem.build([("a", ["x"], [COST_LIMIT / 2]), ("b", ["x"], [COST_LIMIT / 2])])
    assert at_limit.evaluate({"a": "x", "b": "x"}) == COST_LIMIT
    with pytest.raises(ProblemError, match=r"sum to 2e\+300, above the limit of 1e\+300 .*node 'a' alone 1e\+300"):
        Problem.build([("a", ["x"], [COST_LIMIT]), ("b", ["x"], [COST_LIMIT])])
    with pytest.raises(ProblemError, match="more than a float holds"):  # 1e308 + 1e308 overflows
        Problem.build([("a", ["x"], [1e308]), ("b", ["x"], [1e308])])
    Problem.build([("a", ["x", "y"], [math.inf, 1.0])])  # forbidden entries are not costs


@pytest.mark.parametrize(
    ("text", "message"),
    [("[1e400]", "1e400 is too large for a float"), ("[" + "9" * 400 + "]", "too large for a float"),
     ("[NaN]", "NaN is not a JSON number"), ("[Infinity]", "Infinity is not a JSON number"),
     ("[-Infinity]", "-Infinity is not a JSON number"), ('{"a": [', "not valid JSON")],
)
def test_json_beyond_a_float_or_the_standard_is_refused(text, message):
    with pytest.raises(ProblemError, match=message):
        parse_json(text)


def test_a_problem_file_with_a_cost_beyond_a_float_is_refused(tmp_path):
    path = tmp_path / "p.json"
    path.write_text('{"nodes": [{"name": "a", "candidates": ["x", "y"], "costs": [1e999, 1]}]}')
    with pytest.raises(ProblemError, match="p.json: number 1e999 is too large for a float"):
        Problem.load(path)
    assert json.loads(path.read_text().replace("1e999", "1"))  # the rest of the file is fine


@pytest.mark.parametrize("solver", sorted(SOLVERS))
def test_every_solver_answers_at_the_limit_as_at_ordinary_costs(solver):
    for seed in range(4):
        small = random_problem(seed, nodes=5)
        problem, factor = _scaled_to_the_limit(small)
        ordinary = solve(small, solver, time_limit=20)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an overflow in numpy would warn
            solution = solve(problem, solver, bound=True, time_limit=20)
        assert solution.status == ordinary.status, seed
        assert solution.cost == pytest.approx(ordinary.cost * factor, rel=1e-9), seed
        optimum = brute_force(small)[0] * factor
        if solver in EXACT and math.isfinite(optimum):
            assert solution.cost == pytest.approx(optimum, rel=1e-9), seed
        assert solution.lower_bound is None or solution.lower_bound <= optimum * (1 + 1e-9)
        json.dumps(solution.to_dict(), allow_nan=False)
