"""write_batch(): puts and deletes applied together, transaction=, sync=,
clear, append, approximate_size, and use as a context manager."""

import pytest

import kv
from conftest import db_items


def test_batch_write(db):
    db.put(b"gone", b"x")
    wb = db.write_batch()
    wb.put(b"a", b"1")
    wb.put(b"b", bytearray(b"2"))
    wb.delete(b"gone")
    wb.put(b"a", b"1 again")  # a later entry of the same key wins
    assert db.get(b"a") is None  # nothing applied before write()
    wb.write()
    assert db_items(db) == [(b"a", b"1 again"), (b"b", b"2")]


def test_batch_context_manager_writes_on_exit(db):
    with db.write_batch() as wb:
        for i in range(100):
            wb.put(b"%03d" % i, b"v")
        assert db.get(b"000") is None
    assert len(db_items(db)) == 100


def test_batch_without_transaction_writes_despite_an_exception(db):
    with pytest.raises(ValueError):
        with db.write_batch() as wb:
            wb.put(b"k", b"v")
            raise ValueError("boom")
    assert db.get(b"k") == b"v"


def test_batch_transaction_writes_nothing_on_exception(db):
    db.put(b"k", b"old")
    with pytest.raises(ValueError):
        with db.write_batch(transaction=True) as wb:
            wb.put(b"k", b"new")
            wb.put(b"other", b"v")
            wb.delete(b"k")
            raise ValueError("boom")
    assert db_items(db) == [(b"k", b"old")]
    with db.write_batch(transaction=True) as wb:
        wb.put(b"k", b"new")
    assert db.get(b"k") == b"new"


def test_batch_sync_clear_append_size(db):
    wb = db.write_batch(sync=True)
    empty = wb.approximate_size()
    wb.put(b"k1", b"v" * 100)
    assert wb.approximate_size() > empty + 100
    wb.clear()
    assert wb.approximate_size() == empty
    wb.put(b"k2", b"v2")
    other = db.write_batch()
    other.put(b"k3", b"v3")
    other.delete(b"k2")
    wb.append(other)
    wb.write()
    assert db_items(db) == [(b"k3", b"v3")]
    # A batch may be written again; its entries stay until clear().
    db.delete(b"k3")
    wb.write()
    assert db.get(b"k3") == b"v3"


def test_batch_against_model(db, rnd):
    model = {}
    for _ in range(30):
        staged = dict(model)
        with db.write_batch(transaction=True) as wb:
            for _ in range(rnd.randrange(1, 60)):
                k = b"%03d" % rnd.randrange(200)
                if rnd.random() < 0.7:
                    v = rnd.randbytes(rnd.randrange(50))
                    wb.put(k, v)
                    staged[k] = v
                else:
                    wb.delete(k)
                    staged.pop(k, None)
        model = staged
        assert db_items(db) == sorted(model.items())


def test_batch_types(db):
    wb = db.write_batch()
    with pytest.raises(TypeError):
        wb.put("k", b"v")
    with pytest.raises(TypeError):
        wb.put(b"k", "v")
    with pytest.raises(TypeError):
        wb.delete("k")


def test_batch_after_close(db_path):
    d = kv.DB(db_path, create_if_missing=True)
    wb = d.write_batch()
    wb.put(b"k", b"v")
    d.close()
    with pytest.raises((RuntimeError, kv.Error)):
        wb.put(b"k2", b"v")
    with pytest.raises((RuntimeError, kv.Error)):
        wb.write()
    del wb
