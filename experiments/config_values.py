"""Value types of experiment files: what a key's value must be, declared once, with one error saying so.

A type annotated with ``expect(what)`` reports any fault of its value as the pydantic error ``expected``, which
``experiments.config_schema.describe`` prints as ``<place> must be <what>, got <value>``. A grid axis (``axis``) takes
one value or a non-empty list of them and is a list once validated. Paths are resolved against the validation
context's ``base`` (the experiment file's folder). ``at_most`` refuses a grid of more than ``MAX_TRIALS`` trials.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path
from typing import Annotated, Any

from annotated_types import Ge, Gt, Le
from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    Strict,
    StrictFloat,
    StrictInt,
    ValidationError,
    ValidationInfo,
    WrapValidator,
)
from pydantic_core import PydanticCustomError

MAX_TRIALS = 100_000
"""Most trials an experiment may have; a larger grid is refused before it is expanded."""


def at_most(count: int, counted: str) -> None:
    """Refuse ``count`` trials (or instances, or settings) above ``MAX_TRIALS``; ``counted`` says what was counted."""
    if count > MAX_TRIALS:
        raise ValueError(f"{counted}, more than the {MAX_TRIALS} trials an experiment may have; split it into several "
                         "experiments")


def expected(what: str) -> PydanticCustomError:
    """The error of a value that is not ``what`` it must be."""
    return PydanticCustomError("expected", "must be {expected}", {"expected": what})


def expect(what: str) -> WrapValidator:
    """Annotation reporting any fault of the value it follows as one ``expected`` error."""

    def check(value: Any, handler: Callable[[Any], Any]) -> Any:
        try:
            return handler(value)
        except ValidationError:
            raise expected(what) from None

    return WrapValidator(check)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _distinct(values: list[Any]) -> list[Any]:
    if len(set(values)) != len(values):
        raise ValueError("a value is repeated")
    return values


def axis(item: Any, what: str, *, distinct: bool = True) -> Any:
    """A grid axis of ``item`` values: one value or a non-empty list of (distinct) ones, a list once validated."""
    checks = (AfterValidator(_distinct),) if distinct else ()
    return Annotated[(list[item], BeforeValidator(_as_list), Field(min_length=1), *checks, expect(what))]


def member(choices: Collection[str], what: str) -> AfterValidator:
    """Annotation refusing a value (or an axis value) that is not among ``choices``, read when a file is validated
    (so that a registry filled later, such as the cost sources', is seen whole)."""

    def check(values: Any) -> Any:
        for value in _as_list(values):
            if value not in choices:
                raise ValueError(f"unknown {what} {value!r}; choose from {', '.join(choices)}")
        return values

    return AfterValidator(check)


def resolved(path: str, info: ValidationInfo) -> str:
    """A path relative to the experiment file (``~`` expanded), made absolute."""
    return str((info.context["base"] / Path(path).expanduser()).resolve())


def _int_axis(minimum: int) -> Any:
    return axis(Annotated[int, Strict(), Ge(minimum)], f"an integer >= {minimum} or a non-empty list of distinct ones")


def text_axis(what: str, *, distinct: bool = True) -> Any:
    """An axis of strings."""
    return axis(Annotated[str, Strict()], what, distinct=distinct)


Text = Annotated[str, Strict(), expect("a string")]
Name = Annotated[str, Strict(), Field(pattern=r"\S"), expect("a non-empty string")]
Flag = Annotated[bool, Strict(), expect("true or false")]
PositiveInt = Annotated[int, Strict(), Gt(0), expect("a positive integer")]
PositiveNumber = Annotated[StrictInt | StrictFloat, Gt(0), Field(allow_inf_nan=False), expect("a positive number")]
Seconds = Annotated[StrictInt | StrictFloat, Gt(0), Field(allow_inf_nan=False), expect("a positive number of seconds")]
PathText = Annotated[str, Strict(), expect("a path string"), AfterValidator(resolved)]
SeedAxis = _int_axis(0)
SizeAxis = _int_axis(1)
FractionAxis = axis(Annotated[StrictInt | StrictFloat, Gt(0), Le(1)], "a number in (0, 1] or a list of them",
                    distinct=False)
ShareAxis = axis(Annotated[StrictInt | StrictFloat, Ge(0), Le(1)], "a number in [0, 1] or a list of them",
                 distinct=False)
AnyAxis = axis(Any, "a value or a non-empty list of values", distinct=False)
