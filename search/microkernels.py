"""tessera's C++ micro-kernels (``microkernels.cc``: bfloat16 convolution rows on AMX tiles or AVX-512 BF16 dot
products), which kernel templates call from TIR with ``call_extern``.

A library that calls them must contain them: ``link_options()`` are the ``export_library`` keyword arguments that
link their object file (``search.native``: compiled once per source, options and compiler). A PrimFunc run in this
process without a library (``Module.jit()``, a kernel's check) finds them once ``load()`` made them global symbols of
the process, which the templates do when they build such a kernel.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path
from typing import Any

from search.native import compiler, object_file, process_directory, run_compiler

SOURCE = Path(__file__).with_name("microkernels.cc")
OPTIONS = ("-O2", "-std=c++17", "-fPIC")


@functools.cache
def load() -> ctypes.CDLL:
    """Make the micro-kernels global symbols of this process (once), for code compiled in memory to call."""
    folder = process_directory()
    library = folder / "microkernels.so"
    run_compiler(compiler(), ["-shared", str(object_file(SOURCE, OPTIONS)), *OPTIONS], folder, library, SOURCE.name)
    return ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)


def link_options() -> dict[str, Any]:
    """The keyword arguments of ``export_library`` that link the micro-kernels into a library."""
    return {"addons": [str(object_file(SOURCE, OPTIONS))]}
