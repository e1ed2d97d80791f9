"""tessera's C++ micro-kernels (``microkernels.cc``: bfloat16 convolution rows on AMX tiles or AVX-512 BF16 dot
products), which kernel templates call from TIR with ``call_extern``.

A library that calls them must contain them: ``link_options()`` are the ``export_library`` keyword arguments that
link their object file (compiled once per source and compiler, kept beside the cost cache, or for the process only
when that directory cannot be written). A PrimFunc run in this process without a library (``Module.jit()``, a
numerical check) finds them once ``load()`` made them global symbols of the process, which the templates do when
they build such a kernel.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from search.errors import SearchError

SOURCE = Path(__file__).with_name("microkernels.cc")
OPTIONS = ("-O2", "-std=c++17", "-fPIC")
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache") / "tessera" / "microkernels"


def compiler() -> str:
    """The C++ compiler TVM's ``export_library`` runs (``CXX``, ``CC``, else the first of g++, clang++, ... found)."""
    from tvm.support.cc import get_cc

    found = get_cc()
    if found is None:
        raise SearchError("no C++ compiler found (set CXX); tessera's bf16 kernels are compiled with it")
    return found


@functools.cache
def object_file() -> Path:
    """The compiled micro-kernels: ``CACHE/<hash of source, options and compiler>.o``, built on first use."""
    cxx = compiler()
    digest = hashlib.sha256(SOURCE.read_bytes() + repr((OPTIONS, cxx)).encode()).hexdigest()[:16]
    for directory in (CACHE.expanduser(), _process_directory):
        try:
            folder = directory() if callable(directory) else directory
            path = folder / f"{digest}.o"
            if not path.exists():
                _compile(cxx, ["-c"], folder, path)
            return path
        except OSError:
            continue
    raise SearchError(f"cannot write tessera's compiled micro-kernels to {CACHE} or a temporary directory")


@functools.cache
def load() -> ctypes.CDLL:
    """Make the micro-kernels global symbols of this process (once), for code compiled in memory to call."""
    folder = _process_directory()
    library = folder / "microkernels.so"
    _compile(compiler(), ["-shared", str(object_file())], folder, library, source=False)
    return ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)


def link_options() -> dict[str, Any]:
    """The keyword arguments of ``export_library`` that link the micro-kernels into a library."""
    return {"addons": [str(object_file())]}


def _compile(cxx: str, mode: list[str], folder: Path, output: Path, *, source: bool = True) -> None:
    """Compile (``mode`` ``-c``) or link into ``output`` through a temporary file beside it, moved into place when
    complete (another process may be writing the same file)."""
    folder.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(suffix=output.suffix, dir=folder)
    os.close(handle)
    try:
        inputs = [str(SOURCE), *OPTIONS] if source else list(OPTIONS)
        with subprocess.Popen([cxx, *mode, *inputs, "-pipe", "-o", partial], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) as process:
            try:
                _, stderr = process.communicate()
            except BaseException:  # interrupted: SIGTERM lets the compiler remove its temporary files, SIGKILL not
                process.terminate()
                process.wait()
                raise
        if process.returncode != 0:
            raise SearchError(f"compiling {SOURCE.name} failed:\n{stderr.strip()}")
        os.replace(partial, output)
    finally:
        Path(partial).unlink(missing_ok=True)


@functools.cache
def _process_directory() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="tessera-microkernels-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder
