"""kv.DB's plyvel part: get, put, delete, opening and closing, options,
errors, destroy_db and repair_db; keys with NUL bytes, large values."""

import os

import pytest

import kv
from conftest import db_items


def test_put_get_delete_against_model(db_path, rnd):
    # A small memtable so that the operations cross flushes and compactions.
    d = kv.DB(db_path, create_if_missing=True, write_buffer_size=64 * 1024)
    model = {}
    keys = [b"key%05d" % i for i in range(400)]
    for step in range(6000):
        k = rnd.choice(keys)
        op = rnd.random()
        if op < 0.6:
            v = rnd.randbytes(rnd.randrange(0, 300))
            d.put(k, v)
            model[k] = v
        elif op < 0.8:
            d.delete(k)
            model.pop(k, None)
        else:
            assert d.get(k) == model.get(k)
        if step % 2000 == 1999:
            d.compact_range()
    assert db_items(d) == sorted(model.items())
    d.close()
    d = kv.DB(db_path)
    for k in keys:
        assert d.get(k) == model.get(k)
    assert db_items(d) == sorted(model.items())
    d.close()


def test_get_default(db):
    assert db.get(b"absent") is None
    assert db.get(b"absent", b"dflt") == b"dflt"
    assert db.get(b"absent", default=7) == 7
    db.put(b"here", b"")
    assert db.get(b"here", b"dflt") == b""


def test_delete_absent_key(db):
    db.delete(b"never-written")
    assert db.get(b"never-written") is None


def test_put_sync_and_delete_sync(db):
    db.put(b"a", b"1", sync=True)
    assert db.get(b"a") == b"1"
    db.delete(b"a", sync=True)
    assert db.get(b"a") is None


def test_values_may_be_buffers(db):
    db.put(b"ba", bytearray(b"from a bytearray"))
    db.put(b"mv", memoryview(b"from a memoryview"))
    assert db.get(b"ba") == b"from a bytearray"
    assert db.get(b"mv") == b"from a memoryview"
    assert type(db.get(b"ba")) is bytes


@pytest.mark.parametrize("bad", ["text", 12, None])
def test_non_bytes_keys_raise_type_error(db, bad):
    with pytest.raises(TypeError):
        db.put(bad, b"v")
    with pytest.raises(TypeError):
        db.get(bad)
    with pytest.raises(TypeError):
        db.delete(bad)
    with pytest.raises(TypeError):
        db.write_batch().put(bad, b"v")


def test_str_value_raises_type_error(db):
    with pytest.raises(TypeError):
        db.put(b"k", "text")
    with pytest.raises(TypeError):
        db.put(b"k", None)
    assert db.get(b"k") is None


def test_nul_bytes_in_keys_and_values(db_path):
    d = kv.DB(db_path, create_if_missing=True)
    model = {
        b"\x00": b"nul",
        b"\x00\x00": b"two nuls",
        b"a": b"plain",
        b"a\x00": b"a then nul",
        b"a\x00b": b"a nul b",
        b"a\x01": b"a then one",
        b"": b"empty key",
        b"\xff\x00\xff": b"\x00\x00value with nuls\x00",
    }
    for k, v in model.items():
        d.put(k, v)
    for k, v in model.items():
        assert d.get(k) == v
    assert d.get(b"a\x00c") is None
    assert db_items(d) == sorted(model.items())
    # The same after a flush to a table, and from a fresh handle.
    d.compact_range()
    assert db_items(d) == sorted(model.items())
    d.close()
    d = kv.DB(db_path)
    for k, v in model.items():
        assert d.get(k) == v
    assert list(d.iterator(prefix=b"a\x00")) == [(b"a\x00", b"a then nul"),
                                                (b"a\x00b", b"a nul b")]
    d.close()


def test_large_values_take_the_blob_path(db_path, rnd):
    d = kv.DB(db_path, create_if_missing=True)
    model = {b"big%d" % i: rnd.randbytes(1 << 20) for i in range(6)}
    model[b"small"] = b"s" * 10
    for k, v in model.items():
        d.put(k, v)
    for k, v in model.items():
        assert d.get(k) == v
    d.compact_range()
    assert d.stats()["blob_files"] >= 1
    for k, v in model.items():
        assert d.get(k) == v
    assert db_items(d) == sorted(model.items())
    d.close()
    d = kv.DB(db_path)
    assert db_items(d) == sorted(model.items())
    assert d.multi_get(list(model)) == list(model.values())
    d.close()


def test_value_over_the_limit_is_refused(db):
    with pytest.raises(kv.Error):
        db.put(b"huge", b"x" * (16 * 1024 * 1024 + 1))
    assert db.get(b"huge") is None


def test_name_closed_repr_and_context_manager(db_path):
    with kv.DB(db_path, create_if_missing=True) as d:
        assert d.name == db_path
        assert not d.closed
        d.put(b"k", b"v")
        assert db_path in repr(d)
    assert d.closed
    d.close()  # twice is fine
    with pytest.raises((RuntimeError, kv.Error)):
        d.get(b"k")
    with pytest.raises((RuntimeError, kv.Error)):
        d.put(b"k", b"v")
    with kv.DB(db_path) as d:
        assert d.get(b"k") == b"v"


def test_context_manager_closes_on_exception(db_path):
    with pytest.raises(ValueError):
        with kv.DB(db_path, create_if_missing=True) as d:
            raise ValueError("boom")
    assert d.closed


def test_missing_database_raises_error(tmp_path):
    with pytest.raises(kv.Error):
        kv.DB(str(tmp_path / "missing"))
    with pytest.raises(kv.Error):
        kv.DB(str(tmp_path / "missing"), create_if_missing=False)
    assert not (tmp_path / "missing").exists()


def test_error_if_exists(db_path):
    kv.DB(db_path, create_if_missing=True).close()
    with pytest.raises(kv.Error):
        kv.DB(db_path, create_if_missing=True, error_if_exists=True)


def test_open_twice_raises_error(db):
    with pytest.raises(kv.Error):
        kv.DB(db.name)


def test_error_hierarchy():
    assert issubclass(kv.IOError, kv.Error)
    assert issubclass(kv.CorruptionError, kv.Error)
    assert issubclass(kv.IteratorInvalidError, kv.Error)
    assert issubclass(kv.Error, Exception)


def test_plyvel_options_are_accepted(db_path):
    d = kv.DB(db_path, create_if_missing=True, error_if_exists=True, paranoid_checks=True,
              write_buffer_size=1 << 20, max_open_files=100, lru_cache_size=1 << 20,
              block_size=4096, block_restart_interval=16, max_file_size=4 << 20,
              compression="snappy", bloom_filter_bits=12)
    for i in range(2000):
        d.put(b"%05d" % i, b"v")
    d.compact_range()
    assert d.get(b"00007") == b"v"
    assert [t["bits_per_key"] for t in d.table_stats()] == [pytest.approx(12, abs=0.6)]
    d.close()
    for comp in (None, "snappy"):
        path = db_path + str(comp)
        with kv.DB(path, create_if_missing=True, compression=comp) as d2:
            d2.put(b"k", b"v")


def test_bad_options_raise(db_path):
    with pytest.raises((TypeError, ValueError, kv.Error)):
        kv.DB(db_path, create_if_missing=True, compression="no-such-compressor")
    with pytest.raises(TypeError):
        kv.DB(db_path, create_if_missing=True, no_such_option=1)
    assert not os.path.exists(os.path.join(db_path, "MANIFEST"))


def test_kv_options_by_their_names(db_path):
    with kv.DB(db_path, create_if_missing=True, bloom_bits_per_key=6,
               block_cache_size=0, memtable_filter=0, idle_compaction_ms=0,
               min_blob_size=1 << 30) as d:
        for i in range(1000):
            d.put(b"%06d" % i, b"v")
        d.compact_range()
        [t] = d.table_stats()
        assert t["bits_per_key"] == pytest.approx(6, abs=0.6)


