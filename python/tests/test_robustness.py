"""Damaged tables, closing with live objects, threads against a model,
reference cycles and leaks, and the filters' measured false-positive rate."""

import gc
import glob
import os
import threading

import pytest

import kv
from conftest import db_items


def sst_files(path):
    return sorted(glob.glob(os.path.join(path, "*.sst")))


def test_damaged_table_is_corruption_never_wrong_data(db_path, rnd):
    model = {b"%06d" % i: b"value %d " % i + rnd.randbytes(40) for i in range(20000)}
    with kv.DB(db_path, create_if_missing=True, compression=None) as d:
        for k, v in model.items():
            d.put(k, v)
        d.compact_range()
    [sst] = sst_files(db_path)
    size = os.path.getsize(sst)
    with open(sst, "r+b") as f:
        # Bytes inside data blocks (the first half of the file holds data
        # blocks only: the index, filter and footer come after them).
        for off in sorted(rnd.sample(range(size // 10, size // 2), 8)):
            f.seek(off)
            b = f.read(1)
            f.seek(off)
            f.write(bytes([b[0] ^ 0x5A]))
    with kv.DB(db_path) as d:
        corrupt = 0
        for k, v in model.items():
            try:
                got = d.get(k)
            except kv.CorruptionError:
                corrupt += 1
                continue
            assert got == v
        assert corrupt > 0
        # multi_get: the damaged keys raise, or answer right.
        keys = list(model)[:5000]
        try:
            assert d.multi_get(keys) == [model[k] for k in keys]
        except kv.CorruptionError:
            pass
        # An iteration yields right pairs, in order, up to the damage.
        seen = []
        with pytest.raises(kv.CorruptionError):
            for k, v in d.iterator():
                seen.append((k, v))
        assert seen == sorted(model.items())[:len(seen)]
        # A raw iterator reports the damage as well.
        with pytest.raises(kv.CorruptionError):
            it = d.raw_iterator()
            it.seek_to_first()
            while it.valid():
                assert it.value() == model[it.key()]
                it.next()
        # The error names the file.
        try:
            for k in model:
                d.get(k)
        except kv.CorruptionError as e:
            assert ".sst" in str(e)


def test_damaged_manifest_is_corruption(db_path):
    with kv.DB(db_path, create_if_missing=True) as d:
        d.put(b"k", b"v")
        d.compact_range()
    with open(os.path.join(db_path, "MANIFEST"), "r+b") as f:
        f.write(b"\xde\xad\xbe\xef" * 8)
    with pytest.raises(kv.Error):
        kv.DB(db_path)


def test_missing_table_is_corruption(db_path):
    with kv.DB(db_path, create_if_missing=True) as d:
        d.put(b"k", b"v")
        d.compact_range()
    for f in sst_files(db_path):
        os.remove(f)
    with pytest.raises(kv.CorruptionError):
        kv.DB(db_path)


def test_read_only_dir_is_io_error(tmp_path):
    # kv refuses a writer on a directory whose mode has no write bit, root
    # included (root could write there, but the mode says not to).
    path = tmp_path / "ro"
    path.mkdir()
    path.chmod(0o500)
    try:
        with pytest.raises(kv.IOError):
            kv.DB(str(path), create_if_missing=True)
        assert not os.listdir(path)  # nothing was created there
    finally:
        path.chmod(0o700)


def test_close_with_live_objects(db_path):
    d = kv.DB(db_path, create_if_missing=True)
    for i in range(100):
        d.put(b"%03d" % i, b"v")
    it = d.iterator()
    next(it)
    it_rev = d.iterator(reverse=True)
    raw = d.raw_iterator()
    raw.seek_to_first()
    sn = d.snapshot()
    sn_it = sn.iterator()
    sn_raw = sn.raw_iterator()
    wb = d.write_batch()
    wb.put(b"x", b"y")
    pdb = d.prefixed_db(b"0")
    d.close()
    assert d.closed
    closed = (RuntimeError, kv.Error)
    for fn in (lambda: next(it), lambda: it.prev(), lambda: next(it_rev), raw.valid, raw.key,
               raw.next, lambda: sn.get(b"000"), lambda: next(sn_it), sn_raw.seek_to_first,
               wb.write, lambda: pdb.get(b"00"), lambda: pdb.put(b"00", b"v"), d.snapshot,
               d.iterator, lambda: d.multi_get([b"000"]), d.stats, d.table_stats, d.metrics,
               lambda: d.explain(b"000"), d.compact_range, lambda: d.get_property(b"kv.stats")):
        with pytest.raises(closed):
            fn()
    # Closing the children afterwards, and dropping them, is harmless.
    it.close()
    sn.close()
    raw.close()
    del it, it_rev, raw, sn, sn_it, sn_raw, wb, pdb
    gc.collect()
    with kv.DB(db_path) as d2:  # the lock was released
        assert len(db_items(d2)) == 100


def test_objects_keep_their_database_alive(db_path):
    def make():
        d = kv.DB(db_path, create_if_missing=True)
        for i in range(10):
            d.put(b"%d" % i, b"v")
        return d.iterator(include_value=False), d.snapshot()

    it, sn = make()
    gc.collect()
    assert list(it) == [b"%d" % i for i in range(10)]
    assert sn.get(b"3") == b"v"
    with pytest.raises(kv.Error):
        kv.DB(db_path)  # still open: the objects hold it
    del it, sn
    gc.collect()
    kv.DB(db_path).close()


def test_close_while_threads_iterate(db_path):
    d = kv.DB(db_path, create_if_missing=True)
    for i in range(20000):
        d.put(b"%06d" % i, b"v" * 20)
    errors, counts = [], []

    def reader():
        n = 0
        try:
            while True:
                for _ in d.iterator():
                    n += 1
                d.get(b"000001")
        except (RuntimeError, kv.Error) as e:
            errors.append(e)
        counts.append(n)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    while sum(1 for t in threads if t.is_alive()) == 3 and not errors:
        if d.stats()["gets"] > 3:
            break
    d.close()
    for t in threads:
        t.join(60)
        assert not t.is_alive()
    assert len(errors) == 3


def test_threads_against_model(db_path):
    d = kv.DB(db_path, create_if_missing=True, write_buffer_size=64 * 1024)
    nthreads, ops = 4, 3000
    models = [dict() for _ in range(nthreads)]
    failures = []
    shared = {b"shared%04d" % i: b"s%d" % i for i in range(500)}
    for k, v in shared.items():
        d.put(k, v)

    def writer(t):
        import random
        r = random.Random(t)
        m = models[t]
        try:
            for i in range(ops):
                k = b"t%d-%04d" % (t, r.randrange(400))
                x = r.random()
                if x < 0.5:
                    v = r.randbytes(r.randrange(100))
                    d.put(k, v)
                    m[k] = v
                elif x < 0.6:
                    d.delete(k)
                    m.pop(k, None)
                elif x < 0.7:
                    with d.write_batch(transaction=True) as wb:
                        for j in range(5):
                            bk = b"t%d-%04d" % (t, r.randrange(400))
                            wb.put(bk, b"batch")
                            m[bk] = b"batch"
                elif x < 0.9:
                    if d.get(k) != m.get(k):
                        failures.append(("get", k))
                    sk = b"shared%04d" % r.randrange(500)
                    if d.get(sk) != shared[sk]:
                        failures.append(("shared", sk))
                else:
                    prefix = b"t%d-" % t
                    if list(d.iterator(prefix=prefix)) != sorted(m.items()):
                        failures.append(("iter", t))
        except Exception as e:  # reported below, with the thread's number
            failures.append((t, repr(e)))

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(nthreads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    want = dict(shared)
    for m in models:
        want.update(m)
    assert db_items(d) == sorted(want.items())
    d.close()
    with kv.DB(db_path) as d:
        assert db_items(d) == sorted(want.items())


def test_multi_get_and_explain_from_threads(db):
    for i in range(5000):
        db.put(b"%05d" % i, b"v%d" % i)
    db.compact_range()
    failures = []

    def work(t):
        for j in range(50):
            keys = [b"%05d" % ((t * 997 + j * 31 + i) % 6000) for i in range(64)]
            want = [b"v%d" % int(k) if int(k) < 5000 else None for k in keys]
            if db.multi_get(keys) != want:
                failures.append(t)
            if db.explain(keys[0])["value"] != want[0]:
                failures.append(t)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_reference_cycles_are_collected(db_path):
    d = kv.DB(db_path, create_if_missing=True)
    d.put(b"k", b"v")
    it = d.iterator()
    sn = d.snapshot()
    cycle = [d, it, sn, d.prefixed_db(b"p"), d.write_batch()]
    cycle.append(cycle)
    del d, it, sn, cycle
    gc.collect()
    with kv.DB(db_path) as d2:  # the first handle was freed, its lock released
        assert d2.get(b"k") == b"v"


def test_cycle_through_a_merge_operator_is_collected(db_path):
    holder = {}

    def op(key, existing, operands):
        holder["db"]  # the operator refers to the database: a cycle
        return (existing or b"") + b"".join(operands)

    d = kv.DB(db_path, create_if_missing=True, merge_operator=op, merge_operator_name="cat")
    holder["db"] = d
    holder["op"] = op
    d.merge(b"k", b"a")
    assert d.get(b"k") == b"a"
    del d, op, holder
    gc.collect()
    d = kv.DB(db_path, merge_operator=lambda k, e, o: (e or b"") + b"".join(o),
              merge_operator_name="cat")
    assert d.get(b"k") == b"a"
    d.close()


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_open_iterate_close_loop_keeps_rss_flat(tmp_path):
    path = str(tmp_path / "loop")
    value = b"x" * 100

    def once(i):
        d = kv.DB(path, create_if_missing=True)
        for j in range(200):
            d.put(b"%05d" % j, value)
        with d.write_batch() as wb:
            wb.put(b"batch", value)
        assert sum(1 for _ in d.iterator()) == 201
        sn = d.snapshot()
        sn.get(b"00001")
        raw = d.raw_iterator()
        raw.seek(b"00100")
        d.multi_get([b"00001", b"missing"])
        d.explain(b"00002")
        d.stats()
        d.table_stats()
        d.metrics()
        if i % 10 == 0:
            d.compact_range()
        it = d.iterator(reverse=True)
        next(it)
        d.close()  # with the snapshot and iterators still alive

    for i in range(40):  # warm up: caches, allocator arenas
        once(i)
    gc.collect()
    before = rss_bytes()
    for i in range(400):
        once(i)
    gc.collect()
    grown = rss_bytes() - before
    # 400 loops each open a database and allocate well over 100 KiB; a leak
    # of one handle, snapshot or iterator per loop would show as many MiB.
    assert grown < 16 << 20, "RSS grew by %d KiB over 400 loops" % (grown >> 10)


def test_calls_do_not_leak(db):
    for i in range(1000):
        db.put(b"%04d" % i, b"v" * 50)
    db.compact_range()
    keys = [b"%04d" % i for i in range(1200)]

    def loop():
        for k in keys:
            db.get(k)
            db.get(k, b"default")
        db.multi_get(keys)
        for _ in db.iterator(start=b"0100", stop=b"0200"):
            pass
        try:
            db.get("str key")
        except TypeError:
            pass

    for _ in range(20):
        loop()
    gc.collect()
    before = rss_bytes()
    for _ in range(200):
        loop()
    gc.collect()
    grown = rss_bytes() - before
    assert grown < 8 << 20, "RSS grew by %d KiB" % (grown >> 10)


@pytest.mark.parametrize("bits", [5, 10])
def test_measured_fpr_near_expected(db_path, bits):
    d = kv.DB(db_path, create_if_missing=True, bloom_bits_per_key=bits)
    n = 20000
    for i in range(n):
        d.put(b"key%07d" % (2 * i), b"v")
    d.compact_range()
    probes = 40000
    for i in range(probes):
        assert d.get(b"key%07d" % (2 * (i % n) + 1)) is None  # missing, inside the range
    tables = d.table_stats()
    asked = 0
    for t in tables:
        answers = t["filter_negatives"] + t["filter_false_positives"]
        asked += answers
        if answers < 5000:
            continue
        p = t["expected_fpr"]
        sigma = (p * (1 - p) / answers) ** 0.5
        assert abs(t["measured_fpr"] - p) < 5 * sigma + 0.25 * p, t
        assert t["measured_fpr"] == pytest.approx(t["filter_false_positives"] / answers)
    assert asked >= probes - 2 * (probes // n)  # the last odd key lies past every table
    d.close()
