"""kv's own part of the binding: multi_get, explain, stats, table_stats,
metrics, delete_range, merge (kv's uint64 add and a Python callable),
checkpoint, read-only handles with catch_up(), the table writer and ingest."""

import os
import struct

import pytest

import kv
from conftest import db_items


def u64(n):
    return struct.pack("<Q", n)


def fill_tables(d, n, prefix=b"k"):
    for i in range(n):
        d.put(prefix + b"%06d" % i, b"v%d" % i)
    d.compact_range()


def test_multi_get(db, rnd):
    model = {}
    for i in range(3000):
        k = b"%05d" % rnd.randrange(5000)
        model[k] = rnd.randbytes(rnd.randrange(40))
        db.put(k, model[k])
        if i == 1500:
            db.compact_range()
    keys = [b"%05d" % rnd.randrange(5000) for _ in range(500)]
    keys += [b"", b"\x00", b"nope", keys[0], keys[0]]  # absent keys and repeats
    assert db.multi_get(keys) == [model.get(k) for k in keys]
    assert db.multi_get([]) == []
    assert db.multi_get(iter(keys[:10])) == [model.get(k) for k in keys[:10]]
    with pytest.raises(TypeError):
        db.multi_get([b"a", "b"])


def test_explain_present_missing_and_deleted(db):
    fill_tables(db, 1000)
    db.put(b"mem", b"in the memtable")
    db.delete(b"k000005")

    e = db.explain(b"k000010")
    assert isinstance(e, dict)
    assert e["value"] == b"v10"
    assert e["found"] is True
    steps = e["steps"]
    assert steps[-1]["where"] == "table"
    assert steps[-1]["outcome"] == "found"
    assert steps[-1]["filter"] == "maybe"
    assert steps[-1]["level"] >= 0 and steps[-1]["number"] > 0
    assert steps[-1]["block"] in ("cache", "file")

    e = db.explain(b"mem")
    assert e["value"] == b"in the memtable"
    assert e["steps"][0]["where"] == "memtable" and e["steps"][0]["outcome"] == "found"

    e = db.explain(b"k000005")
    assert e["found"] is False and e["value"] is None
    assert e["steps"][0]["outcome"] == "deleted"

    e = db.explain(b"k000010x")  # missing, inside the table's range
    assert e["found"] is False and e["value"] is None
    tsteps = [s for s in e["steps"] if s["where"] == "table"]
    assert tsteps and all(s["outcome"] == "absent" for s in tsteps)
    for s in tsteps:
        assert s["filter"] in ("negative", "maybe")
        assert s["false_positive"] == (s["filter"] == "maybe")
        if s["filter"] == "negative":
            assert s["block"] == "none"
    assert e["live_tables"] >= len(tsteps)
    assert isinstance(e["hash"], int)
    with pytest.raises(TypeError):
        db.explain("k")


