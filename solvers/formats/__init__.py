"""Problems in the standard formats of other solvers: toulbar2's ``.wcsp`` and ``.cfn``, and UAI (``.uai``, MPE), read
into tessera's ``Problem`` and written from it; ``.json`` is tessera's own. A suffix ``.gz``, ``.xz`` or ``.bz2`` after
the format's compresses the file.

Examples
--------
>>> import tempfile, pathlib
>>> p = Problem.build([("a", ["x", "y"], [1, 2]), ("b", ["x", "y"], [2, 1])], [("a", "b", [[0, 5], [None, 0]])])
>>> with tempfile.TemporaryDirectory() as folder:
...     write_problem(p, pathlib.Path(folder) / "p.cfn")
...     back = read_problem(pathlib.Path(folder) / "p.cfn")
>>> [back.evaluate(x) for x in ((0, 0), (0, 1), (1, 0), (1, 1))]
[3.0, 7.0, inf, 3.0]
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from solvers.formats.cfn import read_cfn, write_cfn
from solvers.formats.uai import read_uai, write_uai
from solvers.formats.wcsp import read_wcsp, write_wcsp
from solvers.input_files import InputFileError, checked_input, read_limited
from solvers.problem import Problem, ProblemError, parse_json, write_text_atomic

READERS: dict[str, Callable[[str], Problem]] = {".wcsp": read_wcsp, ".cfn": read_cfn, ".uai": read_uai}
WRITERS: dict[str, Callable[[Problem], str]] = {".wcsp": write_wcsp, ".cfn": write_cfn, ".uai": write_uai}
FORMATS = (".json", *READERS)
"""The formats by suffix."""

_COMPRESSED: dict[str, Callable[..., IO[Any]]] = {".gz": gzip.open, ".xz": lzma.open, ".bz2": bz2.open}


def format_of(path: str | Path) -> str:
    """The format suffix of ``path`` (``.cfn`` for ``x.cfn.gz``); ``ProblemError`` for an unknown one."""
    suffixes = Path(path).suffixes[-2:]
    if suffixes and suffixes[-1].lower() in _COMPRESSED:
        suffixes = suffixes[:-1]
    kind = suffixes[-1].lower() if suffixes else ""
    if kind not in FORMATS:
        raise ProblemError(f"{path}: unknown format {kind or '(no suffix)'!r}; use one of {', '.join(FORMATS)} "
                           "(optionally compressed: .gz, .xz, .bz2)")
    return kind


def read_problem(path: str | Path) -> Problem:
    """Read a problem in any of ``FORMATS``; every fault raises ``ProblemError`` naming the file."""
    kind = format_of(path)
    if kind == ".json" and not _compression(path):
        return Problem.load(path)
    try:
        with _opener(path)(checked_input(path), "rt") as stream:
            text = read_limited(stream, path)
    except OSError as exc:
        raise ProblemError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except (EOFError, UnicodeDecodeError, lzma.LZMAError) as exc:
        raise ProblemError(f"cannot read {path}: {exc}") from exc
    except InputFileError as exc:
        raise ProblemError(str(exc)) from exc
    try:
        if kind == ".json":
            return Problem.from_dict(parse_json(text))
        problem = READERS[kind](text)
    except ValueError as exc:  # ProblemError, and a float() of the readers
        raise ProblemError(f"{path}: {exc}") from exc
    return Problem(problem.nodes, problem.edges, {**problem.meta, "source": Path(path).name})


def write_problem(problem: Problem, path: str | Path) -> None:
    """Write ``problem`` in the format of ``path``'s suffix, atomically (a temporary file beside it, renamed into place
    and removed on any failure); a problem the format cannot hold, or a file that cannot be written, raises
    ``ProblemError`` and leaves ``path`` as it was."""
    kind = format_of(path)
    if kind == ".json":
        text = json.dumps(problem.to_dict(), indent=1, allow_nan=False) + "\n"
    else:
        text = WRITERS[kind](problem)
    try:
        write_text_atomic(path, text, _opener(path))
    except OSError as exc:
        raise ProblemError(f"cannot write {path}: {exc.strerror or exc}") from exc


def _compression(path: str | Path) -> str | None:
    suffix = Path(path).suffix.lower()
    return suffix if suffix in _COMPRESSED else None


def _opener(path: str | Path) -> Callable[..., IO[Any]]:
    compression = _compression(path)
    return _COMPRESSED[compression] if compression else open
