/* leveldb/export.h - LEVELDB_EXPORT for kv's LevelDB C API (libkv_leveldb).
 *
 * <leveldb/c.h> marks each function with LEVELDB_EXPORT, as LevelDB's own
 * header does. libkv_leveldb is built with hidden visibility, so the mark
 * is what makes a function part of the library's interface; in a program
 * that includes the header it changes nothing. A program may define
 * LEVELDB_EXPORT itself before the include. */
#ifndef KV_LEVELDB_EXPORT_H
#define KV_LEVELDB_EXPORT_H

#if !defined(LEVELDB_EXPORT)
#  if defined(_WIN32)
#    define LEVELDB_EXPORT
#  elif defined(__GNUC__) && __GNUC__ >= 4
#    define LEVELDB_EXPORT __attribute__((visibility("default")))
#  else
#    define LEVELDB_EXPORT
#  endif
#endif

#endif /* KV_LEVELDB_EXPORT_H */
