"""tessera's C++ sources (the bf16 micro-kernels, the runtime's thread pool) compiled once per source, options and
compiler into an object file kept under ``CACHE`` (or, when that directory cannot be written, in a folder of this
process), which every exported library then links instead of compiling the source again."""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from search.errors import SearchError

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache") / "tessera" / "objects"


def compiler() -> str:
    """The C++ compiler TVM's ``export_library`` runs (``CXX``, ``CC``, else the first of g++, clang++, ... found)."""
    from tvm.support.cc import get_cc

    found = get_cc()
    if found is None:
        raise SearchError("no C++ compiler found (set CXX); tessera's exported libraries link C++ compiled with it")
    return found


@functools.cache
def object_file(source: Path, options: tuple[str, ...]) -> Path:
    """``source`` compiled with ``options``: ``CACHE/<stem>-<hash of source, options and compiler>.o``, built on
    first use."""
    cxx = compiler()
    digest = hashlib.sha256(source.read_bytes() + repr((options, cxx)).encode()).hexdigest()[:16]
    for directory in (CACHE.expanduser(), process_directory):
        try:
            folder = directory() if callable(directory) else directory
            path = folder / f"{source.stem}-{digest}.o"
            if not path.exists():
                run_compiler(cxx, ["-c", str(source), *options], folder, path, source.name)
            return path
        except OSError:
            continue
    raise SearchError(f"cannot write tessera's compiled {source.name} to {CACHE} or a temporary directory")


def run_compiler(cxx: str, arguments: list[str], folder: Path, output: Path, what: str) -> None:
    """Run ``cxx arguments -o output`` through a temporary file beside ``output``, moved into place when complete
    (another process may be writing the same file); a failure names ``what`` was compiled."""
    folder.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(suffix=output.suffix, dir=folder)
    os.close(handle)
    try:
        with subprocess.Popen([cxx, *arguments, "-pipe", "-o", partial], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) as process:
            try:
                _, stderr = process.communicate()
            except BaseException:  # interrupted: SIGTERM lets the compiler remove its temporary files, SIGKILL not
                process.terminate()
                process.wait()
                raise
        if process.returncode != 0:
            raise SearchError(f"compiling {what} failed:\n{stderr.strip()}")
        os.replace(partial, output)
    finally:
        Path(partial).unlink(missing_ok=True)


@functools.cache
def process_directory() -> Path:
    """A folder of this process, removed when it exits."""
    folder = Path(tempfile.mkdtemp(prefix="tessera-objects-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder
