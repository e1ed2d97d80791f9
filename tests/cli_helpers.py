"""Helpers shared by the command-line tests."""

from __future__ import annotations


def one_error_line(capsys) -> str:
    """The single ``error: ...`` line a failed command wrote to stderr (asserting it is exactly one)."""
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]
