"""``tessera convert`` and ``tessera solve`` on the standard formats: round trips through the command line, and one
``error:`` line with exit code 2 for every bad input, the input never overwritten, no temporary file left."""

from __future__ import annotations

import itertools
import json

import pytest

from experiments.cli import main
from solvers.formats import read_problem
from solvers.testing import random_problem
from tests.cli_helpers import one_error_line


def _costs(problem):
    return [problem.evaluate(x) for x in itertools.product(*(range(k) for k in problem.domain_sizes))]


def test_convert_round_trip_and_solve_a_converted_file(tmp_path, capsys):
    problem = random_problem(11, nodes=6, density=0.7)
    problem.save(tmp_path / "p.json")
    for suffix in (".wcsp", ".cfn.gz", ".uai"):
        assert main(["convert", str(tmp_path / "p.json"), str(tmp_path / f"p{suffix}")]) == 0
        assert main(["convert", str(tmp_path / f"p{suffix}"), str(tmp_path / f"back{suffix}.json")]) == 0
        assert _costs(read_problem(tmp_path / f"back{suffix}.json")) == pytest.approx(_costs(problem), rel=1e-12)
    assert "wrote" in capsys.readouterr().out
    assert main(["solve", str(tmp_path / "p.wcsp")]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["solver"] == "auto" and printed["optimal"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize(
    ("name", "text", "output", "message"),
    [
        ("bad.wcsp", "p 2 2 1 9\n2 2\n2 0 x 0 0\n", "out.json", "bad.wcsp: line 3: expected a variable of function 0"),
        ("tern.uai", "MARKOV\n3\n2 2 2\n1\n3 0 1 2\n8\n1 1 1 1 1 1 1 1\n", "out.json",
         "has 3 variables (x0, x1, x2): tessera problems are pairwise"),
        ("bad.cfn", "{problem {name x mustbe 9}}", "out.json", "mustbe must be '<' or '>'"),
        ("p.json", None, "out.txt", "unknown format '.txt'"),
        ("p.json", None, "p.json", "is the input file"),
        ("missing.wcsp", "", "out.json", "cannot read"),
        ("dec.json", "decimal", "out.wcsp", "wcsp holds integer costs only"),
    ],
    ids=["malformed-wcsp", "ternary-uai", "bad-mustbe", "unknown-suffix", "same-file", "missing", "decimal-to-wcsp"],
)
def test_convert_bad_input_is_one_error_line(tmp_path, capsys, name, text, output, message):
    source = tmp_path / name
    if text == "decimal":
        json.dump({"nodes": [{"name": "a", "candidates": ["x"], "costs": [0.5]}]}, source.open("w"))
    elif text is None:
        random_problem(2).save(source)
    elif name != "missing.wcsp":
        source.write_text(text)
    before = source.read_bytes() if source.exists() else None
    assert main(["convert", str(source), str(tmp_path / output)]) == 2
    assert message in one_error_line(capsys)
    assert (source.read_bytes() if source.exists() else None) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ([name] if before is not None else [])
