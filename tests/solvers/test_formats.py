"""The standard formats: round trips keep every assignment's cost, the readers follow each format's semantics (hard
costs, shifts, shared tables, maximisation) and refuse what tessera cannot hold or a malformed file with the line."""

from __future__ import annotations

import doctest
import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from solvers import Problem, ProblemError, formats, solve
from solvers.formats import format_of, read_problem, write_problem
from solvers.problem import write_text_atomic
from solvers.testing import random_problem


def every_cost(problem: Problem) -> list[float]:
    return [problem.evaluate(x) for x in itertools.product(*(range(k) for k in problem.domain_sizes))]


def _decimal_problem(seed: int) -> Problem:
    rng = np.random.default_rng(seed)
    base = random_problem(seed)
    nodes = [(n.name, n.candidates, np.round(n.costs + rng.random(n.costs.shape) * 7, 4)) for n in base.nodes]
    edges = [(e.src, e.dst, np.round(e.costs + rng.random(e.costs.shape), 3)) for e in base.edges]
    return Problem.build(nodes, edges)


@pytest.mark.parametrize("suffix", [".wcsp", ".cfn", ".uai", ".json", ".cfn.gz", ".wcsp.xz", ".uai.bz2"])
def test_round_trips_keep_every_assignments_cost(tmp_path, suffix):
    for seed in range(40):
        problem = random_problem(seed)
        path = tmp_path / f"p{seed}{suffix}"
        write_problem(problem, path)
        back = read_problem(path)
        assert back.domain_sizes == problem.domain_sizes, seed
        assert back.meta.get("offset", 0.0) == 0.0, seed
        if ".uai" in suffix:
            np.testing.assert_allclose(every_cost(back), every_cost(problem), rtol=1e-12, atol=1e-12)
        else:
            assert every_cost(back) == every_cost(problem), seed
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left behind


def test_cfn_keeps_decimal_costs_names_and_the_offset(tmp_path):
    for seed in range(20):
        problem = _decimal_problem(seed)
        odd = Problem.build(
            [(f"block{seed}/layer 0:{n.name}", [f"NCHW>NCHW16c:reg_n={c},x" for c in n.candidates], n.costs)
             for n in problem.nodes],
            [(f"block{seed}/layer 0:{e.src}", f"block{seed}/layer 0:{e.dst}", e.costs) for e in problem.edges],
            {"offset": -2.5, "name": "odd names"},
        )
        write_problem(odd, tmp_path / "p.cfn")
        back = read_problem(tmp_path / "p.cfn")
        assert [n.name for n in back.nodes] == [n.name for n in odd.nodes]
        assert [n.candidates for n in back.nodes] == [n.candidates for n in odd.nodes]
        assert every_cost(back) == every_cost(odd) and back.meta["offset"] == -2.5, seed


def test_wcsp_refuses_decimal_costs_and_uai_huge_ones(tmp_path):
    with pytest.raises(ProblemError, match=r"wcsp holds integer costs only.*write \.cfn"):
        write_problem(_decimal_problem(1), tmp_path / "p.wcsp")
    huge = Problem.build([("a", ["x", "y"], [0, 800])])
    with pytest.raises(ProblemError, match=r"node 'a' has cost 800.*underflows"):
        write_problem(huge, tmp_path / "p.uai")
    assert not list(tmp_path.iterdir())


WCSP = """demo 3 2 5 10
2 2 2
0 1 0
1 0 0 1
1 4
-2 0 1 0 2
0 1 10
1 0 3
2 1 2 0 -1
1 2 0 1
0 7
"""
"""UB 10; a constant 1; x0=1 costs 4; a shared table on (x0, x1) with 10 on (0, 1) (hard) and 3 on (1, 0), reused on
(x1, x2); x2=0 costs 7 (soft: 7 plus the constant stays below UB)."""


