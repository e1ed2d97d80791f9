"""Load an exported artifact directory and time it.

An artifact (written by ``search.export.save_artifact``, or ``CompiledPlan.save``) holds ``model.so``, ``plan.json``
and ``manifest.json``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from search.errors import SearchError
from search.host import missing_instructions
from search.op import INPUT_DTYPES
from search.plan import Plan
from search.runtime import RuntimeSettings, apply_runtime, pool_statistics
from search.threads import MAX_THREADS, set_pool_size
from solvers.input_files import read_text

INDEX_BOUND = 2
"""Integer inputs (token ids) are drawn from 0 to ``INDEX_BOUND`` - 1: valid indices of any table of that many rows
or more (BERT's segment table has 2)."""


def random_arrays(shapes: Iterable[Sequence[int]], seed: int, dtypes: Iterable[str] = ()) -> list[np.ndarray]:
    """Random arrays of the given shapes: standard-normal float32, or integers below ``INDEX_BOUND`` where
    ``dtypes`` (float32 for the missing ones) gives an integer type."""
    rng = np.random.default_rng(seed)
    shapes, dtypes = list(shapes), list(dtypes)
    dtypes += ["float32"] * (len(shapes) - len(dtypes))
    return [rng.integers(0, INDEX_BOUND, tuple(shape)).astype(dtype) if np.dtype(dtype).kind in "iu"
            else rng.standard_normal(tuple(shape)).astype("float32") for shape, dtype in zip(shapes, dtypes)]


@contextlib.contextmanager
def quiet_tvm_log() -> Iterator[None]:
    """Silence stderr at the file-descriptor level: TVM 0.27 logs a "Scope Saving/Loaded" warning per constant
    whenever a VM executable is saved or loaded. Errors still surface as exceptions."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@dataclass(frozen=True)
class Artifact:
    """A loaded artifact: the runtime library, its plan and manifest."""

    directory: Path
    library: Any
    plan: Plan
    manifest: dict[str, Any]

    @property
    def runtime(self) -> RuntimeSettings:
        """How the library runs its parallel loops (``search.runtime``), as its manifest records."""
        return RuntimeSettings.from_dict(self.manifest.get("runtime"))

    def start_runtime(self, threads: int | None = None, runtime: RuntimeSettings | None = None) -> str:
        """Run the library's parallel loops as ``runtime`` (default: ``self.runtime``) says, on ``threads`` threads
        (default: the manifest's); returns the pool in use (``search.runtime.apply_runtime``)."""
        return apply_runtime(self.directory / self.manifest.get("library", "model.so"), runtime or self.runtime,
                             int(threads or self.manifest.get("threads", 1)))

    def virtual_machine(self, threads: int | None = None, runtime: RuntimeSettings | None = None):
        """A fresh ``relax.VirtualMachine`` on the CPU, after ``start_runtime(threads, runtime)``."""
        import tvm
        from tvm import relax

        self.start_runtime(threads, runtime)
        return relax.VirtualMachine(self.library, tvm.cpu())

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        dtypes = self.manifest.get("input_dtypes", {})
        shapes = self.manifest["input_shapes"]
        return random_arrays(shapes.values(), seed, [dtypes.get(name, "float32") for name in shapes])


@dataclass(frozen=True)
class Latency:
    """Per-inference wall time over ``repeat`` repeats of ``number`` runs each, in milliseconds."""

    median_ms: float
    p25_ms: float
    p75_ms: float
    min_ms: float
    max_ms: float
    repeat: int
    number: int
    threads: int
    runtime_threads: int
    pool: str
    pool_statistics: dict[str, int] | None = None
    """tessera's pool's counts over the timing (``search.runtime.PoolStatistics``); None on TVM's pool."""

    @property
    def spread_ms(self) -> float:
        """Interquartile range."""
        return self.p75_ms - self.p25_ms

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "spread_ms": self.spread_ms}


MAX_REPEAT = 10_000
"""The most timed repeats ``measure_latency`` takes (each about 50 ms)."""


def load_artifact(directory: str | Path) -> Artifact:
    """Read an artifact directory; SearchError if it is not one, or if a file of it is corrupt."""
    root = Path(directory)
    needed = [root / "manifest.json", root / "plan.json"]
    missing = [p.name for p in needed if not p.is_file()]
    if missing:
        raise SearchError(f"{root} is not a tessera artifact (missing {', '.join(missing)})")
    try:
        manifest = json.loads(read_text(root / "manifest.json"))
    except ValueError as exc:  # not UTF-8, not JSON, not a regular file or too large (InputFileError)
        raise SearchError(f"{root / 'manifest.json'} is corrupt ({exc}); export the artifact again") from exc
    shapes = manifest.get("input_shapes") if isinstance(manifest, dict) else None
    if not isinstance(shapes, dict) or not isinstance(manifest.get("library", ""), str):
        raise SearchError(f"{root / 'manifest.json'} is corrupt (not a manifest of an export); export the artifact "
                          "again")
    try:
        RuntimeSettings.from_dict(manifest.get("runtime"))
        _check_library_and_target(manifest)
        _check_inputs_and_threads(manifest)
    except SearchError as exc:
        raise SearchError(f"{root / 'manifest.json'} is corrupt ({exc}); export the artifact again") from exc
    mcpu = manifest.get("target", {}).get("mcpu")
    with quiet_tvm_log():  # LLVM's note on a CPU name it does not know (then: generic, nothing missing)
        missing = missing_instructions(mcpu) if mcpu else []
    if missing:
        raise SearchError(f"{root} was compiled for the CPU {mcpu!r}, whose instructions {', '.join(missing)} this "
                          f"CPU lacks; export the plan again on this machine")
    library_path = root / manifest.get("library", "model.so")
    if not library_path.is_file():
        raise SearchError(f"{root} is not a tessera artifact (missing {library_path.name})")
    plan = Plan.load(root / "plan.json")
    import tvm

    try:
        with quiet_tvm_log():
            library = tvm.runtime.load_module(str(library_path))
    except RuntimeError as exc:  # tvm.error.InternalError: not a shared library, or not one TVM wrote
        reason = str(exc).strip().splitlines()[-1]
        raise SearchError(f"{library_path} is corrupt ({reason}); export the artifact again") from exc
    return Artifact(root, library, plan, manifest)


def _check_library_and_target(manifest: dict[str, Any]) -> None:
    """SearchError unless the manifest's library is a file name (a file of the artifact, not a path out of it) and its
    target, when recorded, names its CPU by a string."""
    library = manifest.get("library", "model.so")
    if Path(library).name != library or library in ("", ".", ".."):
        raise SearchError(f"the library {library!r} is not a file name")
    target = manifest.get("target", {})
    if not isinstance(target, dict) or not isinstance(target.get("mcpu", ""), str):
        raise SearchError(f"the target {target!r} does not name a CPU")


def _check_inputs_and_threads(manifest: dict[str, Any]) -> None:
    """SearchError unless every input has a shape of positive integers and a dtype of ``INPUT_DTYPES``, all inputs
    together fit in this machine's memory, and the thread count is an integer from 1 to ``MAX_THREADS``."""
    shapes, dtypes = manifest["input_shapes"], manifest.get("input_dtypes", {})
    if not isinstance(dtypes, dict):
        raise SearchError(f"the input dtypes {dtypes!r} are not a mapping of input names")
    total = 0
    for name, shape in shapes.items():
        if not isinstance(shape, list) or not all(_is_integer(extent) and extent >= 1 for extent in shape):
            raise SearchError(f"input {name!r} has the shape {shape!r}, not a list of positive integers")
        dtype = dtypes.get(name, "float32")
        if dtype not in INPUT_DTYPES:
            raise SearchError(f"input {name!r} has the dtype {dtype!r}, not one of {', '.join(INPUT_DTYPES)}")
        total += int(np.prod(shape, dtype=object)) * np.dtype(dtype).itemsize
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if total > memory:
        raise SearchError(f"its inputs need {total / (1 << 30):.3g} GiB, more than this machine's "
                          f"{memory / (1 << 30):.3g} GiB of memory")
    threads = manifest.get("threads", 1)
    if not _is_integer(threads) or not 1 <= threads <= MAX_THREADS:
        raise SearchError(f"the thread count {threads!r} is not an integer from 1 to {MAX_THREADS}")


def time_artifact(directory: str | Path, repeat: int = 10, threads: int | None = None,
                  pool: str | None = None, spin_us: int | None = None,
                  chunks_per_thread: int | None = None) -> Latency:
    """``measure_latency`` of the artifact in ``directory``, its arguments checked before it is loaded; ``pool``,
    ``spin_us`` and ``chunks_per_thread`` (None: the manifest's) change its runtime settings for this run."""
    check_timing(repeat, threads)
    changes = {name: value for name, value in (("pool", pool), ("spin_us", spin_us),
                                               ("chunks_per_thread", chunks_per_thread)) if value is not None}
    RuntimeSettings(**changes)  # a bad value refused before the library is loaded
    artifact = load_artifact(directory)
    runtime = replace(artifact.runtime, **changes) if changes else None
    return measure_latency(artifact, repeat=repeat, threads=threads, runtime=runtime)


def check_timing(repeat: Any, threads: Any = None, number: Any = None) -> None:
    """Raise ``SearchError`` unless ``repeat`` is an integer from 1 to ``MAX_REPEAT``, ``number`` None or a positive
    integer, and ``threads`` None or an integer from 1 to the cores this process may use."""
    cores = len(os.sched_getaffinity(0))
    if not _is_integer(repeat) or not 1 <= repeat <= MAX_REPEAT:
        raise SearchError(f"repeat must be an integer from 1 to {MAX_REPEAT}, got {repeat!r}")
    if number is not None and (not _is_integer(number) or number < 1):
        raise SearchError(f"number must be a positive integer, got {number!r}")
    if threads is not None and (not _is_integer(threads) or not 1 <= threads <= cores):
        raise SearchError(f"threads must be an integer from 1 to the {cores} usable cores, got {threads!r}")


def _is_integer(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def measure_latency(
    artifact: Artifact, repeat: int = 10, number: int | None = None, threads: int | None = None, seed: int = 0,
    runtime: RuntimeSettings | None = None
) -> Latency:
    """Median and spread of ``main``'s latency on a random input.

    ``threads`` (default: the manifest's) becomes the TVM pool's size (``search.threads``); it takes effect if the
    pool of this process has not started yet, and ``runtime_threads`` reports what the runtime actually used.
    ``runtime`` (default: the manifest's) says which pool runs the parallel loops (``search.runtime``); ``pool``
    reports the one that did. ``number`` runs per repeat default to enough for ~50 ms.
    """
    check_timing(repeat, threads, number)
    import tvm
    from tvm import relax

    threads = int(threads or artifact.manifest.get("threads", 1))
    set_pool_size(threads)
    dev = tvm.cpu()
    pool = artifact.start_runtime(threads, runtime)
    vm = relax.VirtualMachine(artifact.library, dev)
    args = [tvm.runtime.tensor(a, dev) for a in artifact.random_inputs(seed)]
    vm["main"](*args)  # warm-up, starts the thread pool
    runtime_threads = int(tvm.get_global_func("runtime.NumThreads")())
    if number is None:
        once = vm.time_evaluator("main", dev, number=1, repeat=1)(*args).mean
        number = max(1, min(1000, int(0.05 / max(once, 1e-6))))
    library = artifact.directory / artifact.manifest.get("library", "model.so")
    before = pool_statistics(library) if pool == "tessera" else None
    results = np.asarray(vm.time_evaluator("main", dev, number=number, repeat=repeat)(*args).results) * 1e3
    after = pool_statistics(library) if pool == "tessera" else None
    counts = None if before is None or after is None else {
        name: value - getattr(before, name) for name, value in after.to_dict().items()}
    p25, median, p75 = np.percentile(results, [25, 50, 75])
    return Latency(float(median), float(p25), float(p75), float(results.min()), float(results.max()), repeat, number,
                   threads, runtime_threads, pool, counts)
