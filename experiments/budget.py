"""The error budget of a search with bf16 candidates: each plan's output error, measured on the exported network,
held within ``max_error``.

Every solver's plan with bf16 nodes is exported and run on the model's random inputs against the stock fp32 build
(``search.export``). While a plan's relative error exceeds the budget, the half of its bf16 nodes that gain least
from bf16 (the cheapest fp32 candidate of their domain less their bf16 candidate's cost) are forbidden bf16 (their
bf16 candidates priced infinite) and the problem is solved again; so a budget too tight for any bf16 node ends
with the fp32 plan. The forbidden nodes stay forbidden for the calibration rounds' problems.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from experiments.extraction import Extracted
from experiments.solving import Solved
from search.precision import DEFAULT_MAX_ERROR, precision_of
from solvers.problem import Problem


@dataclass
class Budget:
    """``max_error``, the nodes forbidden bf16 so far and the checks made (bf16 nodes, error, within)."""

    max_error: float
    forbidden: set[str] = field(default_factory=set)
    checks: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"max_error": self.max_error, "forbidden": sorted(self.forbidden), "checks": self.checks}


def budget_for(extracted: Extracted) -> Budget | None:
    """The budget a search of ``extracted`` is held to: None for fp32, else its ``max_error`` (default
    ``search.precision.DEFAULT_MAX_ERROR``)."""
    return None if extracted.precision == "fp32" else Budget(extracted.max_error or DEFAULT_MAX_ERROR)


def solve_within(extracted: Extracted, solve: Callable[[Problem], Solved], budget: Budget,
                 echo: Callable[[str], None]) -> Solved:
    """``solve`` on the extraction's problem, again with more nodes forbidden bf16 until every plan it finds holds
    ``budget`` (see the module docstring)."""
    from search.export import export, reference_outputs

    settings = extracted.settings
    reference = reference_outputs(extracted.graph, settings.target, settings.seed)
    while True:
        problem = _forbidden(extracted.problem, budget.forbidden)
        solved = solve(problem)
        over: set[str] = set()
        for name, solution in solved.solutions.items():
            if not solution.assignment:
                continue
            plan = extracted.plan(solution)
            nodes = plan.bf16_nodes
            if not nodes:
                continue
            compiled = export(extracted.graph, plan, target=settings.target, threads=settings.threads,
                              seed=settings.seed, reference=reference, max_error=math.inf)
            error = compiled.manifest["numerical_check"]["relative_error"]
            within = error <= budget.max_error
            budget.checks.append({"solver": name, "bf16_nodes": len(nodes), "error": error, "within": within})
            echo(f"error budget: {name}'s plan with {len(nodes)} bf16 nodes: relative error {error:.2g} "
                 f"({'within' if within else 'over'} {budget.max_error:g})")
            if not within:
                over |= set(_least_gain(problem, solution.assignment, nodes)[: max(1, len(nodes) // 2)])
        if not over:
            return solved
        budget.forbidden |= over
        echo(f"error budget: {len(over)} more nodes forbidden bf16 ({len(budget.forbidden)} in all); solving again")


def _is_bf16(choice: str) -> bool:
    from search.candidates import Candidate

    return precision_of(Candidate.parse(choice).knobs) == "bf16"


def _forbidden(problem, nodes: set[str]):
    return problem.forbidding(lambda node, candidate: node in nodes and _is_bf16(candidate)) if nodes else problem


def _least_gain(problem, assignment: dict[str, str], nodes: list[str]) -> list[str]:
    """``nodes`` by what their bf16 candidate saves over the cheapest fp32 candidate of their domain, least first."""
    def gain(name: str) -> float:
        node = problem.nodes[problem.index(name)]
        fp32 = min((cost for candidate, cost in zip(node.candidates, node.costs) if not _is_bf16(candidate)),
                   default=math.inf)
        return fp32 - node.costs[node.candidates.index(assignment[name])]

    return sorted(nodes, key=gain)