def test_wcsp_semantics():
    problem = formats.read_wcsp(WCSP)
    assert [n.name for n in problem.nodes] == ["x0", "x1", "x2"] and problem.nodes[0].candidates == ("v0", "v1")
    assert problem.meta["offset"] == 1.0
    assert problem.evaluate((0, 0, 0)) == 7.0  # x2=0 costs 7
    assert problem.evaluate((0, 1, 0)) == math.inf  # the shared table's hard pair (0, 1) on (x0, x1)
    assert problem.evaluate((1, 0, 1)) == math.inf  # the reused table's hard pair (0, 1) on (x1, x2)
    assert problem.evaluate((1, 1, 0)) == 4 + 0 + 3 + 7


def test_cfn_hard_cost_counts_the_other_functions_floor():
    text = ("{problem {name h mustbe <10} variables {a 2 b 2} functions {c {scope [] costs [4]} "
            "u {scope [a] costs [0 6]} p {scope [a b] costs [0 5 0 6]}}}")
    problem = formats.read_cfn(text)
    # with the constant 4 every assignment costs at least 4: x0=1 (6) and the pair (1, 1) (6) reach UB, (0, 1) not
    assert np.isinf(problem.nodes[0].costs[1]) and np.isinf(problem.pairs[0, 1][1, 1])
    assert problem.evaluate((0, 1)) == 5.0


CFN = """# a comment line
{ problem { name: "demo", mustbe: ">-5.0" },
  variables: { "v1": ["a", "b"], "v2": 2 },
  functions: {
    "c0": {scope: [], costs: [-6.0]},
    "c1": {scope: ["v1"], costs: [1.0, 0.5]},
    "s": {scope: [v1 v2] defaultcost: -1.5 costs: [b 1 5.5]},   // sparse
    "t": {scope: [v2 v1] costs: "s"}
  }
}
"""


def test_cfn_maximisation_sparse_and_shared_tables():
    problem = formats.read_cfn(CFN)
    assert problem.meta["objective"] == "maximize"
    for x in itertools.product(range(2), range(2)):
        utility = -6.0 + [1.0, 0.5][x[0]] + (5.5 if x == (1, 1) else -1.5) + (5.5 if (x[1], x[0]) == (1, 1) else -1.5)
        assert -(problem.evaluate(x) + problem.meta["offset"]) == pytest.approx(utility), x
    assert min(float(np.min(n.costs)) for n in problem.nodes) >= 0


def test_uai_reads_probabilities_as_costs():
    text = "MARKOV\n2\n2 3\n2\n1 0\n2 0 1\n2\n0.5 2.0\n6\n1 0 1 1 0.9 0.25\n"
    problem = formats.read_uai(text)
    assert problem.evaluate((0, 1)) == math.inf  # probability 0
    assert problem.evaluate((1, 2)) + problem.meta["offset"] == pytest.approx(-math.log(2.0 * 0.25))
    assert solve(problem, "auto").assignment == {"x0": "v1", "x1": "v0"}


