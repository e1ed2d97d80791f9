"""The sqlite cost cache: keying, durability under SIGKILL, concurrent writers, bad files, locks, files this user may
not write."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import sqlite3
import tempfile
import time

import pytest

from cost_models.cache import CacheError, Context, CostCache, CostRecord, canonical

CTX = Context(target="llvm -mcpu=znver5", cpu="AMD test", threads=2, tvm_version="0.27.0", template_version="1")


def test_round_trip_and_context_separation(tmp_path):
    cache = CostCache(tmp_path / "c.sqlite")
    key = canonical({"kind": "conv2d", "knobs": {"reg_n": 14}, "layout": "NCHW16c"})
    cache.put(CTX, key, CostRecord(1.25, 0.05, 5))
    assert cache.get(CTX, key).median_ms == 1.25
    for field, value in [("threads", 1), ("cpu", "other"), ("tvm_version", "0.28"), ("template_version", "2")]:
        other = Context(**{**CTX.__dict__, field: value})
        assert cache.get(other, key) is None, field
    assert cache.get(CTX, canonical({"kind": "conv2d", "knobs": {"reg_n": 7}, "layout": "NCHW16c"})) is None
    assert canonical({"b": 1, "a": 2}) == canonical({"a": 2, "b": 1})


def test_timing_methods_are_part_of_the_context_and_warm_keeps_its_old_key(tmp_path):
    cache = CostCache(tmp_path / "c.sqlite")
    cache.put(CTX, "k", CostRecord(1.0, 0.0, 5))
    assert "timing" not in CTX.to_key()  # the key warm records had before timing methods existed
    for method in ("context", "cold"):
        other = Context(**{**CTX.__dict__, "timing": method})
        assert cache.get(other, "k") is None and method in other.to_key()
        cache.put(other, "k", CostRecord(2.0, 0.0, 50))
    assert cache.get(CTX, "k").median_ms == 1.0 and len(cache) == 3


def test_failures_are_records(tmp_path):
    cache = CostCache(tmp_path / "c.sqlite")
    cache.put(CTX, "k", CostRecord.failed("LLVM ERROR: boom"))
    record = CostCache(tmp_path / "c.sqlite").get(CTX, "k")
    assert not record.ok and record.error == "LLVM ERROR: boom"


def _writer(path: str, prefix: str, count: int) -> None:
    cache = CostCache(path)
    for i in range(count):
        cache.put(CTX, f"{prefix}{i}", CostRecord(float(i), 0.0, 1))


def test_concurrent_writers(tmp_path):
    path = str(tmp_path / "c.sqlite")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, f"p{p}-", 100)) for p in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0
    assert len(CostCache(path)) == 400


def test_sigkill_mid_write_leaves_a_clean_cache(tmp_path):
    path = str(tmp_path / "c.sqlite")
    proc = multiprocessing.get_context("spawn").Process(target=_writer, args=(path, "k", 10**6))
    proc.start()
    deadline = time.time() + 60
    while time.time() < deadline and (not os.path.exists(path) or len(CostCache(path)) < 50):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    cache = CostCache(path)
    n = len(cache)
    assert n >= 50
    found = cache.get_many(CTX, [f"k{i}" for i in range(n)])
    assert len(found) == n  # every committed record is intact and the keys form a prefix
    assert cache.get(CTX, f"k{n - 1}").median_ms == n - 1


def test_not_a_cache(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(CacheError, match="not a usable cost cache"):
        len(CostCache(bad))


def test_another_programs_database_is_refused_unchanged(tmp_path):
    other = tmp_path / "mlflow.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE runs (id INTEGER)")
    conn.commit()
    conn.close()
    before = other.read_bytes()
    with pytest.raises(CacheError, match="mlflow.db: an sqlite file but not a tessera cost cache .tables runs."):
        len(CostCache(other))
    assert other.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["mlflow.db"]


def test_a_cache_locked_too_long_is_refused_at_its_first_use_and_keeps_what_it_holds(tmp_path, monkeypatch):
    import cost_models.cache

    path = tmp_path / "c.sqlite"
    CostCache(path).put(CTX, "k", CostRecord(1.0, 0.1, 5))
    monkeypatch.setattr(cost_models.cache, "LOCK_SECONDS", 0.2)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process writing, for longer than a cache waits
    try:
        with pytest.raises(CacheError, match="locked by another process for over 0.2 s; what was measured so far"):
            CostCache(path).get(CTX, "k")  # before anything would be measured
        reader = CostCache(path, read_only=True)
        assert reader.get(CTX, "k").median_ms == 1.0  # reading needs no write lock
        reader.close()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert CostCache(path).get(CTX, "k").median_ms == 1.0


def _as_another_user(function):
    """``function()``'s result or exception text, from a process that file modes apply to: a forked child that drops
    root's privileges (to ``nobody``) when the tests run as root, who may write any file."""
    if os.geteuid() != 0:
        return function()
    context = multiprocessing.get_context("fork")
    results = context.Queue()

    def child():
        os.setgid(65534)
        os.setuid(65534)
        try:
            results.put(function())
        except Exception as exc:  # the modules it needs are imported: nobody may not read root's site-packages
            results.put(f"{type(exc).__name__}: {exc}")

    process = context.Process(target=child)
    process.start()
    result = results.get(timeout=60)
    process.join(timeout=60)
    return result


@pytest.mark.parametrize("locked", ["file", "folder"])
def test_a_cache_this_user_may_not_write_is_refused_at_first_use_and_read_leaving_nothing_beside_it(locked):
    root = tempfile.mkdtemp()  # not under pytest's folder, which only root may enter
    try:
        folder = os.path.join(root, "caches")
        os.mkdir(folder)
        path = os.path.join(folder, "c.sqlite")
        cache = CostCache(path)
        cache.put(CTX, "k", CostRecord(1.0, 0.1, 5))
        cache.close()
        os.chmod(root, 0o755)
        os.chmod(folder, 0o777 if locked == "file" else 0o755)  # the file read-only in a folder anyone may write
        os.chmod(path, 0o444 if locked == "file" else 0o666)

        def write():
            return CostCache(path).get(CTX, "k")

        def read():
            reader = CostCache(path, read_only=True)
            found = reader.get(CTX, "k").median_ms, len(reader)
            reader.close()
            return found

        message = "this cost cache cannot be written ({} is read-only to this user); give a writable --cache"
        assert _as_another_user(write) == f"CacheError: {path}: " + message.format(
            "c.sqlite" if locked == "file" else "its folder")
        assert _as_another_user(read) == (1.0, 1)
        assert os.listdir(folder) == ["c.sqlite"]
    finally:
        shutil.rmtree(root)
