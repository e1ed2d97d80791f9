"""The UAI format of probabilistic graphical models (``MARKOV`` or ``BAYES``), read and written for MPE: the most
probable assignment maximises the product of the function values, so a value ``p`` is the cost ``-ln p``.

Reading: variables are named ``x0``, ``x1`` ... and their values ``v0``, ``v1`` ...; a value 0 is forbidden and a
negative one an error; the costs of a table are shifted to be non-negative (values above 1) with the offset in
``meta`` (in natural-log units). Writing: a ``MARKOV`` network with a function per node (unless its costs are all 0)
and per edge, values ``exp(-cost)`` with 17 significant digits, 0 for forbidden entries; a cost above
``MAX_COST`` would underflow and is refused (``.cfn`` holds any cost). Names and ``meta`` are not kept. An evidence
file (``.uai.evid``) is not read.
"""

from __future__ import annotations

import math

import numpy as np

from solvers.formats.tables import EntryBudget, Tables, functions_of
from solvers.formats.tokens import Tokens
from solvers.problem import Problem, ProblemError

MAX_COST = 700.0
"""Largest cost written: ``exp(-700)`` is about 1e-304, still a normal double (``exp(-746)`` is 0)."""

KINDS = ("MARKOV", "BAYES")


def read_uai(text: str) -> Problem:
    """Parse UAI text into a ``Problem`` (see the module docstring)."""
    tokens = Tokens.words(text)
    kind = tokens.take("MARKOV or BAYES")
    if kind.upper() not in KINDS:
        raise tokens.error(f"expected MARKOV or BAYES, got {kind!r}")
    n = tokens.integer("the number of variables", 1)
    sizes = [tokens.integer(f"the domain size of variable {i}", 1) for i in range(n)]
    EntryBudget(tokens.error).take(sum(sizes), "the domains")
    count = tokens.integer("the number of functions", 0)
    scopes = []
    for f in range(count):
        arity = tokens.integer(f"the number of variables of function {f}", 0)
        scope = [tokens.integer(f"a variable of function {f}", 0) for _ in range(arity)]
        bad = [i for i in scope if i >= n]
        if bad:
            raise tokens.error(f"function {f}: no variable {bad[0]} (there are {n})")
        scopes.append(scope)
    tables = Tables([f"x{i}" for i in range(n)], [[f"v{j}" for j in range(k)] for k in sizes],
                    {"format": "uai", "network": kind.upper(), "cost": "-ln(value)"})
    for f, scope in enumerate(scopes):
        line = tokens.line
        entries = tokens.integer(f"the number of entries of function {f}", 0)
        expected = math.prod(sizes[i] for i in scope)
        if entries != expected:
            raise tokens.error(f"function {f} has {entries} entries, but its scope has {expected} tuples")
        values = np.array([tokens.number(f"a value of function {f}") for _ in range(entries)])
        if (values < 0).any() or np.isinf(values).any():
            raise tokens.error(f"function {f}: value {values[(values < 0) | np.isinf(values)][0]:g} is not a "
                               "finite non-negative number")
        with np.errstate(divide="ignore"):
            tables.add(f"{f} (line {line})", scope, -np.log(values))
    tokens.end()
    return tables.problem()


def write_uai(problem: Problem) -> str:
    """``problem`` as a UAI ``MARKOV`` network; ``ProblemError`` when a cost exceeds ``MAX_COST``."""
    functions = functions_of(problem)
    for scope, table in functions:
        finite = table[np.isfinite(table)]
        if finite.size and finite.max() > MAX_COST:
            names = " -> ".join(repr(problem.nodes[u].name) for u in scope)
            raise ProblemError(f"uai: {'node' if len(scope) == 1 else 'edge'} {names} has cost {finite.max():g}, "
                               f"whose value exp(-cost) underflows (at most {MAX_COST:g}); write .cfn or .wcsp")
    lines = ["MARKOV", str(problem.num_nodes), " ".join(map(str, problem.domain_sizes)), str(len(functions))]
    lines += [f"{len(scope)} {' '.join(map(str, scope))}" for scope, _ in functions]
    for _, table in functions:
        lines += ["", str(table.size), " ".join(f"{value:.17g}" for value in np.exp(-table))]
    return "\n".join(lines) + "\n"