@pytest.mark.parametrize(
    ("reader", "text", "message"),
    [
        (formats.read_wcsp, "p 2 2 1 9\n2 2\n2 0 x 0 0\n", r"line 3: expected a variable of function 0"),
        (formats.read_wcsp, "p 3 2 1 9\n2 2 2\n3 0 1 2 0 0\n", r"function 0 \(line 3\) has 3 variables \(x0, x1, x2\)"),
        (formats.read_wcsp, "p 2 2 1 9\n2 2\n2 0 1 -1 >= 1 2\n", r"in intension \('>='\)"),
        (formats.read_wcsp, "p 2 2 1 9\n2 x\n", r"line 2: expected the domain size of variable 1"),
        (formats.read_wcsp, "p 1 2 1 9\n2\n1 0 0 1\n5 1\n", r"tuple \[5\] is outside the domains"),
        (formats.read_wcsp, "p 1 2 1 9\n2\n1 0 0 2\n0 1\n", r"the file ends where a value of function 0"),
        (formats.read_cfn, '{problem: {name: x, mustbe: "<9"}, variables: {a: 2}, functions: {f: {scope: [a], '
                           'costs: [1]}}}', r"function f \(line 1\) has 1 costs for 2 tuples"),
        (formats.read_cfn, "{problem {name x mustbe <9} variables {a 2 b 2 c 2} functions {f {scope [a b c] "
                           "costs [0 0 0 0 0 0 0 0]}}}", r"function f \(line 1\) has 3 variables \(a, b, c\)"),
        (formats.read_cfn, "{problem {name x mustbe <9} variables {a 2 b 2} functions {g {scope [a b] type "
                           "salldiff params {metric var cost 1}}}}", r"function g \(line 1\) is a global cost"),
        (formats.read_cfn, "{problem {name x mustbe 9}}", r"mustbe must be '<' or '>' and a number"),
        (formats.read_cfn, "{problem {name x mustbe <9} variables {a 2} functions {f {scope [z] costs [1 2]}}}",
         r"unknown variable 'z'"),
        (formats.read_uai, "MARKOV\n1\n2\n1\n1 0\n3\n1 1 1\n", r"function 0 has 3 entries, but its scope has 2"),
        (formats.read_uai, "MARKOV\n1\n2\n1\n1 0\n2\n1 -1\n", r"value -1 is not a finite non-negative number"),
        (formats.read_uai, "FACTOR\n1\n", r"line 1: expected MARKOV or BAYES"),
        (formats.read_uai, "MARKOV\n1\n2\n1\n1 0\n2\n0 0\n", r"node 'x0': every candidate is forbidden"),
    ],
)
def test_malformed_files_are_refused_naming_the_place(reader, text, message):
    with pytest.raises(ProblemError, match=message):
        reader(text)


def test_unknown_suffix_and_unreadable_files(tmp_path):
    with pytest.raises(ProblemError, match=r"unknown format '\.txt'"):
        format_of(tmp_path / "p.txt")
    with pytest.raises(ProblemError, match="cannot read"):
        read_problem(tmp_path / "missing.wcsp")
    (tmp_path / "bad.cfn.gz").write_text("not gzip")
    with pytest.raises(ProblemError, match="bad.cfn.gz"):
        read_problem(tmp_path / "bad.cfn.gz")


@pytest.mark.parametrize(
    ("suffix", "text"),
    [(".wcsp", "w 1 1000000000 0 10\n1000000000\n"),
     (".wcsp", "w 2 100000 1 10\n100000 100000\n2 0 1 0 0\n"),
     (".uai", "MARKOV\n1\n1000000000\n0\n"),
     (".cfn", '{"problem": {"name": "p", "mustbe": "<10"}, "variables": {"a": 100000, "b": 100000}, '
              '"functions": {"f": {"scope": ["a", "b"], "defaultcost": 0, "costs": []}}}')],
    ids=["wcsp-domain", "wcsp-table", "uai-domain", "cfn-table"],
)
def test_files_declaring_too_many_entries_are_refused_before_allocating(tmp_path, suffix, text):
    path = tmp_path / f"p{suffix}"
    path.write_text(text)
    with pytest.raises(ProblemError, match=r"entries for .* take the file past the 1e\+08"):
        read_problem(path)


class _FullDisk:
    """A file opener whose stream fails half-way through a write, as on a full disk."""

    def __init__(self, path: Path, mode: str) -> None:
        self.stream = open(path, mode)

    def __enter__(self) -> _FullDisk:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stream.close()

    def write(self, text: str) -> None:
        self.stream.write(text[: len(text) // 2])
        raise OSError(28, "No space left on device")


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    target = tmp_path / "p.json"
    target.write_text("old")
    with pytest.raises(OSError, match="No space left"):
        write_text_atomic(target, "new text", _FullDisk)
    (tmp_path / "folder.cfn").mkdir()
    with pytest.raises(ProblemError, match="cannot write .*folder.cfn: Is a directory"):
        write_problem(random_problem(1), tmp_path / "folder.cfn")
    with pytest.raises(ProblemError, match="underflows"):
        write_problem(Problem.build([("a", ["x"], [800.0])]), target.with_suffix(".uai"))
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["folder.cfn", "p.json"]


def test_the_examples_run():
    assert doctest.testmod(formats).failed == 0
