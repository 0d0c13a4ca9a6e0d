"""iterator() with every argument, the cursor moves (next, prev, seek,
seek_to_start, seek_to_stop), raw_iterator(), snapshots and prefixed_db(),
each against a dict model."""

import itertools

import pytest

import kv
from conftest import db_items, model_items

KEYS = [b"", b"\x00", b"\x00\x00", b"a", b"a\x00", b"aa", b"ab", b"abc", b"abd", b"b",
        b"b\xff", b"ba", b"bb", b"c", b"cz", b"\xfe", b"\xff", b"\xff\xff"]
# Bounds: present keys, absent keys between them, and keys past either end.
BOUNDS = [None, b"", b"\x00", b"a", b"a\x00\x00", b"ab", b"abc\x00", b"b", b"b\xff\xff", b"cz",
          b"d", b"\xff", b"\xff\xff\xff"]


@pytest.fixture(params=["memtable", "tables"])
def filled(request, db_path):
    """A database holding KEYS, in the memtable or in tables of several
    levels with some keys overwritten and deleted above them."""
    d = kv.DB(db_path, create_if_missing=True)
    model = {}
    for i, k in enumerate(KEYS):
        model[k] = b"v%d" % i
        d.put(k, model[k])
    if request.param == "tables":
        d.compact_range()
        for k in KEYS[::3]:
            model[k] = b"new " + k
            d.put(k, model[k])
        d.put(b"gone", b"x")
        d.get_property(b"kv.stats")
        d.compact_range(start=b"a", stop=b"b")
        d.delete(b"gone")
        for k in KEYS[1::5]:
            d.delete(k)
            del model[k]
    yield d, model
    d.close()


def shaped(items, include_key, include_value):
    if include_key and include_value:
        return items
    if include_key:
        return [k for k, _ in items]
    if include_value:
        return [v for _, v in items]
    return [None] * len(items)


def test_plain_iteration(filled):
    d, model = filled
    assert list(d) == sorted(model.items())
    assert list(d.iterator()) == sorted(model.items())
    assert list(d.iterator(reverse=True)) == sorted(model.items(), reverse=True)


@pytest.mark.parametrize("reverse", [False, True])
def test_every_range(filled, reverse):
    d, model = filled
    for start, stop in itertools.product(BOUNDS, BOUNDS):
        for inc_start, inc_stop in itertools.product([False, True], repeat=2):
            want = model_items(model, start, stop, inc_start, inc_stop, reverse=reverse)
            got = list(d.iterator(reverse=reverse, start=start, stop=stop,
                                  include_start=inc_start, include_stop=inc_stop))
            assert got == want, (start, stop, inc_start, inc_stop)


@pytest.mark.parametrize("reverse", [False, True])
def test_every_prefix(filled, reverse):
    d, model = filled
    for prefix in [b"", b"\x00", b"a", b"a\x00", b"ab", b"abc", b"b", b"\xff", b"\xff\xff",
                   b"q"]:
        # include_start and include_stop are ignored with a prefix.
        for inc in (False, True):
            got = list(d.iterator(prefix=prefix, reverse=reverse, include_start=inc,
                                  include_stop=inc))
            assert got == model_items(model, prefix=prefix, reverse=reverse), prefix


def test_prefix_with_start_or_stop_is_refused(db):
    with pytest.raises(TypeError):
        db.iterator(prefix=b"a", start=b"a")
    with pytest.raises(TypeError):
        db.iterator(prefix=b"a", stop=b"b")


def test_include_key_and_value(filled):
    d, model = filled
    for include_key, include_value in itertools.product([False, True], repeat=2):
        for reverse in (False, True):
            it = d.iterator(include_key=include_key, include_value=include_value,
                            reverse=reverse, start=b"a", stop=b"c", fill_cache=False)
            want = model_items(model, b"a", b"c", reverse=reverse)
            assert list(it) == shaped(want, include_key, include_value)


def test_iterator_argument_types(db):
    db.put(b"a", b"1")
    with pytest.raises(TypeError):
        db.iterator(start="a")
    with pytest.raises(TypeError):
        db.iterator(stop="a")
    with pytest.raises(TypeError):
        db.iterator(prefix="a")
    with pytest.raises(TypeError):
        db.iterator(b"a")  # keyword arguments only
    with pytest.raises(TypeError):
        db.iterator().seek("a")


class Cursor:
    """plyvel's iterator as a cursor between two entries of the in-range
    keys in ascending order; a reverse iterator swaps next and prev."""

    def __init__(self, items, reverse):
        self.items, self.reverse = items, reverse
        self.pos = len(items) if reverse else 0

    def _fwd(self):
        if self.pos == len(self.items):
            return StopIteration
        self.pos += 1
        return self.items[self.pos - 1]

    def _back(self):
        if self.pos == 0:
            return StopIteration
        self.pos -= 1
        return self.items[self.pos]

    def next(self):
        return self._back() if self.reverse else self._fwd()

    def prev(self):
        return self._fwd() if self.reverse else self._back()

    def seek_to_start(self):
        self.pos = 0

    def seek_to_stop(self):
        self.pos = len(self.items)

    def seek(self, target):
        self.pos = sum(1 for k, _ in self.items if k < target)


def step(it, op):
    try:
        return op(it)
    except StopIteration:
        return StopIteration


def random_walk(rnd, it, cursor, seeks, moves=300):
    for _ in range(moves):
        r = rnd.random()
        if r < 0.4:
            assert step(it, next) == cursor.next()
        elif r < 0.8:
            assert step(it, lambda i: i.prev()) == cursor.prev()
        elif r < 0.85:
            it.seek_to_start()
            cursor.seek_to_start()
        elif r < 0.9:
            it.seek_to_stop()
            cursor.seek_to_stop()
        elif seeks:
            target = rnd.choice(KEYS + BOUNDS[1:])
            it.seek(target)
            cursor.seek(target)


@pytest.mark.parametrize("reverse", [False, True])
def test_cursor_moves_unbounded(filled, rnd, reverse):
    d, model = filled
    for _ in range(5):
        it = d.iterator(reverse=reverse)
        random_walk(rnd, it, Cursor(sorted(model.items()), reverse), seeks=True)


@pytest.mark.parametrize("reverse", [False, True])
def test_cursor_moves_bounded(filled, rnd, reverse):
    d, model = filled
    for start, stop in [(b"a", b"b"), (b"a\x00\x00", b"cz"), (b"\x00", b"\xff"), (b"b", None),
                        (None, b"ab")]:
        it = d.iterator(reverse=reverse, start=start, stop=stop)
        random_walk(rnd, it, Cursor(model_items(model, start, stop), reverse), seeks=False)


def test_next_prev_return_the_same_entry(filled):
    d, model = filled
    items = sorted(model.items())
    it = d.iterator()
    assert next(it) == items[0]
    assert next(it) == items[1]
    assert it.prev() == items[1]
    assert it.prev() == items[0]
    with pytest.raises(StopIteration):
        it.prev()
    assert next(it) == items[0]
    it.seek_to_stop()
    with pytest.raises(StopIteration):
        next(it)
    assert it.prev() == items[-1]
    it.seek(b"abc")
    assert next(it) == (b"abc", model[b"abc"])
    it.seek(b"\xff\xff\xff")
    with pytest.raises(StopIteration):
        next(it)


def test_iterator_sees_its_creation_time(db):
    for k in (b"a", b"b", b"c"):
        db.put(k, b"old")
    it = db.iterator()
    db.put(b"b", b"new")
    db.put(b"bb", b"added")
    db.delete(b"c")
    assert list(it) == [(b"a", b"old"), (b"b", b"old"), (b"c", b"old")]
    assert list(db.iterator()) == [(b"a", b"old"), (b"b", b"new"), (b"bb", b"added")]


def test_iterator_close_and_context_manager(db):
    db.put(b"a", b"1")
    db.put(b"b", b"2")
    with db.iterator() as it:
        assert next(it) == (b"a", b"1")
    with pytest.raises((RuntimeError, kv.Error)):
        next(it)
    it.close()  # twice is fine
    it = db.iterator()
    it.close()
    with pytest.raises((RuntimeError, kv.Error)):
        it.prev()
    with pytest.raises((RuntimeError, kv.Error)):
        it.seek(b"a")


def test_raw_iterator(filled):
    d, model = filled
    items = sorted(model.items())
    it = d.raw_iterator()
    assert not it.valid()
    with pytest.raises(kv.IteratorInvalidError):
        it.key()
    with pytest.raises(kv.IteratorInvalidError):
        it.value()
    with pytest.raises(kv.IteratorInvalidError):
        it.next()
    with pytest.raises(kv.IteratorInvalidError):
        it.prev()
    it.seek_to_first()
    got = []
    while it.valid():
        got.append(it.item())
        assert it.key() == got[-1][0] and it.value() == got[-1][1]
        it.next()
    assert got == items
    it.seek_to_last()
    got = []
    while it.valid():
        got.append((it.key(), it.value()))
        it.prev()
    assert got == items[::-1]
    for target in BOUNDS[1:] + KEYS:
        it.seek(target)
        after = [kv_ for kv_ in items if kv_[0] >= target]
        if after:
            assert it.valid() and it.item() == after[0]
        else:
            assert not it.valid()
    it.close()
    with pytest.raises((RuntimeError, kv.Error)):
        it.valid()
    with d.raw_iterator(fill_cache=False, verify_checksums=True) as it2:
        it2.seek_to_first()
        assert it2.valid()


