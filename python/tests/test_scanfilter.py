"""Filters that gate scans through the binding: prefix_len and
range_filter_bits as kv.DB options. Bounded and prefix iterators over
tables written under different settings read exactly what a dict holds;
stats() counts range queries; values out of range and a comparator with
either are refused."""

import pytest

import kv
from conftest import db_items, model_items


def device_key(d, t):
    return b"%08d%08d" % (d, t)


def test_bounded_and_prefix_iterators_match_model(db_path, rnd):
    model = {}
    settings = [(8, 16.0), (4, 8.0), (0, 0.0), (8, 4.0)]
    for prefix_len, bits in settings:  # tables of each setting live side by side
        with kv.DB(db_path, create_if_missing=True, prefix_len=prefix_len,
                   range_filter_bits=bits, write_buffer_size=64 << 10,
                   target_file_size=64 << 10) as d:
            for _ in range(3000):
                k = device_key(rnd.randrange(0, 400, 2), rnd.randrange(1000))
                if rnd.random() < 0.1:
                    d.delete(k)
                    model.pop(k, None)
                else:
                    model[k] = b"v%d" % rnd.randrange(10**9)
                    d.put(k, model[k])
            d.compact_range(start=device_key(100, 0), stop=device_key(200, 0))
    with kv.DB(db_path, prefix_len=8, range_filter_bits=16) as d:
        assert db_items(d) == model_items(model)
        for _ in range(200):
            dev = rnd.randrange(400)  # odd devices are absent
            p = b"%08d" % dev
            assert list(d.iterator(prefix=p)) == model_items(model, prefix=p)
            lo, hi = device_key(dev, rnd.randrange(1000)), device_key(dev, rnd.randrange(1000))
            lo, hi = min(lo, hi), max(lo, hi)
            assert list(d.iterator(start=lo, stop=hi)) == model_items(model, lo, hi)
            assert (list(d.iterator(start=lo, stop=hi, reverse=True))
                    == model_items(model, lo, hi, reverse=True))
        s = d.stats()
        assert s["range_filter_skips"] + s["prefix_filter_skips"] <= s["range_tables_checked"]
        # half the devices are absent: their ranges and prefixes skip tables
        assert s["range_queries"] > 0
        assert s["range_filter_skips"] + s["prefix_filter_skips"] > 0


@pytest.mark.parametrize("options", [
    {"range_filter_bits": 2.0}, {"range_filter_bits": 65.0}, {"range_filter_bits": -1.0},
    {"prefix_len": 4, "bloom_bits_per_key": 0}, {"prefix_len": 65537},
])
def test_option_values_refused(db_path, options):
    with pytest.raises(kv.Error):
        kv.DB(db_path, create_if_missing=True, **options)


def test_refused_with_a_comparator(db_path):
    def reverse_cmp(a, b):
        return (a < b) - (a > b)

    for options in ({"prefix_len": 4}, {"range_filter_bits": 16.0}):
        with pytest.raises(kv.Error):
            kv.DB(db_path, create_if_missing=True, comparator=reverse_cmp,
                  comparator_name=b"ReverseBytewise", **options)
    with kv.DB(db_path, create_if_missing=True, comparator=reverse_cmp,
               comparator_name=b"ReverseBytewise") as d:
        d.put(b"a", b"1")
        d.put(b"b", b"2")
        assert db_items(d) == [(b"b", b"2"), (b"a", b"1")]
