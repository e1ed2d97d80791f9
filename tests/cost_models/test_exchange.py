"""Cost records between caches: JSON Lines export / import and merge keep every record; the policy for a record
measured twice; sources never changed; bad files one named error."""

from __future__ import annotations

import json
import sqlite3

import pytest

from cost_models.cache import CacheError, Context, CostCache, CostRecord, canonical
from cost_models.exchange import export_records, import_records, merge_caches, read_records, stats
from experiments.cli import main
from tests.cli_helpers import one_error_line

WARM = Context("llvm -mcpu=znver4", "AMD EPYC", 2, "0.27.0", "2")
COLD = Context("llvm -mcpu=znver4", "AMD EPYC", 2, "0.27.0", "2", timing="cold")


def _key(kind: str, n: int) -> str:
    return canonical({"kind": kind, "workload": {"channels": n, "shape": [1, n, 7, 7]}, "knobs": {"reg_n": 4}})


def _fill(path, records) -> CostCache:
    cache = CostCache(path)
    for context, key, record in records:
        cache.put(context, key, record)
    return cache


RECORDS = [(WARM, _key("conv2d", n), CostRecord(0.1 * n, 0.01, 25, None, 1000.0 + n)) for n in range(1, 6)] + [
    (COLD, _key("conv2d", 1), CostRecord(0.31, 0.02, 9, None, 2000.0)),
    (WARM, _key("layout_transform", 3), CostRecord.failed("timed out after 10 s")),
]


@pytest.mark.parametrize("name", ["records.jsonl", "records.jsonl.gz"])
def test_export_then_import_keeps_every_record_exactly(tmp_path, name):
    source = _fill(tmp_path / "a.sqlite", RECORDS)
    assert export_records(source, tmp_path / name) == len(RECORDS)
    target = CostCache(tmp_path / "b.sqlite")
    counts = import_records(target, read_records(tmp_path / name))
    assert (counts.read, counts.added, counts.replaced, counts.kept) == (7, 7, 0, 0)
    assert list(target.items()) == list(source.items())
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_every_line_spells_out_the_key_and_the_context(tmp_path):
    export_records(_fill(tmp_path / "a.sqlite", RECORDS), tmp_path / "r.jsonl")
    lines = [json.loads(text) for text in (tmp_path / "r.jsonl").read_text().splitlines()]
    first = lines[0]
    assert set(first) == {"context", "key", "median_ms", "spread_ms", "repeats", "error", "measured_at"}
    assert set(first["context"]) == {"target", "cpu", "threads", "tvm_version", "template_version", "timing"}
    assert {line["context"]["timing"] for line in lines} == {"warm", "cold"}
    assert {line["key"]["kind"] for line in lines} == {"conv2d", "layout_transform"}


def test_a_record_measured_twice_keeps_a_success_over_a_failure_else_the_newer(tmp_path):
    ours = _fill(tmp_path / "ours.sqlite", [
        (WARM, _key("conv2d", 1), CostRecord(0.5, 0.01, 25, None, 5000.0)),  # newer than theirs: kept
        (WARM, _key("conv2d", 2), CostRecord(0.5, 0.01, 25, None, 10.0)),  # older: replaced
        (WARM, _key("layout_transform", 3), CostRecord(0.2, 0.01, 25, None, 10.0)),  # a success: kept
    ])
    _fill(tmp_path / "theirs.sqlite", RECORDS).close()
    before = (tmp_path / "theirs.sqlite").read_bytes()
    counts = merge_caches(ours, [tmp_path / "theirs.sqlite"])
    assert (counts.read, counts.added, counts.replaced, counts.kept) == (7, 4, 1, 2)
    assert ours.get(WARM, _key("conv2d", 1)).median_ms == 0.5
    assert ours.get(WARM, _key("conv2d", 2)).median_ms == pytest.approx(0.2)
    assert ours.get(WARM, _key("layout_transform", 3)).ok
    assert (tmp_path / "theirs.sqlite").read_bytes() == before  # a merged cache is only read


def test_stats_count_records_by_context_and_kind(tmp_path):
    s = stats(_fill(tmp_path / "a.sqlite", RECORDS))
    assert (s.records, s.failed) == (7, 1)
    assert sorted(s.contexts.values()) == [1, 6] and s.kinds == {"conv2d": 6, "layout_transform": 1}


def test_a_database_that_is_not_a_cost_cache_is_refused_and_left_as_it_was(tmp_path):
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    before = other.read_bytes()
    with pytest.raises(CacheError, match="not a usable cost cache"):
        merge_caches(CostCache(tmp_path / "ours.sqlite"), [other])
    assert other.read_bytes() == before


