"""Cost tables as the standard formats hold them (a scope of variables and a table over their values, the last
variable's value varying fastest), turned into a tessera ``Problem`` and back.

Reading: a function of no variable is a constant; one of one variable adds to that node's costs; one of two variables
is an edge; one of three or more is refused with its name (tessera problems are pairwise). Each table is shifted by
its smallest finite entry when that is negative, so every cost is non-negative, and the constants and shifts are
summed into ``meta["offset"]``: a file's objective is ``problem.evaluate(x) + meta["offset"]`` (negated when
``meta["objective"]`` is ``"maximize"``). Forbidden entries are ``inf``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from solvers.problem import Problem, ProblemError

MAX_ENTRIES = 10**8
"""The most domain values and cost-table entries (all variables and functions together) a file may declare: a file
declaring more (about 0.8 GB of costs) is refused before they are allocated."""


class EntryBudget:
    """Counts the values and table entries a file declares, refusing (``ProblemError`` from ``error``) the ones
    past ``MAX_ENTRIES`` before they are allocated."""

    def __init__(self, error: Callable[[str], ProblemError]) -> None:
        self.error, self.used = error, 0

    def take(self, count: int, what: str) -> None:
        """Account for ``count`` more entries, which ``what`` declares."""
        self.used += count
        if self.used > MAX_ENTRIES:
            raise self.error(f"{count:,} entries for {what} take the file past the {MAX_ENTRIES:.0e} domain values "
                             "and cost entries tessera reads")


@dataclass
class Tables:
    """Variables and cost functions read from a file, in file order; ``problem()`` builds the ``Problem``.

    ``names[i]`` and ``values[i]`` name variable ``i`` and its values; ``add`` takes a function by its name (for
    messages), its scope (variable indices) and its table (any shape whose size is the product of the domains).
    """

    names: list[str]
    values: list[list[str]]
    meta: dict[str, Any] = field(default_factory=dict)
    _functions: list[tuple[str, tuple[int, ...], np.ndarray]] = field(default_factory=list)

    def add(self, name: str, scope: Sequence[int], table: Any) -> None:
        """Add the cost function ``name`` over ``scope``; ``table`` holds its costs (inf: forbidden)."""
        scope = tuple(int(i) for i in scope)
        for i in scope:
            if not 0 <= i < len(self.names):
                raise ProblemError(f"function {name}: no variable {i} (there are {len(self.names)})")
        if len(set(scope)) != len(scope):
            raise ProblemError(f"function {name}: a variable appears twice in its scope {list(scope)}")
        if len(scope) > 2:
            listed = ", ".join(self.names[i] for i in scope)
            raise ProblemError(f"function {name} has {len(scope)} variables ({listed}): tessera problems are "
                               "pairwise (at most two variables per function)")
        shape = tuple(len(self.values[i]) for i in scope)
        array = np.asarray(table, dtype=float)
        if array.size != math.prod(shape):
            raise ProblemError(f"function {name}: {array.size} costs for {math.prod(shape)} tuples")
        if np.isnan(array).any() or np.isneginf(array).any():
            raise ProblemError(f"function {name}: a cost is NaN or -inf")
        self._functions.append((name, scope, array.reshape(shape)))

    def problem(self, upper_bound: float = math.inf) -> Problem:
        """The ``Problem``: one node per variable (its unary costs), one edge per binary function (merged).

        With a global ``upper_bound`` on the objective (cfn's ``mustbe``, costs possibly negative), an entry is
        forbidden when every assignment using it reaches the bound: when it plus the smallest finite entry of every
        other function is at least ``upper_bound`` (toulbar2's reading: each table shifted by its minimum, and the
        bound by their sum).
        """
        floor = math.fsum(_smallest(t) for _, _, t in self._functions)
        unary = [np.zeros(len(v)) for v in self.values]
        edges, offset = [], 0.0
        for name, scope, table in self._functions:
            if math.isfinite(upper_bound):
                table = np.where(table + (floor - _smallest(table)) >= upper_bound, math.inf, table)
            finite = table[np.isfinite(table)]
            if not scope:
                if not finite.size:
                    raise ProblemError(f"function {name}: a constant hard cost forbids every assignment")
                offset += float(table)
                continue
            shift = min(0.0, float(finite.min())) if finite.size else 0.0
            offset += shift
            if len(scope) == 1:
                unary[scope[0]] = unary[scope[0]] + (table - shift)
            else:
                edges.append((self.names[scope[0]], self.names[scope[1]], table - shift))
        nodes = list(zip(self.names, self.values, unary))
        return Problem.build(nodes, edges, {**self.meta, "offset": offset})


def _smallest(table: np.ndarray) -> float:
    """The smallest finite entry (0 when every entry is forbidden: such a table bounds nothing)."""
    finite = table[np.isfinite(table)]
    return float(finite.min()) if finite.size else 0.0


def functions_of(problem: Problem) -> list[tuple[tuple[int, ...], np.ndarray]]:
    """The cost functions a file holds for ``problem``: each node's costs (unless all zero) and each edge's matrix,
    as ``(scope, table)`` with tables flattened row-major."""
    out: list[tuple[tuple[int, ...], np.ndarray]] = [
        ((u,), node.costs) for u, node in enumerate(problem.nodes) if np.any(node.costs != 0)
    ]
    out += [((u, v), m.ravel()) for (u, v), m in problem.pairs.items()]
    return out


def hard_cost(problem: Problem, extra: float = 0.0) -> float:
    """A cost above every finite assignment's total: 1 + the sum of the largest finite entry of each node and edge
    (+ ``extra``), the value the formats write for a forbidden entry."""
    peaks = [float(a[np.isfinite(a)].max()) for a in [n.costs for n in problem.nodes] + list(problem.pairs.values())
             if np.isfinite(a).any()]
    return 1.0 + math.fsum(peaks) + extra
