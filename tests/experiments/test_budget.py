"""The error budget of a search with bf16 or int8 candidates, on a tiny network measured here: plans are held to it
by giving up reduced-precision nodes (int8 ones to bf16 first); a budget too tight for any gives the fp32 plan; tune
and experiment trials report it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from experiments.budget import Budget, solve_within, to_limit
from experiments.cli import main
from experiments.config import ProblemSpec, Trial
from experiments.extraction import extract
from experiments.show import draw_plan
from experiments.solving import Solved, solve_all
from experiments.trials import run_trial
from experiments.tune import tune
from search import precision
from search.graph import extract_graph
from search.host import host
from search.plan import Plan, baseline_plan
from solvers.base import make_solver
from solvers.problem import Node, Problem
from tests.cli_helpers import one_error_line
from tests.search.tiny_nets import residual_concat_net

SPACE = {"name": "tiny", "threads": 1, "space_size": 1, "layouts": "NCHW"}
needs_bf16 = pytest.mark.skipif(not precision.bf16_settings(), reason="this CPU has no bf16 instructions")
needs_int8 = pytest.mark.skipif(not precision.int8_settings(), reason="this CPU has no int8 dot products")
INT8_NODES = [f"conv2d_{i}" for i in range(6)] + ["dense_0"]  # not the depthwise one: no int8 kernel into NCHW


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("budget") / "costs.sqlite"


@pytest.fixture(scope="module")
def cheap_bf16(cache):
    """The tiny net's measured auto-precision problem with every bf16 candidate made free, so that the solver
    takes them all."""
    extracted = extract(residual_concat_net(), cache=cache, precision="auto", costs="measured", **SPACE)
    problem = extracted.problem
    nodes = tuple(replace(node, costs=[0.0 if "bf16=" in c else cost for c, cost in zip(node.candidates, node.costs)])
                  for node in problem.nodes)
    return replace(extracted, problem=replace(problem, nodes=nodes))


def _dp(problem):
    return solve_all(problem, [make_solver("dp")])


def _bf16_nodes(extracted, solved) -> list[str]:
    return extracted.plan(solved.solutions[solved.best]).bf16_nodes


@needs_bf16
def test_a_loose_budget_keeps_the_bf16_plan(cheap_bf16):
    budget, lines = Budget(1.0), []
    solved = solve_within(cheap_bf16, _dp, budget, lines.append)
    nodes = _bf16_nodes(cheap_bf16, solved)
    assert len(nodes) == 7 and not budget.forbidden  # every conv2d
    (check,) = budget.checks
    assert check["within"] and check["bf16_nodes"] == 7 and 0 < check["error"] <= precision.DEFAULT_MAX_ERROR
    assert "within 1" in lines[0]


@needs_bf16
def test_a_budget_too_tight_for_any_bf16_node_gives_the_fp32_plan(cheap_bf16):
    budget = Budget(1e-9)
    solved = solve_within(cheap_bf16, _dp, budget, lambda line: None)
    assert _bf16_nodes(cheap_bf16, solved) == [] and len(budget.forbidden) == 7
    assert [c["bf16_nodes"] for c in budget.checks] == [7, 4, 2, 1]  # half the bf16 nodes given up each time
    assert not any(c["within"] for c in budget.checks)


@needs_bf16
def test_a_plan_that_held_is_kept_while_another_solvers_plan_is_brought_within(cheap_bf16):
    """Two solvers: "all" takes every free bf16 candidate, "one" only the one node the budget would limit first.
    Between their errors, "all" is over and loses that node for both; "one"'s result is still its first plan."""
    problem = cheap_bf16.problem
    full = _dp(problem).solutions["dp"]
    first = to_limit(problem, full.assignment, cheap_bf16.plan(full).bf16_nodes)[0]

    def two(limited):
        only = limited.forbidding(lambda node, candidate: "bf16=" in candidate and node != first)
        return Solved({"all": _dp(limited).solutions["dp"], "one": _dp(only).solutions["dp"]}, {})

    probe = Budget(1.0)
    solve_within(cheap_bf16, two, probe, lambda line: None)
    errors = {check["bf16_nodes"]: check["error"] for check in probe.checks}
    assert errors[1] < errors[7]  # one bf16 node rounds less than seven
    budget = Budget((errors[1] + errors[7]) / 2)
    solved = solve_within(cheap_bf16, two, budget, lambda line: None)
    assert [(c["bf16_nodes"], c["within"]) for c in budget.checks[:2]] == [(7, False), (1, True)]
    assert first in budget.forbidden  # limited for "all" ...
    assert solved.solutions["one"].assignment == two(problem).solutions["one"].assignment  # ... kept for "one"
    assert _bf16_nodes(cheap_bf16, Solved({"one": solved.solutions["one"]}, {})) == [first]
    assert budget.checks[-1]["within"] and budget.checks[-1]["bf16_nodes"] < 7  # "all", brought within


