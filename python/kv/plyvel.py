"""plyvel's names on kv: `import kv.plyvel as plyvel` in place of
`import plyvel`.

The database is kv's, not LevelDB's: the files differ, and what plyvel's
options mean maps onto kv's options (doc/python.md). compression='snappy'
(plyvel's default) is kv's zstd; paranoid_checks and
block_restart_interval are accepted and ignored (kv checks every block it
reads, and its blocks restart every 8 keys). Unlike plyvel, a database has
Bloom filters unless bloom_filter_bits=0 says otherwise (kv's default, 10
bits per key). Keys are at most kv.MAX_KEY_SIZE (64 KiB) bytes.
"""

from . import (DB, CorruptionError, Error, IOError, IteratorInvalidError, Iterator, PrefixedDB,
               RawIterator, Snapshot, WriteBatch, destroy_db, repair_db)
from . import __version__

# The LevelDB version whose API this speaks (plyvel 1.5 is built on 1.23).
__leveldb_version__ = "1.23"

__all__ = ["DB", "WriteBatch", "Snapshot", "Iterator", "RawIterator", "PrefixedDB", "Error",
           "IOError", "CorruptionError", "IteratorInvalidError", "destroy_db", "repair_db",
           "__leveldb_version__", "__version__"]
