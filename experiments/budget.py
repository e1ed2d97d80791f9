"""The error budget of a search with bf16 or int8 candidates: each plan's output error, measured on the exported
network, held within ``max_error``.

Every solver's plan with bf16 or int8 nodes (or concats on bf16 values) is exported and run against the stock fp32 build
(``search.export``): on the calibration inputs where the search has them, else on the model's random inputs. While a
plan's relative error exceeds the budget, the half of its nodes in its least accurate precision (int8 while it has any,
then bf16) that gain least from that precision (the cheapest candidate of their domain in a more accurate precision less
their candidate's cost) lose it: an int8 node its int8 candidates, a bf16 node its bf16 and int8 ones (priced infinite;
a concat on bf16 values counts as bf16), and the problem is solved again; so int8 nodes fall back to bf16 before any
bf16 node is given up, and a budget too tight for any reduced-precision node ends with the fp32 plan. The loop ends when
every solver's plan holds; each solver's result is then the cheapest of its plans that held, from any round (limits
added for another solver's plan may have made its later ones dearer). The limits stay for the calibration rounds'
problems.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from experiments.extraction import Extracted
from experiments.solving import Solved
from search.precision import DEFAULT_MAX_ERROR, REDUCED
from solvers.base import Solution
from solvers.problem import Problem

ACCURACY = ("fp32", *REDUCED)
"""The precisions, most accurate first."""


@dataclass
class Budget:
    """``max_error``, the most accurate precision each limited node may no longer use (``forbidden``: node ->
    ``bf16`` or ``int8``; that one and every less accurate one are forbidden) and the checks made."""

    max_error: float
    forbidden: dict[str, str] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"max_error": self.max_error, "forbidden": dict(sorted(self.forbidden.items())),
                "checks": self.checks}

    def limit(self, node: str, precision: str) -> None:
        """Forbid ``node`` ``precision`` and every less accurate one (kept if it is already stricter)."""
        current = self.forbidden.get(node)
        if current is None or ACCURACY.index(precision) < ACCURACY.index(current):
            self.forbidden[node] = precision


def budget_for(extracted: Extracted) -> Budget | None:
    """The budget a search of ``extracted`` is held to: None for fp32, else its ``max_error`` (default
    ``search.precision.DEFAULT_MAX_ERROR``)."""
    return None if extracted.precision == "fp32" else Budget(extracted.max_error or DEFAULT_MAX_ERROR)


def solve_within(extracted: Extracted, solve: Callable[[Problem], Solved], budget: Budget,
                 echo: Callable[[str], None]) -> Solved:
    """``solve`` on the extraction's problem, again with more nodes limited in precision until every plan it finds
    holds ``budget``; per solver, the cheapest plan that held (see the module docstring)."""
    from search.export import export, reference_outputs

    settings = extracted.settings
    checked_on = extracted.calibration
    reference = None if checked_on else reference_outputs(extracted.graph, settings.target, settings.seed)
    held: dict[str, Solution] = {}
    while True:
        problem = _limited(extracted.problem, budget.forbidden)
        solved = solve(problem)
        over: dict[str, str] = {}
        for name, solution in solved.solutions.items():
            if not solution.assignment:
                continue
            plan = extracted.plan(solution)
            nodes = plan.reduced_nodes
            if not nodes:
                _keep_cheaper(held, name, solution)
                continue
            compiled = export(extracted.graph, plan, target=settings.target, threads=settings.threads,
                              seed=settings.seed, reference=reference, max_error=math.inf, checked_on=checked_on)
            check = compiled.manifest["numerical_check"]
            error, within = check["relative_error"], check["relative_error"] <= budget.max_error
            counts = {"bf16_nodes": len(plan.bf16_nodes), "int8_nodes": len(plan.int8_nodes)}
            budget.checks.append({"solver": name, **counts, "error": error, "within": within,
                                  **({"top1_changed": check["top1_changed"]} if check.get("top1_changed") is not None
                                     else {})})
            echo(f"error budget: {name}'s plan with {counts['bf16_nodes']} bf16 and {counts['int8_nodes']} int8 "
                 f"nodes: relative error {error:.2g} ({'within' if within else 'over'} {budget.max_error:g})")
            if within:
                _keep_cheaper(held, name, solution)
            else:
                for node in to_limit(problem, solution.assignment, nodes):
                    over[node] = _precision(solution.assignment[node])
        if not over:
            return Solved({name: held.get(name, solution) for name, solution in solved.solutions.items()},
                          solved.errors)
        for node, precision in over.items():
            budget.limit(node, precision)
        echo(f"error budget: {len(over)} more nodes limited in precision ({len(budget.forbidden)} in all); "
             "solving again")


def _keep_cheaper(held: dict[str, Solution], name: str, solution: Solution) -> None:
    if name not in held or solution.cost < held[name].cost:
        held[name] = solution


def _precision(choice: str) -> str:
    from search.candidates import Candidate

    return Candidate.parse(choice).precision


def _limited(problem: Problem, forbidden: dict[str, str]) -> Problem:
    """``problem`` with each node in ``forbidden`` priced infinite in its forbidden precisions."""
    def bars(node: str, candidate: str) -> bool:
        return node in forbidden and ACCURACY.index(_precision(candidate)) >= ACCURACY.index(forbidden[node])

    return problem.forbidding(bars) if forbidden else problem


def to_limit(problem: Problem, assignment: dict[str, str], nodes: list[str]) -> list[str]:
    """The nodes an over-budget plan (``assignment``) loses the precision of: of its reduced-precision ``nodes`` in
    the least accurate precision it uses, the half (at least one) that gain least from it."""
    least = max(ACCURACY.index(_precision(assignment[name])) for name in nodes)
    coarsest = [name for name in nodes if ACCURACY.index(_precision(assignment[name])) == least]
    return _least_gain(problem, assignment, coarsest)[: max(1, len(coarsest) // 2)]


def _least_gain(problem: Problem, assignment: dict[str, str], nodes: list[str]) -> list[str]:
    """``nodes`` by what their candidate saves over the cheapest candidate of their domain in a more accurate
    precision, least first."""
    def gain(name: str) -> float:
        node = problem.nodes[problem.index(name)]
        chosen = assignment[name]
        rank = ACCURACY.index(_precision(chosen))
        better = min((cost for candidate, cost in zip(node.candidates, node.costs)
                      if ACCURACY.index(_precision(candidate)) < rank), default=math.inf)
        return better - node.costs[node.candidates.index(chosen)]

    return sorted(nodes, key=gain)