@needs_bf16
def test_tune_with_auto_precision_reports_the_budget_and_each_plans_error(cheap_bf16, cache, tmp_path):
    summary = tune(residual_concat_net(), tmp_path / "out", cache=cache, precision="auto",
                   max_error=0.05, repeat=2, calibrate=0, echo=lambda line: None, **SPACE)
    assert summary["measurements"]["new"] == 0  # the fixture measured the space
    assert summary["problem"]["precision"] == "auto" and summary["budget"]["max_error"] == 0.05
    assert summary["plan"]["relative_error"] <= 0.05 and summary["plan"]["operators"] == 9
    assert all(check["error"] <= 0.05 or not check["within"] for check in summary["budget"]["checks"])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["tune", "resnet18", "--max-error", "0", "--out", "{tmp}/o"], "max error must be a positive number"),
        (["extract", "resnet18", "--max-error", "inf", "--out", "{tmp}/p.json"], "max error must be a positive"),
        (["export", "resnet18", "--plan", "nchw", "--max-error", "-1", "--out", "{tmp}/a"], "max error must be"),
    ],
)
def test_cli_bad_budgets_are_one_error_line(argv, message, tmp_path, capsys):
    assert main([arg.format(tmp=tmp_path) for arg in argv]) == 2
    assert message in one_error_line(capsys)


def test_an_unknown_precision_is_one_error_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:  # argparse's choices
        main(["tune", "resnet18", "--precision", "fp16", "--out", str(tmp_path / "o")])
    assert exited.value.code == 2 and "invalid choice: 'fp16'" in one_error_line(capsys)


def test_the_plan_picture_names_each_operators_precision_and_the_error(tmp_path, monkeypatch):
    both = frozenset({"amx_bf16", "avx512_bf16"})  # a host with both units, whatever this one has
    monkeypatch.setattr(precision, "host", lambda: replace(host(), features=both))
    graph = extract_graph(residual_concat_net())
    choices = {**baseline_plan(graph, "nchw").choices, "conv2d_1": "NCHW>NCHW:bf16=1", "conv2d_4": "NCHW>NCHW:bf16=2"}
    Plan(choices, "tiny").save(tmp_path / "plan.json")
    draw_plan(tmp_path / "plan.json", tmp_path / "plan.svg", graph=graph, error=3e-3)
    text = (tmp_path / "plan.svg").read_text()
    assert "9 tuned operators (2 in bf16)" in text and "output error 3.0e-03 against fp32" in text
    assert "bf16 (amx_bf16)" in text and "bf16 (avx512_bf16)" in text


