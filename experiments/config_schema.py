"""The schema of an experiment file (the format is in ``experiments.config``): one pydantic model per table.

Every table forbids unknown keys (a solver's takes any key as a parameter). A value's type and range are declared on
its field with what the value must be (``experiments.config_values``); a model validator checks what spans keys or
needs the code that will use the values: the generator's, the cost source's and the solver's own checks, a problem
file loaded, and the number of trials, refused above ``MAX_TRIALS`` before any grid is expanded. ``describe`` turns
pydantic's ``ValidationError`` into one line naming the place (``problems[1].seed must be ...``). Validate with
``context={"base": <the experiment file's folder>}``, against which paths are resolved.
"""

from __future__ import annotations

import itertools
import math
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Strict, ValidationError, model_validator

from experiments.config_problems import PROBLEM_TABLES, AnyProblem, ModelProblem
from experiments.config_values import AnyAxis, Flag, Name, PositiveInt, Seconds, Text, at_most, expect, expected, member
from solvers.base import make_solver
from solvers.errors import SolverError

METRICS = ("solver", "latency")
"""Metric groups an experiment can collect: ``solver`` always; ``latency`` (export the plan, check it and time it end
to end) on model instances."""


# ---------------------------------------------------------------------------------------------------- solvers
class SolverTable(BaseModel):
    """``name`` and the solver's parameters, each a grid axis."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, AnyAxis]

    name: Annotated[str, Strict(), expect("a solver name")]

    @model_validator(mode="after")
    def _solver_takes_the_parameters(self) -> SolverTable:
        try:
            make_solver(self.name)  # an unknown name fails here, before its parameters are looked at
            at_most(self.count, f"its axes give {self.count} settings")
            for params in self.settings(None):
                make_solver(self.name, **params)._check_params()
        except SolverError as exc:
            raise ValueError(str(exc)) from exc
        return self

    @property
    def count(self) -> int:
        """How many settings of the solver the table gives."""
        return math.prod(len(values) for values in self.model_extra.values())

    def settings(self, time_limit: float | None) -> list[dict[str, Any]]:
        """The solver's parameter settings (the product of the axes), with ``time_limit`` unless it sets its own."""
        axes = dict(self.model_extra)
        if time_limit is not None and "time_limit" not in axes:
            axes["time_limit"] = [time_limit]
        return [dict(zip(axes, values)) for values in itertools.product(*axes.values())]


# ---------------------------------------------------------------------------------------------------- the file
def _tables(key: str) -> BeforeValidator:
    def check(value: Any) -> Any:
        if not isinstance(value, list) or not value or not all(isinstance(table, dict) for table in value):
            raise expected(f"a non-empty array of tables ([[{key}]] entries)")
        return value

    return BeforeValidator(check)


class ExperimentFile(BaseModel):
    """The top level of an experiment file."""

    model_config = ConfigDict(extra="forbid")

    name: Name
    description: Text = ""
    repeats: PositiveInt = 1
    time_limit: Seconds | None = None
    trial_timeout: Seconds | None = None
    num_cpus: PositiveInt = 2
    lower_bound: Flag = True
    metrics: Annotated[list[Annotated[str, Strict()]], expect("a list of metric groups"),
                       member(METRICS, "metric group")] = ["solver"]
    problems: Annotated[list[AnyProblem], _tables("problems")]
    solvers: Annotated[list[SolverTable], _tables("solvers")]

    @model_validator(mode="after")
    def _grid_fits(self) -> ExperimentFile:
        if "latency" in self.metrics and not any(isinstance(table, ModelProblem) for table in self.problems):
            raise ValueError("metrics: latency applies to model problems only, and there is none")
        instances = sum(table.count for table in self.problems)
        each = int(self.lower_bound) + self.repeats * sum(table.count for table in self.solvers)
        at_most(instances * each, f"the grid has {instances * each} trials ({instances} instances x {each} each)")
        return self


# ---------------------------------------------------------------------------------------------------- messages
def describe(error: ValidationError) -> str:
    """One line for a validation error: its first fault, an unknown key first (often a missing key misspelt)."""
    faults = error.errors()
    fault = next((f for f in faults if f["type"] == "extra_forbidden"), faults[0])
    loc, kind = fault["loc"], fault["type"]
    if kind == "expected":
        return f"{_place(loc)} must be {fault['ctx']['expected']}, got {fault['input']!r}"
    if kind == "extra_forbidden":
        table = PROBLEM_TABLES[loc[2]] if loc[0] == "problems" else ExperimentFile
        return _prefixed(loc[:-1], f"unknown key {loc[-1]!r}; allowed: {', '.join(sorted(table.model_fields))}")
    if kind == "missing":
        return _prefixed(loc[:-1], f"missing required key {loc[-1]!r}")
    return _prefixed(loc, str(fault["ctx"]["error"]) if kind == "value_error" else fault["msg"])


def _place(loc: tuple[int | str, ...]) -> str:
    """``problems[1].seed`` for pydantic's ``("problems", 1, "generator", "seed")`` (without the problem kind)."""
    parts = [part for i, part in enumerate(loc) if not (i == 2 and loc[0] == "problems")]
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in parts).lstrip(".")


def _prefixed(loc: tuple[int | str, ...], message: str) -> str:
    place = _place(loc)
    return f"{place}: {message}" if place else message
