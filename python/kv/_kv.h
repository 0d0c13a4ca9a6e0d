/* _kv.h - what the files of the extension kv._kv share: the objects, the
 * error mapping and the rule for leaving the GIL.
 *
 * The rule: every call into kv that may touch the disk, wait for a lock or
 * call back into Python (a comparator or merge operator running on kv's
 * background thread takes the GIL) is made with the GIL released. While it
 * runs, the calling object counts it in `busy` (and the database in its own
 * `busy`): close() marks the object closed, so no new call starts, then
 * waits with the GIL released until `busy` is 0 before it frees anything.
 * So closing a database, a snapshot or an iterator while another thread is
 * inside it is safe, never a use after free. A get, the shortest and most
 * frequent call, leaves the GIL through kvpy_leave/kvpy_return (below). */
#ifndef KV_PY_KV_H
#define KV_PY_KV_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <kv/kv.h>

/* A Python callable that kv calls: a comparator or a merge operator. exc
 * holds the first exception it raised that no call has reported yet. */
typedef struct kvpy_callback {
    kv_comparator cmp;
    kv_merge_operator merge;
    PyObject *fn;
    PyObject *exc;
    char *name;
} kvpy_callback;

/* Objects that point into a database (iterators, snapshots) are linked to
 * it, so that closing it closes them first. */
typedef struct kvpy_child {
    PyObject_HEAD struct kvpy_child *prev, *next;
    int kind; /* KVPY_ITER, KVPY_SNAPSHOT */
} kvpy_child;

enum { KVPY_ITER = 1, KVPY_SNAPSHOT = 2 };

typedef struct {
    PyObject_HEAD kv_db *db; /* NULL once closed */
    PyObject *name;          /* as given */
    PyObject *weakrefs;
    kvpy_child children; /* list head (never a Python object itself) */
    long busy;           /* calls in flight with the GIL released */
    int closing;
    int bytewise; /* no comparator: bounds are exact bytes */
    kvpy_callback *cmp, *merge;
} kvpy_db;

typedef struct {
    kvpy_child head;
    kvpy_db *db; /* strong reference; NULL once closed */
    kv_snapshot *snap;
    PyObject *prefix; /* bytes or NULL: a PrefixedDB's snapshot */
    long busy;
} kvpy_snapshot;

/* Short calls (a get or a put: about a microsecond) leave the GIL with
 * kvpy_leave and take it back with kvpy_return, not Py_BEGIN/END_ALLOW_
 * THREADS. CPython 3.11 gives the GIL to a thread asleep in
 * PyEval_RestoreThread only after waking it (several microseconds); by
 * then the thread that let it go, back from its short call, has taken it
 * again, so threads making short calls run one at a time and pay a wake
 * for each call. Here a thread back from kv first waits, spinning and then
 * yielding for a bounded time, while another thread of this module holds
 * the GIL (kvpy_gil_held: set by a thread once it has the GIL back, cleared
 * by one that lets it go), and asks for the GIL when it is likely free: it
 * then takes it without sleeping. The flag is a hint only: a thread that
 * holds the GIL without coming through here is not seen (the waiter
 * sleeps as before), and one that stopped calling kv while the flag was
 * set costs a waiter one bounded wait (its next kvpy_leave clears it). */
PyThreadState *kvpy_leave(void);
void kvpy_return(PyThreadState *ts);

extern PyTypeObject kvpy_db_type, kvpy_batch_type, kvpy_snapshot_type, kvpy_iter_type,
    kvpy_raw_iter_type, kvpy_tw_type;
extern PyObject *kvpy_error, *kvpy_ioerror, *kvpy_corruption, *kvpy_invalid_iter;

/* Raises the exception that kv status rc maps to (with kv_error_text, read
 * on this thread) and returns NULL. */
PyObject *kvpy_raise(int rc);
/* Raises the pending callback exception of db (if any) chained into a
 * kv.Error; returns 1 when it raised. */
int kvpy_callback_check(kvpy_db *db);
/* RuntimeError("Database is closed"), NULL. */
PyObject *kvpy_closed(void);
/* The sequence slots of a type that refuses `in`. */
extern PySequenceMethods kvpy_no_contains;

/* A key or value argument: bytes, or any contiguous buffer (a str is a
 * TypeError). kvpy_arg_release undoes what kvpy_arg_get took. */
typedef struct {
    const char *p;
    Py_ssize_t n;
    Py_buffer view;
    int has_view;
} kvpy_arg;
int kvpy_arg_get(PyObject *o, kvpy_arg *a, const char *what);
void kvpy_arg_release(kvpy_arg *a);

/* Waits, with the GIL released, until *busy is 0. */
void kvpy_wait_idle(volatile long *busy);

void kvpy_child_link(kvpy_db *db, kvpy_child *c);
void kvpy_child_unlink(kvpy_child *c);

/* Closes a snapshot or an iterator (what db.close does to each child). */
void kvpy_snapshot_close(kvpy_snapshot *s);
void kvpy_iter_close(kvpy_child *it);

/* Options: fills *o from keyword arguments (plyvel's and kv_options'
 * names); the callbacks made go to *cmp and *merge (freed with
 * kvpy_callback_free). -1 with an exception set. */
int kvpy_parse_options(PyObject *kwargs, kv_options *o, kvpy_callback **cmp, kvpy_callback **merge,
                       int *create, int *exists);
void kvpy_callback_free(kvpy_callback *cb);

/* Thread-local: 1 while this thread runs a Python callback for kv. */
extern _Thread_local int kvpy_in_callback;

/* Builds the Iterator object for a database or snapshot. */
PyObject *kvpy_iter_make(kvpy_db *db, kvpy_snapshot *snap, PyObject *db_prefix, PyObject *args,
                         PyObject *kwargs);
PyObject *kvpy_raw_iter_make(kvpy_db *db, kvpy_snapshot *snap);
PyObject *kvpy_batch_make(kvpy_db *db, PyObject *prefix, int transaction, int sync);
PyObject *kvpy_snapshot_make(kvpy_db *db, PyObject *prefix);
/* 1 when db is closed (RuntimeError set), else 0. */
static inline int kvpy_db_closed(kvpy_db *db)
{
    if (db && db->db && !db->closing)
        return 0;
    kvpy_closed();
    return 1;
}
/* Index of kwname in names (NULL-terminated), or -1 with TypeError set. */
int kvpy_kwindex(PyObject *kwname, const char *const *names, const char *fn);
/* get as of snap (NULL: now) with plyvel's signature. */
PyObject *kvpy_get(kvpy_db *db, const kv_snapshot *snap, PyObject *prefix, PyObject *const *args,
                   Py_ssize_t nargs, PyObject *kwnames, kvpy_snapshot *owner);

/* multi_get as of owner's snapshot (NULL: now), keys under its prefix. */
PyObject *kvpy_multi_get(kvpy_db *db, kvpy_snapshot *owner, PyObject *keys);

int kvpy_db_init_types(PyObject *m);
int kvpy_iter_init_types(PyObject *m);
int kvpy_objects_init_types(PyObject *m);

#endif /* KV_PY_KV_H */
