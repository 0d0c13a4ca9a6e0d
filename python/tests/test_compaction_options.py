"""Issue 54's options through kv.DB: compaction_style ('leveled' or
'lazy_leveled'), runs_per_level, max_background_jobs and
table_memory_budget reach kv_options (kv_stats.background_jobs echoes the
jobs), bad values are refused before anything is written, and the data
reads back the same under either style."""

import os

import pytest

import kv
from conftest import db_items


def fill(d, n, salt=b""):
    for i in range(n):
        d.put(b"key%06d" % i, b"value-%06d-" % i + salt * 8)


@pytest.mark.parametrize("style", ["leveled", "lazy_leveled", b"lazy_leveled"])
def test_styles_read_back_the_same(db_path, style):
    with kv.DB(db_path, create_if_missing=True, write_buffer_size=64 * 1024,
               compaction_style=style, runs_per_level=3, max_background_jobs=2,
               table_memory_budget=1 << 20) as d:
        fill(d, 3000, b"a")
        fill(d, 3000, b"b")  # every key rewritten: flushes and compactions
        d.compact_range()
        assert d.get(b"key000042") == b"value-000042-" + b"b" * 8
        assert len(db_items(d)) == 3000
        s = d.stats()
        assert s["background_jobs"] == 2
        assert len(s["level_runs"]) == 7
        assert len(s["level_write_amp"]) == 7


def test_style_may_change_between_opens(db_path):
    with kv.DB(db_path, create_if_missing=True, write_buffer_size=64 * 1024,
               compaction_style="lazy_leveled") as d:
        fill(d, 2000)
    with kv.DB(db_path, compaction_style="leveled", max_background_jobs=1) as d:
        assert len(db_items(d)) == 2000
        assert d.stats()["background_jobs"] == 1


def test_style_by_number(db_path):
    # The enum values (KV_COMPACTION_LEVELED 0, _LAZY_LEVELED 1) work too.
    with kv.DB(db_path, create_if_missing=True, compaction_style=1) as d:
        d.put(b"k", b"v")
        assert d.get(b"k") == b"v"


@pytest.mark.parametrize("options", [
    {"compaction_style": "tiered"},
    {"compaction_style": 7},
    {"compaction_style": 1.5},
    {"runs_per_level": 1},
    {"runs_per_level": 33},
    {"max_background_jobs": 0},
    {"max_background_jobs": 65},
    {"table_memory_budget": -1},
])
def test_bad_values_refused(db_path, options):
    with pytest.raises((TypeError, ValueError, OverflowError, kv.Error)):
        kv.DB(db_path, create_if_missing=True, **options)
    assert not os.path.exists(os.path.join(db_path, "MANIFEST"))
