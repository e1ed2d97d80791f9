"""What the ``tessera`` subcommands share: refusing outputs that would overwrite inputs, and ``--input-shape``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path


class UsageError(ValueError):
    """A command line naming an output the command must not write: a directory where a file goes, a file where a
    directory goes, or one of the command's own inputs."""


def check_output_file(out: str, inputs: dict[str, str | None]) -> None:
    """Refuse, before any work, an output file ``out`` that is a directory or one of ``inputs`` (what each is ->
    its path)."""
    path = Path(out)
    if path.is_dir():
        raise UsageError(f"{out} is a directory; name the file to write")
    for what, given in inputs.items():
        if given and path.exists() and Path(given).exists() and path.samefile(given):
            raise UsageError(f"{out} is the {what}; write to another file")


def check_output_directory(out: str, writes: Sequence[str], inputs: dict[str, str | None]) -> None:
    """Refuse, before any work, an output directory ``out`` that is a file, or whose entries ``writes`` (what the
    command writes into it) include one of ``inputs`` (what each is -> its path)."""
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise UsageError(f"{out} is a file; name a directory to write {', '.join(writes)} into")
    for what, given in inputs.items():
        if given and Path(given).exists() and any(Path(given).resolve().is_relative_to((path / name).resolve())
                                                  for name in writes):
            raise UsageError(f"{out} holds the {what} {given}, which the command would overwrite; write to another "
                             "directory")


def add_input_shape(p: argparse.ArgumentParser, default: str) -> None:
    """``--input-shape`` for a command that loads a network; ``default`` says what it is without the option."""
    p.add_argument("--input-shape", action="append", default=None, metavar="[NAME=]D0,D1,...",
                   help="shape of the model's input: D0,D1,... for the only input or NAME=D0,D1,... per input, "
                        "repeatable (binds an ONNX file's dynamic dimensions; a zoo model takes N,3,S,S); not with "
                        f"--batch / --image-size (default: {default})")
