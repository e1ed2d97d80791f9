"""The ``tessera`` console script, run as a real process: one-line errors with exit code 2, generate -> solve."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.cli import main
from experiments.compare import LP_BOUND, compare, format_table
from solvers.generators import generate
from tests.cli_helpers import one_error_line

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTED_KEYS = {"solver", "cost", "optimal", "lower_bound", "gap", "seconds", "assignment"}
GOOD = {"nodes": [{"name": "a", "candidates": ["x", "y"], "costs": [1, 2]}], "edges": []}


def tessera(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "experiments.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def _bad_edge(**edge) -> str:
    two = [{"name": n, "candidates": ["x", "y"], "costs": [1, 2]} for n in ("a", "b")]
    return json.dumps({"nodes": two, "edges": [{"src": "a", "dst": "b", "costs": [[0, 1], [1, 0]], **edge}]})


@pytest.mark.parametrize(
    ("text", "args", "message"),
    [
        ('{"nodes": [', [], "not valid JSON"),
        (_bad_edge(dst="c"), [], "unknown node 'c'"),
        (_bad_edge(costs=[[0, "NaN"], [1, 0]]).replace('"NaN"', "NaN"), [], "NaN"),
        (_bad_edge(costs=[[0, 1, 2], [1, 0, 2]]), [], "shape 2x3, expected 2x2"),
        (None, [], "cannot read"),
        (json.dumps(GOOD), ["--solver", "simplex"], "unknown solver 'simplex'"),
        (json.dumps(GOOD), ["--time-limit", "-1"], "time_limit must be a positive number"),
    ],
    ids=["bad-json", "unknown-node", "nan", "wrong-shape", "missing-file", "unknown-solver", "negative-time-limit"],
)
def test_solve_rejects_bad_input_in_one_line(tmp_path, text, args, message):
    path = tmp_path / "problem.json"
    if text is not None:
        path.write_text(text)
    result = tessera("solve", str(path), *args)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_generate_then_solve(tmp_path):
    problem, plan = tmp_path / "chain.json", tmp_path / "plan.json"
    made = tessera("generate", "chain", "--seed", "1", "--nodes", "30", "--candidates", "4", "--out", str(problem))
    assert made.returncode == 0 and "30 nodes" in made.stdout
    data = json.loads(problem.read_text())
    assert data["meta"]["generator"] == "chain"
    problem.write_text(json.dumps({**data, "meta": {**data["meta"], "vector_unit": "avx2"}}))
    result = tessera("solve", str(problem), "--solver", "dp", "--bound", "--out", str(plan))
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert set(printed) >= DOCUMENTED_KEYS
    assert printed["optimal"] and len(printed["assignment"]) == 30
    assert printed["lower_bound"] <= printed["cost"] + 1e-6
    written = json.loads(plan.read_text())
    assert written["choices"] == printed["assignment"] and written["vector_unit"] == "avx2"  # the problem's
    assert written["solution"]["cost"] == printed["cost"] and "assignment" not in written["solution"]


def test_generate_rejects_bad_sizes(tmp_path):
    result = tessera("generate", "densenet", "--seed", "0", "--nodes", "5", "--out", str(tmp_path / "p.json"))
    assert result.returncode == 2 and result.stderr.startswith("error: densenet: the number of nodes is fixed")
    assert not (tmp_path / "p.json").exists()


def test_comparison_behind_compare_and_benchmark():
    problem = generate("ssd", seed=0, candidates=3)
    rows = compare(problem, {"dp": {}, "greedy": {}, "pbqp": {"time_limit": 5.0}}, instance="ssd")
    by_solver = {r.solver: r for r in rows}
    assert list(by_solver) == ["dp", "greedy", "pbqp", LP_BOUND]
    assert by_solver["dp"].status == "optimal" and by_solver["dp"].gap == 0.0 and by_solver["dp"].vs_best == 0.0
    assert by_solver[LP_BOUND].bound <= by_solver["dp"].cost + 1e-6
    assert by_solver["greedy"].cost >= by_solver["dp"].cost - 1e-6
    table = format_table(rows, markdown=True).splitlines()
    assert len(table) == 2 + len(rows) and table[0].startswith("| instance") and table[1].startswith("|---")
    refused = compare(problem, {"pbqp": {"time_limit": -1}}, instance="ssd", lp=False)  # a SolverError: a row, a note
    assert len(refused) == 1 and refused[0].cost is None and "time_limit" in refused[0].status


def test_solve_never_writes_its_plan_over_the_problem_or_into_a_directory(tmp_path, capsys):
    problem = tmp_path / "p.json"
    problem.write_text(json.dumps(GOOD))
    assert main(["solve", str(problem), "--out", str(problem)]) == 2
    assert "is the problem file" in one_error_line(capsys)
    assert json.loads(problem.read_text()) == GOOD  # untouched
    assert main(["solve", str(problem), "--out", str(tmp_path)]) == 2
    assert "is a directory" in one_error_line(capsys)


def test_a_plan_from_solve_leaves_out_the_auxiliary_nodes_of_shared_transforms(tmp_path, capsys):
    """A measured problem prices a value read twice in a layout with an auxiliary node (``meta["auxiliary"]``): the
    solver assigns it, the plan (which export and show read) must not name it."""
    problem, plan = tmp_path / "p.json", tmp_path / "plan.json"
    nodes = [{"name": "conv", "candidates": ["NCHW", "NHWC"], "costs": [1, 2]},
             {"name": "conv@NHWC", "candidates": ["absent", "present"], "costs": [0, 1]}]
    edges = [{"src": "conv", "dst": "conv@NHWC", "costs": [[0, 1], [0, 0]]}]
    problem.write_text(json.dumps({"nodes": nodes, "edges": edges,
                                   "meta": {"model": "m", "auxiliary": ["conv@NHWC"]}}))
    assert main(["solve", str(problem), "--out", str(plan)]) == 0
    assert json.loads(capsys.readouterr().out)["assignment"] == {"conv": "NCHW", "conv@NHWC": "absent"}
    assert json.loads(plan.read_text())["choices"] == {"conv": "NCHW"}


def test_version_and_debug_after_the_subcommand():
    version = tessera("--version")
    assert version.returncode == 0 and version.stdout.startswith("tessera ")
    late = tessera("solve", "no-such-file.json", "--debug")  # --debug after the subcommand: the traceback
    assert late.returncode != 0 and "Traceback" in late.stderr
    plain = tessera("solve", "no-such-file.json")
    assert plain.returncode == 2 and plain.stderr.startswith("error: ") and "Traceback" not in plain.stderr


def test_an_unexpected_exception_is_one_internal_error_line_with_exit_code_3(monkeypatch, capsys):
    import experiments.cli as cli

    def broken(args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(cli, "_run_solve", broken)
    assert main(["solve", "anything.json"]) == 3
    line = one_error_line(capsys)
    assert "internal error (RuntimeError: a bug)" in line and "--debug" in line
    with pytest.raises(RuntimeError):
        main(["solve", "anything.json", "--debug"])


@pytest.mark.parametrize("suffix", [".json", ".wcsp"])
def test_a_binary_problem_file_is_one_error_line(tmp_path, capsys, suffix):
    binary = tmp_path / f"p{suffix}"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    assert main(["solve", str(binary)]) == 2
    assert "p" + suffix in one_error_line(capsys)


def test_a_solver_out_of_time_without_an_assignment_exits_4_not_1(tmp_path, capsys, monkeypatch):
    """Exit 1 is for a problem proven infeasible; a solver that ran out of time proved nothing."""
    import solvers
    from solvers.base import Solution

    problem = tmp_path / "p.json"
    assert main(["generate", "chain", "--seed", "0", "--nodes", "4", "--candidates", "2", "--out", str(problem)]) == 0
    monkeypatch.setattr(solvers, "solve", lambda *args, **kwargs: Solution("ilp", {}, math.inf, "not_found"))
    capsys.readouterr()
    assert main(["solve", str(problem), "--solver", "ilp", "--time-limit", "0.01"]) == 4
    assert "proved none impossible (status: not_found)" in one_error_line(capsys)