@pytest.mark.parametrize("text, message", [
    ("not json\n", "r.jsonl:1: not a cost record"),
    ('{"context": {"cpu": "x"}}\n', "r.jsonl:1: not a cost record"),
    ("\n" + json.dumps({"context": WARM.__dict__, "key": {"kind": "conv2d"}, "median_ms": -1.0, "spread_ms": 0,
                        "repeats": 1, "error": None, "measured_at": 1.0}) + "\n", "r.jsonl:2: not a cost record"),
])
def test_a_bad_line_is_one_error_naming_its_line(tmp_path, capsys, text, message):
    (tmp_path / "r.jsonl").write_text(text)
    assert main(["cache", "import", str(tmp_path / "r.jsonl"), "--cache", str(tmp_path / "c.sqlite")]) == 2
    assert message in one_error_line(capsys)


def test_the_cache_command(tmp_path, capsys):
    cache = str(tmp_path / "a.sqlite")
    _fill(cache, RECORDS).close()
    assert main(["cache", "stats", "--cache", cache]) == 0
    out = capsys.readouterr().out
    assert "7 records, 1 failed" in out and "AMD EPYC (llvm -mcpu=znver4), 2 threads, cold" in out
    assert main(["cache", "export", str(tmp_path), "--cache", cache]) == 2
    assert "is a directory" in one_error_line(capsys)
    assert main(["cache", "stats", "--cache", str(tmp_path / "missing.sqlite")]) == 2
    assert "no such cost cache" in one_error_line(capsys) and not (tmp_path / "missing.sqlite").exists()
    assert main(["cache", "merge", cache, "--cache", cache]) == 2
    assert "name other caches" in one_error_line(capsys)
    (tmp_path / "r.jsonl.gz").write_bytes(b"\x1f\x8b garbage")
    assert main(["cache", "import", str(tmp_path / "r.jsonl.gz"), "--cache", cache]) == 2
    assert "not a cost record file" in one_error_line(capsys)


def test_an_import_is_one_transaction_a_failed_write_leaves_the_cache_as_it_was(tmp_path):
    cache = _fill(tmp_path / "a.sqlite", RECORDS[:1])
    export_records(_fill(tmp_path / "b.sqlite", RECORDS), tmp_path / "records.jsonl")
    conn = sqlite3.connect(cache.path)  # the fourth record's write fails, after the ones before it succeeded
    conn.execute(f"CREATE TRIGGER refuse BEFORE INSERT ON costs WHEN NEW.key = '{RECORDS[3][1]}' "
                 "BEGIN SELECT RAISE(ABORT, 'refused'); END")
    conn.commit()
    conn.close()
    with pytest.raises(sqlite3.DatabaseError, match="refused"):
        import_records(cache, read_records(tmp_path / "records.jsonl"))
    assert [key for _, key, _ in cache.items()] == [RECORDS[0][1]]


def test_commands_that_only_read_leave_nothing_beside_the_cache(tmp_path, capsys):
    _fill(tmp_path / "a.sqlite", RECORDS).close()
    _fill(tmp_path / "b.sqlite", RECORDS[:2]).close()
    before = sorted(path.name for path in tmp_path.iterdir())
    assert main(["cache", "stats", "--cache", str(tmp_path / "a.sqlite")]) == 0
    assert main(["cache", "export", str(tmp_path / "out.jsonl"), "--cache", str(tmp_path / "a.sqlite")]) == 0
    assert main(["cache", "merge", str(tmp_path / "a.sqlite"), "--cache", str(tmp_path / "b.sqlite")]) == 0
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted([*before, "out.jsonl"])
    assert "7 records read, 5 added" in capsys.readouterr().out


def test_a_record_the_cache_stays_locked_for_is_set_aside_with_the_rest_measured(tmp_path, monkeypatch):
    import cost_models.cache
    from cost_models.cache import CacheLockedError
    from cost_models.exchange import put_or_set_aside

    monkeypatch.setattr(cost_models.cache, "LOCK_SECONDS", 0.2)  # before the cache connects: its wait is set then
    path = tmp_path / "c.sqlite"
    cache = _fill(path, RECORDS[:1])
    (_, first, record), (_, second, other), (_, third, last) = RECORDS[1:4]
    rest = iter([(third, last)])
    put_or_set_aside(cache, WARM, first, record, rest)
    assert cache.get(WARM, first) == record and next(rest) == (third, last)  # stored: the rest left alone

    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    with pytest.raises(CacheLockedError) as caught:
        put_or_set_aside(cache, WARM, second, other, iter([(third, last)]))
    holder.execute("ROLLBACK")
    holder.close()
    (aside,) = tmp_path.glob("c.sqlite.*.pending.jsonl")
    assert f"what was measured last is in {aside} (tessera cache import {aside} --cache {path} adds it)" in str(
        caught.value)
    assert [(key, found) for _, key, found in read_records(aside)] == [(second, other), (third, last)]
    assert cache.get(WARM, second) is None
