"""Moving cost records between caches: statistics, a line-per-record text format, import and merge.

The format (``export_records``) is JSON Lines, one record per line, every field of the cache's key spelled out::

    {"context": {"cpu": "...", "target": "llvm -mcpu=znver4 ...", "template_version": "2", "threads": 2,
                 "tvm_version": "0.27.0", "timing": "warm"},
     "key": {"kind": "conv2d", "workload": {...}, "layouts": {...}, "knobs": {...}, "epilogue": {...}},
     "median_ms": 0.142, "spread_ms": 0.003, "repeats": 25, "error": null, "measured_at": 1795600000.0}

(one line in the file). ``context`` says where and how the timing was taken (``cost_models.cache.Context``; ``timing``
is ``warm`` when absent), ``key`` what was measured, ``error`` why a measurement failed (then ``median_ms`` is null).
A file ending in ``.gz`` is gzip-compressed.

A record measured twice (the same context and key in both caches) keeps one value, by ``prefer``:

- a successful measurement beats a failure (a failure is often a time-out on a loaded machine, and a failure forbids
  the candidate);
- between two of the same kind, the newer one (``measured_at``) wins: it was taken with the current code and machine
  state, and a re-measurement is usually made because the older one was doubted.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import tempfile
import time
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from cost_models.cache import CacheError, CacheLockedError, Context, CostCache, CostRecord, canonical
from solvers.input_files import InputFileError, checked_input, read_line

FIELDS = ("median_ms", "spread_ms", "repeats", "error", "measured_at")
"""The value fields of a line, besides ``context`` and ``key``."""


@dataclass(frozen=True)
class MergeCounts:
    """What an import did: records ``added`` (new), ``replaced`` (the incoming one preferred) and ``kept`` (the
    cache's own preferred), of ``read`` records."""

    read: int = 0
    added: int = 0
    replaced: int = 0
    kept: int = 0


@dataclass(frozen=True)
class CacheStats:
    """Records of a cache by context (CPU, threads, timing method, versions) and by measured kind, failures, dates."""

    records: int
    failed: int
    contexts: dict[str, int] = field(default_factory=dict)
    kinds: dict[str, int] = field(default_factory=dict)
    first: float | None = None
    last: float | None = None


def prefer(incoming: CostRecord, existing: CostRecord) -> bool:
    """Whether ``incoming`` replaces ``existing`` (the module docstring's policy)."""
    if incoming.ok != existing.ok:
        return incoming.ok
    return incoming.measured_at > existing.measured_at


def records(cache: CostCache) -> Iterator[dict[str, Any]]:
    """Every record of ``cache`` as one line's object (see the module docstring)."""
    for context, key, record in cache.items():
        yield _line(context, key, record)


def _line(context: str, key: str, record: CostRecord) -> dict[str, Any]:
    context_fields = json.loads(context)
    context_fields.setdefault("timing", "warm")
    return {"context": context_fields, "key": json.loads(key), **{name: getattr(record, name) for name in FIELDS}}


def stats(cache: CostCache) -> CacheStats:
    """``CacheStats`` of ``cache``."""
    contexts: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    failed, dates = 0, []
    for line in records(cache):
        c = line["context"]
        contexts[f"{c['cpu']} ({_mcpu(c['target'])}), {c['threads']} threads, {c['timing']}, tvm "
                 f"{c['tvm_version']}, templates {c['template_version']}"] += 1
        kinds[line["key"].get("kind", "?") if isinstance(line["key"], dict) else "?"] += 1
        failed += line["error"] is not None
        dates.append(line["measured_at"])
    return CacheStats(sum(contexts.values()), failed, dict(contexts.most_common()), dict(kinds.most_common()),
                      min(dates, default=None), max(dates, default=None))


def _mcpu(target: str) -> str:
    """The LLVM CPU of a target as the cache keys it (TVM's JSON form of the target), else the whole string."""
    try:
        return json.loads(target).get("mcpu") or target
    except (json.JSONDecodeError, AttributeError):
        return target


def _open(path: Path, mode: str, compressed: bool) -> IO[str]:
    if compressed:
        return gzip.open(path, mode + "t", encoding="utf-8")
    return open(path, mode, encoding="utf-8")


def export_records(cache: CostCache, path: str | Path) -> int:
    """Write every record of ``cache`` to ``path`` (JSON Lines, atomically); the number written."""
    path = Path(path)
    if path.is_dir():
        raise CacheError(f"{path} is a directory; name the file to write")
    if path.exists() and path.resolve() == cache.path.resolve():
        raise CacheError(f"{path} is the cache itself; export to another file")
    return _write_lines(path, records(cache))


def set_aside(cache: CostCache, context: Context, measured: Sequence[tuple[str, CostRecord]]) -> Path:
    """Write records that ``cache`` could not take (locked by another process) to a file of this format beside it,
    ``<cache>.<pid>-<unix time>.pending.jsonl``, for ``tessera cache import`` once the lock is gone; its path."""
    path = cache.path.with_name(f"{cache.path.name}.{os.getpid()}-{int(time.time())}.pending.jsonl")
    _write_lines(path, (_line(context.to_key(), key, replace(record, measured_at=record.measured_at or time.time()))
                        for key, record in measured))
    return path


def put_or_set_aside(cache: CostCache, context: Context, key: str, record: CostRecord,
                     rest: Iterable[tuple[str, CostRecord]] = ()) -> None:
    """Store one measured record; if another process holds the cache locked past ``LOCK_SECONDS``, set it aside with
    ``rest`` (what else was measured and is not stored yet; consumed only then) and raise the ``CacheLockedError``
    with the file named. Nothing measured is lost unless it cannot be set aside either."""
    try:
        cache.put(context, key, record)
    except CacheLockedError as exc:
        try:
            aside = set_aside(cache, context, [(key, record), *rest])
        except OSError:  # nowhere to set them aside: the lock is the error to report
            raise exc from None
        raise CacheLockedError(f"{exc}; what was measured last is in {aside} (tessera cache import {aside} --cache "
                               f"{cache.path} adds it)") from exc


def _write_lines(path: Path, lines: Iterable[dict[str, Any]]) -> int:
    """Write ``lines`` to ``path`` atomically (compressed for ``.gz``); the number written."""
    handle, scratch = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(handle)
    count = 0
    try:
        with _open(Path(scratch), "w", path.suffix == ".gz") as out:
            for line in lines:
                out.write(json.dumps(line, sort_keys=True, allow_nan=False) + "\n")
                count += 1
        os.replace(scratch, path)
    except BaseException:
        Path(scratch).unlink(missing_ok=True)
        raise
    return count


def read_records(path: str | Path) -> Iterator[tuple[Context, str, CostRecord]]:
    """The records of a file ``export_records`` wrote, checked line by line (a bad line is a ``CacheError`` naming
    it)."""
    path = Path(path)
    try:
        with _open(checked_input(path, None), "r", path.suffix == ".gz") as lines:
            for number, text in enumerate(iter(lambda: read_line(lines, path), ""), 1):
                if text.strip():
                    yield _parse(text, f"{path}:{number}")
    except (UnicodeDecodeError, gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise CacheError(f"{path}: not a cost record file ({exc})") from exc
    except InputFileError as exc:
        raise CacheError(str(exc)) from exc


def _parse(text: str, where: str) -> tuple[Context, str, CostRecord]:
    try:
        line = json.loads(text)
        context = Context(**line["context"])
        values = {name: line[name] for name in FIELDS}
        record = CostRecord(**values)
        if not isinstance(line["key"], dict) or not _integer(record.repeats) or not _integer(context.threads):
            raise TypeError("key must be an object, repeats and threads integers")
        if not all(isinstance(getattr(context, name), str) for name in ("target", "cpu", "tvm_version",
                                                                        "template_version", "timing")):
            raise TypeError("the context's target, cpu, versions and timing must be strings")
        if not _number(record.measured_at):
            raise TypeError("measured_at must be a number (seconds since the epoch)")
        for name in ("median_ms", "spread_ms"):
            value = getattr(record, name)
            if value is not None and not (_number(value) and value >= 0):
                raise ValueError(f"{name} must be a finite non-negative number or null")
        if record.error is None and record.median_ms is None:
            raise ValueError("a record without an error needs a median_ms")
        if record.error is not None and not isinstance(record.error, str):
            raise TypeError("error must be a string or null")
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise CacheError(f"{where}: not a cost record ({type(exc).__name__}: {exc})") from exc
    return context, canonical(line["key"]), record


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def import_records(cache: CostCache, incoming: Iterable[tuple[Context, str, CostRecord]]) -> MergeCounts:
    """Add ``incoming`` records to ``cache``, a record measured twice resolved by ``prefer``. Every record is read
    (and checked) before any is written, and all are written in one transaction: a bad record, a failure or a kill
    leaves the cache as it was."""
    incoming = list(incoming)
    read = added = replaced = kept = 0
    chosen: dict[tuple[str, str], tuple[Context, str, CostRecord]] = {}
    for context, key, record in incoming:
        read += 1
        slot = (context.to_key(), key)
        existing = chosen[slot][2] if slot in chosen else cache.get(context, key)
        if existing is None or prefer(record, existing):
            chosen[slot] = (context, key, record)
            added += existing is None
            replaced += existing is not None
        else:
            kept += 1
    cache.put_records(chosen.values())
    return MergeCounts(read, added, replaced, kept)


def merge_caches(cache: CostCache, others: Iterable[str | Path]) -> MergeCounts:
    """Import the records of the cost caches ``others`` (opened read-only) into ``cache``."""
    sources = [CostCache(path, read_only=True) for path in others]
    for source in sources:
        if not source.path.is_file():
            raise CacheError(f"{source.path}: no such cost cache")
        if source.path.resolve() == cache.path.resolve():
            raise CacheError(f"{source.path} is the cache merged into; name other caches")
    try:
        return import_records(cache, ((Context(**json.loads(context)), key, record) for source in sources
                                      for context, key, record in source.items()))
    finally:
        for source in sources:
            source.close()
