"""The persistent cost cache: one sqlite file of measured kernel and layout-transform times.

A record is keyed by everything that changes a timing: the machine context (target, CPU model, threads, TVM version,
template version) and the measured thing (kind, workload, layouts, knobs, epilogue), each as canonical JSON. Every
``put`` is its own transaction in WAL mode, so killing the process at any moment loses at most the measurement in
flight and never corrupts the file, and several processes may read and write the same cache at once.

A cache opened for writing is checked writable when it is first used (before anything is measured): a read-only file
or folder, or a lock another process holds for longer than ``LOCK_SECONDS``, is a ``CacheError`` then, as it is on a
later write (``CacheLockedError``: measuring then sets what it measured and could not store aside in a file for
``tessera cache import``, ``cost_models.exchange.put_or_set_aside``). A cache opened read-only is never changed and
nothing is left beside it: without a write-ahead log beside it (no writer has it open) it is read as an immutable
file, which needs no lock or shared-memory file (a writer that opens it meanwhile is not seen, and a checkpoint it
makes during the read could be misread).
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

LOCK_SECONDS = 60.0
"""How long a write waits for another process's lock on the cache before it gives up."""
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


class CacheLockedError(CacheError):
    """Another process held the cache's write lock for longer than ``LOCK_SECONDS``."""


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
            if self.read_only:  # an existing cache, never created or changed
                logged = self.path.with_name(self.path.name + "-wal").exists()
                uri = f"{self.path.resolve().as_uri()}?{'mode=ro' if logged else 'mode=ro&immutable=1'}"
                conn = self._open(lambda: sqlite3.connect(uri, uri=True, timeout=LOCK_SECONDS),
                                  "SELECT context, key, median_ms, spread_ms, repeats, error, measured_at FROM costs "
                                  "LIMIT 1")
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                if (denied := _write_denied(self.path)) is not None:
                    raise CacheError(f"{self.path}: this cost cache cannot be written ({denied}); give a writable "
                                     "--cache")
                conn = self._open(lambda: sqlite3.connect(self.path, timeout=LOCK_SECONDS, isolation_level=None),
                                  "PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", _SCHEMA,
                                  "BEGIN IMMEDIATE", "DELETE FROM costs WHERE 0", "ROLLBACK")  # writable, unheld
            self._conn = conn
        return self._conn

    def _open(self, connect, *statements: str) -> sqlite3.Connection:
        """``connect()`` then ``statements`` run on it; ``CacheError`` (the connection closed) on any fault."""
        conn = None
        try:
            conn = connect()
            if not self.read_only:
                _refuse_other_databases(conn, self.path)
            for statement in statements:
                conn.execute(statement)
        except sqlite3.DatabaseError as exc:
            if conn is not None:
                conn.close()
            raise self._error(exc) from exc
        return conn

    def _error(self, exc: sqlite3.DatabaseError) -> CacheError:
        """The ``CacheError`` of an sqlite fault: a lock held too long, a cache that cannot be written, or a file
        that is no usable cache."""
        if "locked" in str(exc):
            return CacheLockedError(f"{self.path}: locked by another process for over {LOCK_SECONDS:g} s; what was "
                              "measured so far is kept, run the command again when it is done")
        if "readonly" in str(exc) or "read-only" in str(exc):
            return CacheError(f"{self.path}: this cost cache cannot be written ({exc}); give a writable --cache")
        return CacheError(f"{self.path}: not a usable cost cache ({exc})")

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
        self.put_records((context, key, record) for key, record in records.items())

    def put_records(self, records: Iterable[tuple[Context, str, CostRecord]]) -> None:
        """Store records of any contexts in one transaction (all or none survive a crash or a kill); ``CacheError``
        if the cache cannot be written or stays locked (``LOCK_SECONDS``)."""
        conn = self._connect()
        rows = [(context.to_key(), key, r.median_ms, r.spread_ms, r.repeats, r.error, r.measured_at or time.time())
                for context, key, r in records]
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise self._error(exc) from exc
        try:
            conn.executemany("INSERT OR REPLACE INTO costs VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        except BaseException as exc:
            conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.OperationalError):
                raise self._error(exc) from exc
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


def _write_denied(path: Path) -> str | None:
    """Why this process may not write the cache at ``path`` in WAL mode (None: it may), asked before sqlite opens it:
    sqlite opens a file it may not write read-only, and leaves its ``-wal`` and ``-shm`` files beside it."""
    beside = [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm")]
    for file in (path, *beside):
        if file.exists() and not os.access(file, os.W_OK):
            return f"{file.name} is read-only to this user"
    if not all(file.exists() for file in (path, *beside)) and not os.access(path.parent, os.W_OK):
        return "its folder is read-only to this user"
    return None


def _refuse_other_databases(conn: sqlite3.Connection, path: Path) -> None:
    """Raise ``CacheError`` (closing ``conn``) when ``path`` is an sqlite file with tables but no cost table of
    this schema: another program's database, which opening it as a cache would change (a table, WAL mode)."""
    tables = sorted(name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    columns = [row[1] for row in conn.execute("PRAGMA table_info(costs)")]
    if tables and columns != list(_COLUMNS):
        conn.close()
        raise CacheError(f"{path}: an sqlite file but not a tessera cost cache (tables {', '.join(tables)}); name "
                         "another file")
