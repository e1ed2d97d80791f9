"""A token stream with line numbers, for the readers' messages (``line 12: expected a cost, got 'x'``)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

from solvers.problem import ProblemError

_CFN_SPLIT = re.compile(r'[ \t\n\f\r":,]+|([{}\[\]])')


class Tokens:
    """Tokens ``(line, text)`` read one at a time; every fault raises ``ProblemError`` naming the line."""

    def __init__(self, tokens: list[tuple[int, str]]) -> None:
        self._tokens = tokens
        self._next = 0

    @classmethod
    def words(cls, text: str) -> Tokens:
        """Whitespace-separated tokens (wcsp, uai)."""
        return cls([(n, word) for n, line in enumerate(text.splitlines(), 1) for word in line.split()])

    @classmethod
    def cfn(cls, text: str) -> Tokens:
        """Tokens as toulbar2's CFN reader splits them: spaces, quotes, colons and commas separate, braces and
        brackets are tokens of their own; a line starting with ``#`` and anything after ``//`` are comments."""
        return cls(list(_cfn_tokens(text)))

    @property
    def line(self) -> int:
        """Line of the next token (the last line at the end)."""
        if self._next < len(self._tokens):
            return self._tokens[self._next][0]
        return self._tokens[-1][0] if self._tokens else 1

    def error(self, message: str) -> ProblemError:
        """A ``ProblemError`` at the line of the token read last (the one the message is about)."""
        line = self._tokens[self._next - 1][0] if self._next else self.line
        return ProblemError(f"line {line}: {message}")

    def peek(self) -> str | None:
        """The next token without consuming it (None at the end)."""
        return self._tokens[self._next][1] if self._next < len(self._tokens) else None

    def take(self, what: str) -> str:
        """The next token; ``what`` names what was expected, for the message at the end of the file."""
        if self._next >= len(self._tokens):
            raise self.error(f"the file ends where {what} was expected")
        self._next += 1
        return self._tokens[self._next - 1][1]

    def integer(self, what: str, minimum: int | None = None) -> int:
        token = self.take(what)
        try:
            value = int(token)
        except ValueError:
            raise self.error(f"expected {what} (an integer), got {token!r}") from None
        if minimum is not None and value < minimum:
            raise self.error(f"{what} must be at least {minimum}, got {value}")
        return value

    def number(self, what: str) -> float:
        """A decimal number, or ``inf`` / ``-inf``."""
        token = self.take(what)
        try:
            value = float(token)
        except ValueError:
            raise self.error(f"expected {what} (a number), got {token!r}") from None
        if math.isnan(value):
            raise self.error(f"{what} is NaN")
        return value

    def end(self) -> None:
        """Nothing may follow."""
        if self._next < len(self._tokens):
            token = self.take("")
            raise self.error(f"unexpected {token!r} after the last function")


def _cfn_tokens(text: str) -> Iterator[tuple[int, str]]:
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            continue
        line = line.split("//", 1)[0]
        for part in _CFN_SPLIT.split(line):
            if part:
                yield n, part