def test_comparator(db_path):
    def reverse_cmp(a, b):
        return (a < b) - (a > b)

    d = kv.DB(db_path, create_if_missing=True, comparator=reverse_cmp,
              comparator_name=b"ReverseBytewise")
    for k in (b"a", b"c", b"b", b"aa"):
        d.put(k, k.upper())
    d.compact_range()
    assert list(d.iterator(include_value=False)) == [b"c", b"b", b"aa", b"a"]
    assert d.get(b"aa") == b"AA"
    d.close()
    # The comparator is fixed with the database: another name is refused.
    with pytest.raises(kv.Error):
        kv.DB(db_path)
    d = kv.DB(db_path, comparator=reverse_cmp, comparator_name=b"ReverseBytewise")
    assert list(d.iterator(include_value=False)) == [b"c", b"b", b"aa", b"a"]
    d.close()


def test_comparator_needs_a_name(db_path):
    with pytest.raises((TypeError, ValueError, kv.Error)):
        kv.DB(db_path, create_if_missing=True, comparator=lambda a, b: 0)


def test_destroy_db(db_path):
    with kv.DB(db_path, create_if_missing=True) as d:
        d.put(b"k", b"v")
    kv.destroy_db(db_path)
    assert not os.path.exists(os.path.join(db_path, "MANIFEST"))
    with pytest.raises(kv.Error):
        kv.DB(db_path)
    kv.destroy_db(db_path)  # nothing there: fine


def test_destroy_open_db_raises(db):
    with pytest.raises(kv.Error):
        kv.destroy_db(db.name)
    assert db.get(b"x") is None


def test_repair_db(db_path):
    model = {b"%04d" % i: b"v%d" % i for i in range(500)}
    with kv.DB(db_path, create_if_missing=True) as d:
        for k, v in model.items():
            d.put(k, v)
        d.compact_range()
    os.remove(os.path.join(db_path, "MANIFEST"))
    with pytest.raises(kv.Error):
        kv.DB(db_path)
    kv.repair_db(db_path)
    with kv.DB(db_path) as d:
        assert db_items(d) == sorted(model.items())


def test_get_property(db):
    for i in range(100):
        db.put(b"%03d" % i, b"v")
    db.compact_range()
    stats = db.get_property(b"leveldb.stats")
    assert isinstance(stats, bytes) and stats
    assert db.get_property(b"kv.stats")
    files = [int(db.get_property(b"leveldb.num-files-at-level%d" % n)) for n in range(7)]
    assert sum(files) == len(db.table_stats()) >= 1
    assert db.get_property(b"leveldb.sstables")
    assert int(db.get_property(b"leveldb.approximate-memory-usage")) > 0
    assert db.get_property(b"leveldb.no-such-property") is None
    assert db.get_property(b"leveldb.num-files-at-level7") is None
    with pytest.raises(TypeError):
        db.get_property("leveldb.stats")


def test_compact_range_keeps_data(db_path, rnd):
    d = kv.DB(db_path, create_if_missing=True, write_buffer_size=64 * 1024)
    model = {}
    for i in range(3000):
        k = b"%05d" % rnd.randrange(2000)
        model[k] = rnd.randbytes(50)
        d.put(k, model[k])
    d.compact_range(start=b"00500", stop=b"01000")
    assert db_items(d) == sorted(model.items())
    d.compact_range(start=b"01500")
    d.compact_range(stop=b"00100")
    d.compact_range()
    assert db_items(d) == sorted(model.items())
    levels = sorted({t["level"] for t in d.table_stats()})
    assert len(levels) == 1  # a whole compaction leaves one level
    d.close()


def test_approximate_sizes(db_path, rnd):
    d = kv.DB(db_path, create_if_missing=True)
    for i in range(20000):
        d.put(b"%06d" % i, rnd.randbytes(100))
    assert d.approximate_size(b"000000", b"999999") >= 0
    d.compact_range()
    whole = d.approximate_size(b"", b"\xff")
    half = d.approximate_size(b"000000", b"010000")
    other = d.approximate_size(b"010000", b"\xff")
    assert whole > 20000 * 50
    assert 0.3 * whole < half < 0.7 * whole
    assert d.approximate_sizes((b"000000", b"010000"), (b"010000", b"\xff")) == [half, other]
    assert half + other == whole
    assert d.approximate_sizes() == []
    assert d.approximate_size(b"5", b"4") == 0
    with pytest.raises(TypeError):
        d.approximate_size("a", "b")
    with pytest.raises(TypeError):
        d.approximate_sizes(("a", b"b"))
    d.close()
