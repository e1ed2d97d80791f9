"""Run several solvers and the LP bound on one problem and tabulate cost, gap and time (``tessera compare``,
benchmarks).

A solver that refuses the problem (``SolverError``: too wide, out of time) becomes a row with its message as the note,
so one refusal never hides the other rows. The gap of a row is measured against the best lower bound known for the
instance: the LP bound, every solver's proven bound and the cost of every solution proven optimal.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from solvers import SOLVERS, Problem, SolverError, solve
from solvers.base import relative_gap

LP_BOUND = "lp bound"
"""The ``solver`` of the row that reports the LP lower bound."""


@dataclass(frozen=True)
class Row:
    """One line of a comparison: a solver's result on an instance, measured against the instance's best figures."""

    instance: str
    solver: str
    cost: float | None
    bound: float | None
    seconds: float
    status: str
    gap: float | None = None
    """``(cost - best lower bound) / cost`` over the instance."""
    vs_best: float | None = None
    """``(cost - best cost) / best cost`` over the instance's solvers."""


def compare_settings(time_limit: float) -> dict[str, dict[str, Any]]:
    """``tessera compare``'s solvers, every registered one by name, with ``time_limit`` for those that search to
    optimality."""
    return {name: ({"time_limit": time_limit} if SOLVERS[name].searches_to_optimality else {})
            for name in sorted(SOLVERS)}


def compare(problem: Problem, solvers: Mapping[str, Mapping[str, Any]], *, instance: str, lp: bool = True) -> list[Row]:
    """Solve ``problem`` with each named solver (with its parameters) and, when ``lp``, compute the LP lower bound."""
    rows = []
    for name, params in solvers.items():
        start = time.perf_counter()
        try:
            sol = solve(problem, name, **params)
        except SolverError as exc:
            rows.append(Row(instance, name, None, None, time.perf_counter() - start, str(exc)))
            continue
        cost = None if math.isinf(sol.cost) else sol.cost
        bound = cost if sol.optimal else sol.lower_bound
        rows.append(Row(instance, name, cost, bound, sol.seconds, sol.status))
    if lp:
        from solvers.bound import lp_lower_bound

        start = time.perf_counter()
        try:
            rows.append(Row(instance, LP_BOUND, None, lp_lower_bound(problem), time.perf_counter() - start, "bound"))
        except SolverError as exc:
            rows.append(Row(instance, LP_BOUND, None, None, time.perf_counter() - start, str(exc)))
    best_bound = max((r.bound for r in rows if r.bound is not None), default=None)
    best_cost = min((r.cost for r in rows if r.cost is not None), default=None)
    return [
        replace(
            r,
            gap=None if r.cost is None or best_bound is None else relative_gap(r.cost, best_bound),
            vs_best=None if r.cost is None or best_cost is None else _relative(r.cost, best_cost),
        )
        for r in rows
    ]


def _relative(cost: float, best: float) -> float:
    if cost <= best:
        return 0.0
    return (cost - best) / best if best > 0 else math.inf


LEGEND = (
    "gap: (cost - best lower bound) / cost, the best lower bound being the LP bound, a solver's proven bound or a\n"
    "proven optimum; vs best: (cost - cheapest solution found) / cheapest solution found."
)
"""What the ``gap`` and ``vs best`` columns mean, for printing under a table."""

COLUMNS = ("instance", "solver", "cost", "bound", "gap", "vs best", "seconds", "status")


def format_table(rows: Sequence[Row], *, markdown: bool = False) -> str:
    """Rows as an aligned text table, or as a markdown table with ``markdown=True``."""
    cells = [
        (
            r.instance,
            r.solver,
            _number(r.cost),
            _number(r.bound),
            _percent(r.gap),
            _percent(r.vs_best),
            f"{r.seconds:.2f}",
            r.status,
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in [COLUMNS, *cells]) for i in range(len(COLUMNS) - 1)]
    numeric = {2, 3, 4, 5, 6}

    def line(values: Sequence[str]) -> str:
        padded = [v.rjust(w) if i in numeric else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths))]
        padded.append(values[-1])
        return "| " + " | ".join(padded) + " |" if markdown else "  ".join(padded).rstrip()

    out = [line(COLUMNS)]
    if markdown:
        rules = ["-" * (w + 1) + (":" if i in numeric else "-") for i, w in enumerate(widths)]
        out.append("|" + "|".join(rules) + "|---|")
    out.extend(line(c) for c in cells)
    return "\n".join(out)


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}%"