def test_raw_iterator_random_walk(filled, rnd):
    d, model = filled
    items = sorted(model.items())
    it = d.raw_iterator()
    pos = None  # index into items, None when not valid
    for _ in range(500):
        r = rnd.random()
        if r < 0.1:
            it.seek_to_first()
            pos = 0 if items else None
        elif r < 0.2:
            it.seek_to_last()
            pos = len(items) - 1 if items else None
        elif r < 0.4:
            t = rnd.choice(BOUNDS[1:] + KEYS)
            it.seek(t)
            pos = next((i for i, (k, _) in enumerate(items) if k >= t), None)
        elif pos is None:
            with pytest.raises(kv.IteratorInvalidError):
                it.next() if r < 0.7 else it.prev()
        elif r < 0.7:
            it.next()
            pos = pos + 1 if pos + 1 < len(items) else None
        else:
            it.prev()
            pos = pos - 1 if pos > 0 else None
        assert it.valid() == (pos is not None)
        if pos is not None:
            assert it.item() == items[pos]


def test_snapshot(db):
    model = {b"%03d" % i: b"old%d" % i for i in range(200)}
    for k, v in model.items():
        db.put(k, v)
    sn = db.snapshot()
    for i in range(0, 200, 2):
        db.put(b"%03d" % i, b"new")
    db.delete(b"001")
    db.put(b"zzz", b"late")
    db.compact_range()  # compaction keeps what the snapshot sees
    assert sn.get(b"000") == b"old0"
    assert sn.get(b"001") == b"old1"
    assert sn.get(b"zzz") is None
    assert sn.get(b"zzz", b"dflt") == b"dflt"
    assert list(sn) == sorted(model.items())
    assert list(sn.iterator(start=b"010", stop=b"020", reverse=True)) == \
        model_items(model, b"010", b"020", reverse=True)
    assert list(sn.iterator(prefix=b"19", include_value=False)) == \
        [b"19%d" % i for i in range(10)]
    raw = sn.raw_iterator()
    raw.seek(b"001")
    assert raw.item() == (b"001", b"old1")
    raw.close()
    assert db.get(b"000") == b"new"
    assert db.get(b"001") is None
    sn.close()
    sn.close()
    with pytest.raises((RuntimeError, kv.Error)):
        sn.get(b"000")


def test_snapshot_context_manager_and_release(db):
    db.put(b"k", b"1")
    with db.snapshot() as sn:
        db.put(b"k", b"2")
        assert sn.get(b"k") == b"1"
    sn2 = db.snapshot()
    sn2.release()
    assert db.get(b"k") == b"2"


def test_prefixed_db(db):
    pdb = db.prefixed_db(b"p/")
    assert pdb.prefix == b"p/"
    assert pdb.db is db
    db.put(b"o", b"outside before")
    db.put(b"q", b"outside after")
    db.put(b"p", b"the prefix less its slash")
    model = {}
    for i in range(50):
        k = b"%02d" % i
        pdb.put(k, b"v%d" % i)
        model[k] = b"v%d" % i
    pdb.delete(b"13")
    del model[b"13"]
    assert db.get(b"p/00") == b"v0"
    assert pdb.get(b"00") == b"v0"
    assert pdb.get(b"13") is None
    assert pdb.get(b"13", b"d") == b"d"
    assert list(pdb) == sorted(model.items())
    for reverse in (False, True):
        for start, stop in [(None, None), (b"10", b"20"), (b"05", None), (None, b"3")]:
            got = list(pdb.iterator(reverse=reverse, start=start, stop=stop, include_stop=True))
            assert got == model_items(model, start, stop, True, True, reverse=reverse)
        assert list(pdb.iterator(prefix=b"2", reverse=reverse)) == \
            model_items(model, prefix=b"2", reverse=reverse)
    assert list(pdb.iterator(include_value=False))[:2] == [b"00", b"01"]
    with pdb.write_batch() as wb:
        wb.put(b"99", b"batch")
        wb.delete(b"00")
    assert db.get(b"p/99") == b"batch" and db.get(b"p/00") is None
    sn = pdb.snapshot()
    pdb.put(b"98", b"after")
    assert sn.get(b"99") == b"batch"
    assert sn.get(b"98") is None
    inner = pdb.prefixed_db(b"x/")
    inner.put(b"k", b"nested")
    assert db.get(b"p/x/k") == b"nested"
    assert inner.prefix == b"p/x/"
    assert list(inner) == [(b"k", b"nested")]
    with pytest.raises(TypeError):
        db.prefixed_db("p/")


def test_prefixed_db_with_ff_prefix(db):
    pdb = db.prefixed_db(b"\xff")
    pdb.put(b"\xff", b"a")
    pdb.put(b"a", b"b")
    db.put(b"\xfe", b"before")
    assert list(pdb) == [(b"a", b"b"), (b"\xff", b"a")]
    assert list(pdb.iterator(reverse=True, include_value=False)) == [b"\xff", b"a"]


def test_db_items_helper_matches_iteration(db):
    db.put(b"x", b"1")
    assert db_items(db) == [(b"x", b"1")]