def test_explain_finds_a_false_positive(db):
    """Missing keys probe the tables; some filter says "maybe" wrongly, and
    explain() marks that step. Every answer agrees with get()."""
    fill_tables(db, 2000)
    fp = None
    for i in range(20000):
        key = b"k%06d%d" % (i % 2000, i // 2000)
        e = db.explain(key)
        assert e["value"] is None
        if any(s.get("false_positive") for s in e["steps"]):
            fp = e
            break
    assert fp is not None, "no false positive in 20000 missing keys at 10 bits/key"
    [step] = [s for s in fp["steps"] if s["false_positive"]]
    assert step["filter"] == "maybe" and step["outcome"] == "absent"
    assert step["block"] in ("cache", "file")


def test_stats(db):
    s0 = db.stats()
    assert isinstance(s0, dict)
    for i in range(500):
        db.put(b"%04d" % i, b"v")
    for i in range(100):
        db.get(b"%04d" % i)
    db.compact_range()
    s = db.stats()
    assert s["gets"] - s0["gets"] == 100
    assert s["puts"] - s0["puts"] == 500
    assert s["flushes"] >= 1
    for name in ("blob_files", "checkpoints", "range_deletes", "merges", "level_bytes"):
        assert name in s, name
    assert all(isinstance(v, (int, float, list)) for v in s.values())


def test_table_stats(db):
    fill_tables(db, 5000)
    tables = db.table_stats()
    assert isinstance(tables, list) and tables
    assert sum(t["entries"] for t in tables) == 5000
    for t in tables:
        assert 0 <= t["level"] <= 6
        assert t["bits_per_key"] == pytest.approx(10, abs=1)
        assert 0 < t["expected_fpr"] < 0.05
        assert t["measured_fpr"] == 0
        assert t["probes"] == 0
        assert isinstance(t["smallest"], bytes) and t["smallest"] <= t["largest"]
        assert t["number"] > 0 and t["file_size"] > 0


def test_metrics(db):
    db.put(b"k", b"v")
    db.get(b"k")
    text = db.metrics()
    assert isinstance(text, str)
    assert "kv_gets_total" in text or "kv_get" in text
    assert text.endswith("\n")
    assert "# TYPE" in text


def test_delete_range(db, rnd):
    model = {}
    for i in range(2000):
        k = b"%04d" % rnd.randrange(3000)
        model[k] = b"v"
        db.put(k, b"v")
        if i == 1000:
            db.compact_range()
    sn = db.snapshot()
    before = sorted(model.items())
    db.delete_range(b"0500", b"1500")
    model = {k: v for k, v in model.items() if not (b"0500" <= k < b"1500")}
    assert db_items(db) == sorted(model.items())
    assert db.get(b"0500") is None
    assert list(sn) == before  # a snapshot from before still sees them
    sn.close()
    db.delete_range(b"x", b"x")  # empty: nothing
    with pytest.raises(kv.Error):
        db.delete_range(b"b", b"a")
    db.compact_range()
    assert db_items(db) == sorted(model.items())
    with db.write_batch() as wb:
        wb.delete_range(b"0000", b"0100")
        wb.put(b"0050", b"after the range delete")
    model = {k: v for k, v in model.items() if not (b"0000" <= k < b"0100")}
    model[b"0050"] = b"after the range delete"
    assert db_items(db) == sorted(model.items())


def test_merge_uint64_add(db_path, rnd):
    d = kv.DB(db_path, create_if_missing=True, merge_operator="uint64add")
    model = {}
    for i in range(3000):
        k = b"c%02d" % rnd.randrange(50)
        n = rnd.randrange(1000)
        d.merge(k, u64(n))
        model[k] = (model.get(k, 0) + n) % (1 << 64)
        if i % 1000 == 999:
            d.compact_range()
    d.put(b"c00", u64(7))
    model[b"c00"] = 7
    d.merge(b"c00", u64((1 << 64) - 1))  # wraps modulo 2^64
    model[b"c00"] = 6
    for k, n in model.items():
        assert d.get(k) == u64(n)
    assert db_items(d) == sorted((k, u64(n)) for k, n in model.items())
    with d.write_batch() as wb:
        wb.merge(b"c01", u64(1))
    assert d.get(b"c01") == u64(model[b"c01"] + 1)
    assert d.stats()["merges"] >= 3000
    d.merge(b"bad", b"not 8 bytes")
    with pytest.raises(kv.CorruptionError):
        d.get(b"bad")
    d.close()
    # The operator's name is kept with the database.
    with pytest.raises(kv.Error):
        kv.DB(db_path, merge_operator=lambda key, existing, operands: b"")
    d = kv.DB(db_path, merge_operator="uint64add")
    assert d.get(b"c00") == u64(6)
    d.close()


def test_merge_without_operator_raises(db):
    with pytest.raises(kv.Error):
        db.merge(b"k", b"x")


def test_merge_python_callable(db_path, rnd):
    calls = []

    def concat(key, existing, operands):
        calls.append(key)
        assert isinstance(key, bytes) and all(isinstance(o, bytes) for o in operands)
        return (existing or b"") + b"".join(operands)

    d = kv.DB(db_path, create_if_missing=True, merge_operator=concat,
              merge_operator_name="concat")
    model = {}
    for i in range(1000):
        k = b"m%02d" % rnd.randrange(20)
        op = b"%d," % i
        d.merge(k, op)
        model[k] = model.get(k, b"") + op
        if i == 500:
            d.compact_range()
    d.put(b"m00", b"reset:")
    model[b"m00"] = b"reset:"
    d.merge(b"m00", b"x")
    model[b"m00"] += b"x"
    for k, v in model.items():
        assert d.get(k) == v
    assert d.multi_get(sorted(model)) == [model[k] for k in sorted(model)]
    d.compact_range()
    assert db_items(d) == sorted(model.items())
    assert calls
    d.close()


def test_merge_callable_exception_is_an_error(db_path):
    def broken(key, existing, operands):
        raise ValueError("broken operator")

    d = kv.DB(db_path, create_if_missing=True, merge_operator=broken,
              merge_operator_name="broken")
    d.put(b"k", b"v")
    d.merge(b"k", b"x")
    with pytest.raises((kv.Error, ValueError)):
        d.get(b"k")
    d.put(b"k", b"plain")  # the database stays usable
    assert d.get(b"k") == b"plain"
    d.close()


def test_merge_callable_must_return_bytes(db_path):
    d = kv.DB(db_path, create_if_missing=True, merge_operator=lambda k, e, o: 42,
              merge_operator_name="not-bytes")
    d.merge(b"k", b"x")
    with pytest.raises((kv.Error, TypeError)):
        d.get(b"k")
    d.close()


def test_checkpoint(db, tmp_path, rnd):
    model = {b"%04d" % i: rnd.randbytes(30) for i in range(2000)}
    for i, (k, v) in enumerate(model.items()):
        db.put(k, v)
        if i == 1000:
            db.compact_range()
    cp = str(tmp_path / "cp")
    db.checkpoint(cp)
    db.put(b"after", b"not in the checkpoint")
    with kv.DB(cp) as c:
        assert db_items(c) == sorted(model.items())
    with pytest.raises(kv.Error):
        db.checkpoint(cp)  # exists
    with pytest.raises(kv.Error):
        db.checkpoint(str(tmp_path / "no" / "parent"))
    assert db.stats()["checkpoints"] == 1


def test_read_only_and_catch_up(db, db_path):
    db.put(b"a", b"1")
    ro = kv.DB(db_path, read_only=True)
    assert ro.get(b"a") == b"1"
    db.put(b"b", b"2")
    db.compact_range()
    db.put(b"c", b"3")
    assert ro.get(b"b") is None  # as of its open
    it = ro.iterator()
    ro.catch_up()
    assert ro.get(b"b") == b"2" and ro.get(b"c") == b"3"
    assert list(it) == [(b"a", b"1")]  # an iterator keeps its view
    with pytest.raises(kv.Error):
        ro.put(b"x", b"y")
    with pytest.raises(kv.Error):
        ro.delete(b"a")
    with pytest.raises(kv.Error):
        db.catch_up()  # not a read-only handle
    ro2 = kv.DB(db_path, read_only=True)  # several read-only handles at once
    assert db_items(ro2) == [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]
    ro2.close()
    ro.close()


def test_read_only_of_missing_db(tmp_path):
    with pytest.raises(kv.Error):
        kv.DB(str(tmp_path / "missing"), read_only=True)


def test_table_writer_and_ingest(db, tmp_path):
    db.put(b"i000", b"old")
    db.put(b"zzzz", b"kept")
    paths = []
    model = {b"zzzz": b"kept"}
    for t in range(2):
        path = str(tmp_path / ("ext%d.sst" % t))
        with kv.TableWriter(path) as w:
            for i in range(t * 1000, t * 1000 + 1000):
                k = b"i%03d" % i if i < 1000 else b"j%04d" % i
                w.put(k, b"ingested %d" % i)
                model[k] = b"ingested %d" % i
        paths.append(path)
    db.ingest(paths)
    assert db_items(db) == sorted(model.items())
    assert db.get(b"i000") == b"ingested 0"
    assert db.stats()["ingested_tables"] == 2
    db.compact_range()
    assert db_items(db) == sorted(model.items())


def test_table_writer_delete_and_order(db, tmp_path):
    db.put(b"a", b"1")
    db.put(b"b", b"2")
    path = str(tmp_path / "del.sst")
    w = kv.TableWriter(path)
    w.delete(b"a")
    w.put(b"c", b"3")
    with pytest.raises(kv.Error):
        w.put(b"b", b"out of order")
    with pytest.raises(TypeError):
        w.put("d", b"4")
    w.finish()
    db.ingest([path], move=True)
    assert not os.path.exists(path)
    assert db_items(db) == [(b"b", b"2"), (b"c", b"3")]


def test_table_writer_abandon(tmp_path):
    path = str(tmp_path / "gone.sst")
    w = kv.TableWriter(path)
    w.put(b"a", b"1")
    w.abandon()
    assert not os.path.exists(path)
    with pytest.raises(kv.Error):
        kv.TableWriter(str(tmp_path / "no" / "dir.sst"))
