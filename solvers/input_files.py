"""Files a user names as input, checked before they are read: a regular file (a device such as ``/dev/zero``, a
pipe or a socket would be read without end) of at most a size limit, and compressed text read up to that limit once
decompressed. Every reader of a user's file (problems, plans, experiment files, cost records, manifests, cost
models, ONNX models) goes through here, so the limits live in one place.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import IO, AnyStr

MAX_TEXT_BYTES = 1 << 30
"""The largest text input (a problem, plan, experiment file, manifest or cost model; decompressed): 1 GiB."""
MAX_LINE_BYTES = 1 << 24
"""The longest line of a line-by-line input (a cost record): 16 MiB."""
MAX_MODEL_BYTES = 2 << 30
"""The largest ONNX file: 2 GiB, protobuf's own limit for one message."""


class InputFileError(ValueError):
    """An input that is not a regular file, or is larger than its limit; the message names the file."""


def _size(count: int) -> str:
    return f"{count / (1 << 30):.3g} GiB" if count >= 1 << 30 else f"{count / (1 << 20):.3g} MiB"


def checked_input(path: str | Path, limit: int | None = MAX_TEXT_BYTES) -> Path:
    """``path`` if it is a regular file (after symbolic links) of at most ``limit`` bytes (None: any size, for an
    input read line by line); ``InputFileError`` otherwise, and an ``OSError`` as opening it would raise for a
    directory, a missing file or a name too long."""
    info = os.stat(path)
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    if not stat.S_ISREG(info.st_mode):
        raise InputFileError(f"{path}: not a regular file (a device, pipe or socket); give a file")
    if limit is not None and info.st_size > limit:
        raise InputFileError(f"{path}: {_size(info.st_size)}, more than the {_size(limit)} an input may have")
    return Path(path)


def read_text(path: str | Path, limit: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of the checked file ``path`` (``checked_input``)."""
    return checked_input(path, limit).read_text(encoding="utf-8")


def read_limited(stream: IO[AnyStr], path: str | Path, limit: int = MAX_TEXT_BYTES) -> AnyStr:
    """All of ``stream`` (a decompressing reader of ``path``); ``InputFileError`` once it passes ``limit``."""
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise InputFileError(f"{path}: more than the {_size(limit)} an input may have once decompressed")
    return data


def read_line(stream: IO[AnyStr], path: str | Path, limit: int = MAX_LINE_BYTES) -> AnyStr:
    """The next line of ``stream`` (empty at its end); ``InputFileError`` for a line longer than ``limit``."""
    line = stream.readline(limit + 1)
    if len(line) > limit:
        raise InputFileError(f"{path}: a line longer than the {_size(limit)} a line may have")
    return line
