"""Which MLflow store the experiments use: the default, the check of a tracking URI, and a client on it.

A tracking URI is checked before MLflow sees it, so that a wrong one is one ``ExperimentError`` rather than a file
MLflow creates or changes, a traceback or minutes of retries: ``sqlite:///PATH`` must name an existing MLflow store
or, where the caller may create the store (``create=True``), a new or empty file in an existing directory (an SQLite
database without MLflow's tables belongs to another program: MLflow would add its tables to it); any other URI must
use one of MLflow's database or server schemes (MLflow no longer takes its file store, so a plain path is refused
too), and an ``http``/``https`` server must accept a connection within ``CONNECT_SECONDS`` (MLflow itself retries for
minutes).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from experiments.config import ExperimentError
from solvers.input_files import InputFileError, checked_input

SERVER_SCHEMES = ("postgresql", "mysql", "mssql", "http", "https", "databricks")
"""Schemes of tracking URIs other than ``sqlite`` (a database URI may name its driver: ``postgresql+psycopg2``)."""

SQLITE_HEADER = b"SQLite format 3\x00"
MLFLOW_TABLES = frozenset({"experiments", "runs", "alembic_version"})
"""Tables every MLflow SQLite store has: an SQLite file without them belongs to another program."""

CONNECT_SECONDS = 10.0
"""How long an MLflow tracking server may take to accept a connection."""


def default_tracking_uri() -> str:
    """``sqlite:///<cwd>/mlflow.db``."""
    return f"sqlite:///{Path.cwd() / 'mlflow.db'}"


def check_tracking_uri(tracking_uri: str | None, *, create: bool) -> str:
    """``tracking_uri`` (None: ``default_tracking_uri()``) once checked; ``create`` allows a SQLite store that does
    not exist yet. Nothing is created here; a URI that cannot work raises ``ExperimentError``.

    Examples
    --------
    >>> check_tracking_uri("sqlite:///mlflow.db", create=True)
    'sqlite:///mlflow.db'
    >>> check_tracking_uri("sqlite:///missing.db", create=False)
    Traceback (most recent call last):
    ...
    experiments.config.ExperimentError: no MLflow store at missing.db (tracking URI 'sqlite:///missing.db')
    """
    uri = tracking_uri or default_tracking_uri()
    scheme = uri.partition("://")[0].partition("+")[0] if "://" in uri else ""
    if scheme == "sqlite":
        _check_sqlite(uri, create)
    elif scheme in ("http", "https"):
        _check_server(uri)
    elif scheme not in SERVER_SCHEMES:
        raise ExperimentError(f"tracking URI {uri!r} is not an MLflow store: give sqlite:///PATH.db or a "
                              f"{', '.join(SERVER_SCHEMES[:-1])} or {SERVER_SCHEMES[-1]} URI")
    return uri


def _check_sqlite(uri: str, create: bool) -> None:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        database = make_url(uri).database
    except ArgumentError as exc:
        raise ExperimentError(f"tracking URI {uri!r} is malformed ({exc})") from exc
    if not database or database == ":memory:":
        raise ExperimentError(f"tracking URI {uri!r} names no database file (sqlite:///PATH.db)")
    path = Path(database)
    if path.is_dir():
        raise ExperimentError(f"tracking URI {uri!r}: {path} is a directory, not a database file")
    if path.exists():
        try:
            checked_input(path, None)
        except InputFileError as exc:
            raise ExperimentError(f"tracking URI {uri!r}: {exc}") from exc
        with path.open("rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
        if header and header != SQLITE_HEADER:
            raise ExperimentError(f"tracking URI {uri!r}: {path} is not an SQLite database")
        if not header and not create:
            raise ExperimentError(f"no MLflow store at {path} (an empty file; tracking URI {uri!r})")
        if header and not _is_mlflow_store(path):
            raise ExperimentError(f"tracking URI {uri!r}: {path} is an SQLite database but not an MLflow store (it "
                                  "has no MLflow tables); give a new file or an MLflow store")
    elif not create:
        raise ExperimentError(f"no MLflow store at {path} (tracking URI {uri!r})")
    elif not path.parent.is_dir():
        raise ExperimentError(f"tracking URI {uri!r}: the directory {path.parent} does not exist")


def _is_mlflow_store(path: Path) -> bool:
    """Whether the SQLite database at ``path`` holds MLflow's tables, read without writing (no journal left)."""
    try:
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as database:
            tables = {row[0] for row in database.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error:
        return False
    return MLFLOW_TABLES <= tables


def _check_server(uri: str) -> None:
    try:
        parts = urlsplit(uri)
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise ExperimentError(f"tracking URI {uri!r} is malformed ({exc})") from exc
    if not host:
        raise ExperimentError(f"tracking URI {uri!r} names no host")
    try:
        with socket.create_connection((host, port), timeout=CONNECT_SECONDS):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise ExperimentError(f"no MLflow tracking server answers at {host}:{port} ({reason}; tracking URI "
                              f"{uri!r})") from exc


def client(tracking_uri: str | None = None, *, create: bool = True) -> Any:
    """An ``MlflowClient`` on ``tracking_uri`` (default: ``default_tracking_uri()``) once checked by
    ``check_tracking_uri``, telemetry off."""
    uri = check_tracking_uri(tracking_uri, create=create)
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    from mlflow.tracking import MlflowClient

    return MlflowClient(uri)
