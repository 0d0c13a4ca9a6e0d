"""kv: an LSM key-value store with a Bloom filter per table, from Python.

The API is plyvel's (DB, WriteBatch, Snapshot, Iterator, RawIterator,
PrefixedDB), on kv's engine, plus what only kv has: multi_get, explain,
stats, table_stats, metrics, delete_range, merge, checkpoint, read-only
handles (read_only=True, catch_up), ingest and TableWriter. See
doc/python.md.
"""

import atexit as _atexit
import weakref as _weakref

from . import _kv
from ._kv import (MAX_KEY_SIZE, MAX_VALUE_SIZE, CorruptionError, Error, IOError,
                  IteratorInvalidError, Iterator, RawIterator, Snapshot, TableWriter, WriteBatch,
                  destroy_db, repair_db)

__all__ = ["DB", "PrefixedDB", "WriteBatch", "Snapshot", "Iterator", "RawIterator", "TableWriter",
           "Error", "IOError", "CorruptionError", "IteratorInvalidError", "destroy_db",
           "repair_db", "MAX_KEY_SIZE", "MAX_VALUE_SIZE", "__version__"]

__version__ = "0.1.0"

# Databases still open when the interpreter exits are closed first, while
# Python is whole: a comparator or merge operator written in Python may be
# running on kv's background thread, which needs the interpreter.
_open = _weakref.WeakSet()


@_atexit.register
def _close_all():
    for db in list(_open):
        try:
            db.close()
        except Exception:
            pass


class DB(_kv.DB):
    """DB(name, create_if_missing=False, error_if_exists=False, **options)

    Opens (or creates) the kv database in directory name. The options are
    plyvel's (bloom_filter_bits, lru_cache_size, write_buffer_size,
    max_open_files, block_size, compression, comparator and
    comparator_name, ...) and kv_options' own names (bloom_bits_per_key,
    min_blob_size, ttl_seconds, read_only, merge_operator, ...).
    """

    __slots__ = ()

    def __init__(self, name, **options):
        super().__init__(name, **options)
        _open.add(self)

    def prefixed_db(self, prefix):
        """A view of the keys that start with prefix, the prefix left off."""
        return PrefixedDB(self, prefix)

    def __contains__(self, key):
        # Iterating would answer it, slowly and with (key, value) pairs:
        # refused, as plyvel does since 1.5.1.
        raise TypeError("__contains__ is not supported: use get(key) is not None")


class PrefixedDB:
    """A view of a DB's keys that start with prefix (DB.prefixed_db): every
    key given or returned is relative to it."""

    __slots__ = ("db", "prefix")

    def __init__(self, db, prefix):
        if not isinstance(prefix, bytes):
            raise TypeError("prefix must be bytes")
        self.db = db
        self.prefix = prefix

    def __repr__(self):
        return "<kv.PrefixedDB with prefix %r at 0x%x>" % (self.prefix, id(self))

    def _key(self, key):
        if not isinstance(key, bytes):
            raise TypeError("key must be bytes, not %s" % type(key).__name__)
        return self.prefix + key

    def get(self, key, default=None, **kwargs):
        return self.db.get(self._key(key), default, **kwargs)

    def put(self, key, value, *, sync=False):
        return self.db.put(self._key(key), value, sync=sync)

    def delete(self, key, *, sync=False):
        return self.db.delete(self._key(key), sync=sync)

    def merge(self, key, value, *, sync=False):
        return self.db.merge(self._key(key), value, sync=sync)

    def delete_range(self, start, stop, *, sync=False):
        return self.db.delete_range(self._key(start), self._key(stop), sync=sync)

    def multi_get(self, keys):
        return self.db.multi_get([self._key(k) for k in keys])

    def write_batch(self, *, transaction=False, sync=False):
        return self.db.write_batch(transaction=transaction, sync=sync, prefix=self.prefix)

    def __iter__(self):
        return self.iterator()

    def iterator(self, **kwargs):
        return self.db.iterator(_db_prefix=self.prefix, **kwargs)

    def snapshot(self):
        return self.db.snapshot(prefix=self.prefix)

    def prefixed_db(self, prefix):
        return PrefixedDB(self.db, self.prefix + prefix)

    def __contains__(self, key):
        raise TypeError("__contains__ is not supported: use get(key) is not None")
