"""The persistent cost cache: one sqlite file of measured kernel and layout-transform times.

A record is keyed by everything that changes a timing: the machine context (target, CPU model, threads, TVM version,
template version) and the measured thing (kind, workload, layouts, knobs, epilogue), each as canonical JSON. Every
``put`` is its own transaction in WAL mode, so killing the process at any moment loses at most the measurement in
flight and never corrupts the file, and several processes may read and write the same cache at once.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache") / "tessera" / "costs.sqlite"
"""The cost cache of every command without ``--cache``: ``$XDG_CACHE_HOME/tessera``, else ``~/.cache/tessera``."""
TIMING_METHODS = ("warm", "context", "cold")  # see cost_models.timer
DEFAULT_TIMING = "context"
"""The timing method of every measurement not told otherwise: of the three, the one whose isolated times come
closest to the kernels' times inside exported networks (docs/fidelity.md, "Timing methods")."""

_COLUMNS = ("context", "key", "median_ms", "spread_ms", "repeats", "error", "measured_at")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS costs (
    context TEXT NOT NULL,
    key TEXT NOT NULL,
    median_ms REAL,
    spread_ms REAL,
    repeats INTEGER NOT NULL,
    error TEXT,
    measured_at REAL NOT NULL,
    PRIMARY KEY (context, key)
)
"""


class CacheError(RuntimeError):
    """The cache file cannot be opened or is not a tessera cost cache."""


@dataclass(frozen=True)
class Context:
    """Where and how a timing was taken: a timing is reused only under an identical context, so records of different
    timing methods (``cost_models.timer.TIMING_METHODS``) never mix. ``warm`` records keep the key they had before
    methods existed (the field is left out of it), so caches filled then stay valid; a context without a timing
    is such a warm one."""

    target: str
    cpu: str
    threads: int
    tvm_version: str
    template_version: str
    timing: str = "warm"

    def to_key(self) -> str:
        fields = asdict(self)
        if fields["timing"] == "warm":
            del fields["timing"]
        return canonical(fields)


@dataclass(frozen=True)
class CostRecord:
    """One measurement: the median and spread (ms), or the reason it failed (then the candidate is forbidden)."""

    median_ms: float | None
    spread_ms: float | None
    repeats: int
    error: str | None = None
    measured_at: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and self.median_ms is not None and math.isfinite(self.median_ms)

    @classmethod
    def failed(cls, error: str) -> CostRecord:
        return cls(None, None, 0, error, time.time())


def canonical(value: Any) -> str:
    """Canonical JSON (sorted keys, no spaces): equal values give equal keys."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class CostCache:
    """A sqlite-backed map from (context, key) to ``CostRecord``.

    Examples
    --------
    >>> import tempfile, os
    >>> cache = CostCache(os.path.join(tempfile.mkdtemp(), "c.sqlite"))
    >>> ctx = Context("llvm", "cpu", 2, "0.27", "1")
    >>> cache.put(ctx, "k", CostRecord(1.5, 0.1, 5))
    >>> cache.get(ctx, "k").median_ms
    1.5
    """

    def __init__(self, path: str | Path = DEFAULT_CACHE, *, read_only: bool = False) -> None:
        self.path = Path(path).expanduser()
        self.read_only = read_only
        self._conn: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            try:
                if self.read_only:  # an existing cache, never created or changed
                    conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=60.0)
                    conn.execute("SELECT context, key, median_ms, spread_ms, repeats, error, measured_at FROM costs "
                                 "LIMIT 1")
                else:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
                    _refuse_other_databases(conn, self.path)
                    conn.execute("PRAGMA journal_mode=WAL")
                    conn.execute("PRAGMA synchronous=NORMAL")
                    conn.execute(_SCHEMA)
            except sqlite3.DatabaseError as exc:
                raise CacheError(f"{self.path}: not a usable cost cache ({exc})") from exc
            self._conn = conn
        return self._conn

    def get(self, context: Context, key: str) -> CostRecord | None:
        """The record for ``key`` under ``context``, or None if it was never measured."""
        return self.get_many(context, [key]).get(key)

    def get_many(self, context: Context, keys: Iterable[str]) -> dict[str, CostRecord]:
        """Records of every key that has one."""
        keys = list(dict.fromkeys(keys))
        conn, ctx, found = self._connect(), context.to_key(), {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            rows = conn.execute(
                "SELECT key, median_ms, spread_ms, repeats, error, measured_at FROM costs "
                f"WHERE context = ? AND key IN ({','.join('?' * len(chunk))})",
                [ctx, *chunk],
            )
            for key, *fields in rows:
                found[key] = CostRecord(*fields)
        return found

    def put(self, context: Context, key: str, record: CostRecord) -> None:
        """Store (or replace) one record, durably, in its own transaction."""
        self.put_many(context, {key: record})

    def put_many(self, context: Context, records: Mapping[str, CostRecord]) -> None:
        """Store several records in one transaction (all or none survive a crash)."""
        conn, ctx = self._connect(), context.to_key()
        rows = [
            (ctx, key, r.median_ms, r.spread_ms, r.repeats, r.error, r.measured_at or time.time())
            for key, r in records.items()
        ]
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("INSERT OR REPLACE INTO costs VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def items(self) -> Iterator[tuple[str, str, CostRecord]]:
        """Every (context key, record key, record), in key order (``cost_models.exchange`` moves them)."""
        rows = self._connect().execute("SELECT context, key, median_ms, spread_ms, repeats, error, measured_at "
                                       "FROM costs ORDER BY context, key")
        for context, key, *fields in rows:
            yield context, key, CostRecord(*fields)

    def __len__(self) -> int:
        return self._connect().execute("SELECT COUNT(*) FROM costs").fetchone()[0]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _refuse_other_databases(conn: sqlite3.Connection, path: Path) -> None:
    """Raise ``CacheError`` (closing ``conn``) when ``path`` is an sqlite file with tables but no cost table of
    this schema: another program's database, which opening it as a cache would change (a table, WAL mode)."""
    tables = sorted(name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    columns = [row[1] for row in conn.execute("PRAGMA table_info(costs)")]
    if tables and columns != list(_COLUMNS):
        conn.close()
        raise CacheError(f"{path}: an sqlite file but not a tessera cost cache (tables {', '.join(tables)}); name "
                         "another file")