@needs_bf16
def test_an_experiment_trial_holds_its_plan_to_the_budget(cheap_bf16, monkeypatch):
    loose = replace(cheap_bf16, max_error=1.0)
    monkeypatch.setattr(ProblemSpec, "extract", lambda self, progress=None: loose)
    result = run_trial(Trial("tiny/dp/r0", "hash", ProblemSpec(model="tiny", precision="auto", max_error=1.0), "dp"))
    assert result.status == "optimal" and result.budget["max_error"] == 1.0 and not result.budget["forbidden"]
    (check,) = result.budget["checks"]
    assert check["solver"] == "dp" and check["bf16_nodes"] == 7 and check["within"]
    assert sum("bf16=" in choice for choice in result.solution["assignment"].values()) == 7


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    path = tmp_path_factory.mktemp("calibration") / "inputs.npz"
    np.savez(path, data=np.random.default_rng(1).uniform(-2, 3, (5, 1, 3, 8, 8)).astype(np.float32))
    return path


@pytest.fixture(scope="module")
def cheap_int8(cache, calibration):
    """The tiny net's measured auto-precision problem with calibration inputs, every int8 candidate made free and
    every bf16 one nearly free, so that the solver takes int8 wherever it can and bf16 next."""
    extracted = extract(residual_concat_net(), cache=cache, precision="auto", calibration_data=calibration, **SPACE)
    problem = extracted.problem

    def cost(candidate: str, measured: float) -> float:
        return 0.0 if "int8=" in candidate else 1e-9 if "bf16=" in candidate else measured

    nodes = tuple(replace(node, costs=[cost(c, m) for c, m in zip(node.candidates, node.costs)])
                  for node in problem.nodes)
    return replace(extracted, problem=replace(problem, nodes=nodes))


@needs_int8
def test_a_loose_budget_keeps_every_int8_node_and_reports_the_top1_changes(cheap_int8):
    assert cheap_int8.calibration is not None and len(cheap_int8.calibration.inputs) == 5
    budget = Budget(1.0)
    solved = solve_within(cheap_int8, _dp, budget, lambda line: None)
    plan = cheap_int8.plan(solved.solutions[solved.best])
    assert plan.int8_nodes == INT8_NODES and sorted(plan.ranges) == INT8_NODES and not budget.forbidden
    (check,) = budget.checks
    assert check["within"] and check["int8_nodes"] == len(INT8_NODES) and "top1_changed" in check


@needs_int8
def test_a_tight_budget_gives_int8_nodes_up_to_bf16_before_fp32(cheap_int8):
    budget = Budget(1e-9)
    solved = solve_within(cheap_int8, _dp, budget, lambda line: None)
    assert cheap_int8.plan(solved.solutions[solved.best]).reduced_nodes == []
    assert budget.checks[0]["int8_nodes"] == len(INT8_NODES) and not any(c["within"] for c in budget.checks)
    if precision.bf16_settings():  # the first nodes limited went to bf16, not fp32
        assert budget.checks[1]["bf16_nodes"] > 0 and set(budget.forbidden.values()) == {"bf16"}


def test_an_over_budget_plan_gives_up_int8_before_any_bf16_node_least_gain_first():
    fp32, bf16, int8 = "NCHW>NCHW", "NCHW>NCHW:bf16=2", "NCHW>NCHW:int8=2"
    saving = {"a": 5.0, "b": 1.0, "c": 3.0, "d": 2.0, "e": 0.5}  # what each node's reduced candidate saves
    problem = Problem(tuple(Node(name, (fp32, bf16, int8), np.array([10.0, 10.0 - gain, 10.0 - 2 * gain]))
                            for name, gain in saving.items()), ())
    mixed = {"a": int8, "b": int8, "c": int8, "d": bf16, "e": bf16}
    assert to_limit(problem, mixed, list(mixed)) == ["b"]  # half of the three int8 nodes: the one gaining least
    bf16_only = {"a": bf16, "b": bf16, "c": bf16, "d": bf16, "e": bf16}
    assert to_limit(problem, bf16_only, list(bf16_only)) == ["e", "b"]
    assert to_limit(problem, {"e": int8, "a": bf16}, ["e", "a"]) == ["e"]  # at least one
