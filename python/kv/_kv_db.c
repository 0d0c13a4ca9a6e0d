/* _kv_db.c - kv._kv.DB: a kv_db with plyvel's DB methods and kv's own
 * (multi_get, explain, stats, table_stats, metrics, delete_range, merge,
 * checkpoint, catch_up, ingest). The hot calls (get, put) take their
 * arguments by METH_FASTCALL and read the value into a stack buffer: no
 * argument tuple, no allocation but the result's. */
#include "_kv.h"

#include <stddef.h>
#include <string.h>

/* Marks a call in flight on db (the GIL is about to be released). */
#define DB_ENTER(d) ((d)->busy++)
#define DB_LEAVE(d) ((d)->busy--)

int kvpy_kwindex(PyObject *kwname, const char *const *names, const char *fn)
{
    for (int i = 0; names[i]; i++)
        if (PyUnicode_CompareWithASCIIString(kwname, names[i]) == 0)
            return i;
    PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fn, kwname);
    return -1;
}

/* ---- open and close --------------------------------------------------------------- */

static PyObject *db_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    (void)args;
    (void)kwargs;
    kvpy_db *self = (kvpy_db *)type->tp_alloc(type, 0);
    if (self) {
        self->children.next = self->children.prev = &self->children;
        self->bytewise = 1;
    }
    return (PyObject *)self;
}

static int db_init(kvpy_db *self, PyObject *args, PyObject *kwargs)
{
    PyObject *name, *path;
    if (self->db) {
        PyErr_SetString(PyExc_RuntimeError, "DB.__init__ called twice");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "O:DB", &name))
        return -1;
    if (!PyUnicode_Check(name) && !PyBytes_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "'name' arg must be a byte string or a unicode string");
        return -1;
    }
    if (!PyUnicode_FSConverter(name, &path))
        return -1;
    kv_options o;
    kv_options_init(&o);
    int create = 0, exists = 0;
    kvpy_callback *cmp, *merge;
    if (kvpy_parse_options(kwargs, &o, &cmp, &merge, &create, &exists) < 0) {
        Py_DECREF(path);
        return -1;
    }
    o.create_if_missing = create;
    o.error_if_exists = exists;
    kv_db *db = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS;
    rc = kv_open(PyBytes_AS_STRING(path), &o, &db);
    Py_END_ALLOW_THREADS;
    Py_DECREF(path);
    if (rc != KV_OK) {
        kvpy_raise(rc);
        if (cmp && cmp->exc)
            Py_CLEAR(cmp->exc);
        kvpy_callback_free(cmp);
        kvpy_callback_free(merge);
        return -1;
    }
    self->db = db;
    self->cmp = cmp;
    self->merge = merge;
    self->bytewise = cmp == NULL;
    Py_XSETREF(self->name, Py_NewRef(name));
    return 0;
}

/* Closes the children, waits for calls in flight, closes the handle. */
static int db_close_impl(kvpy_db *self)
{
    if (!self->db)
        return KV_OK;
    self->closing = 1;
    /* closing stops new calls; a call in flight may still link the
     * iterator or snapshot it was making, so close children until none is
     * left once every call is out. */
    do {
        while (self->children.next != &self->children) {
            /* Held: another thread may drop its last reference while the
             * close waits for it with the GIL released. */
            kvpy_child *c = (kvpy_child *)Py_NewRef(self->children.next);
            if (c->kind == KVPY_SNAPSHOT)
                kvpy_snapshot_close((kvpy_snapshot *)c);
            else
                kvpy_iter_close(c);
            Py_DECREF(c);
        }
        kvpy_wait_idle(&self->busy);
    } while (self->children.next != &self->children);
    kv_db *db = self->db;
    int rc;
    Py_BEGIN_ALLOW_THREADS;
    rc = kv_close(db);
    Py_END_ALLOW_THREADS;
    if (rc == KV_EBUSY) { /* nothing was closed: the handle stays usable */
        self->closing = 0;
        return rc;
    }
    self->db = NULL;
    kvpy_callback_free(self->cmp);
    kvpy_callback_free(self->merge);
    self->cmp = self->merge = NULL;
    return rc;
}

static PyObject *db_close(kvpy_db *self, PyObject *unused)
{
    (void)unused;
    if (kvpy_in_callback) {
        PyErr_SetString(PyExc_RuntimeError, "a database cannot be closed from its own callback");
        return NULL;
    }
    if (self->closing && self->db) {
        Py_RETURN_NONE; /* another thread is closing it */
    }
    int rc = db_close_impl(self);
    if (rc != KV_OK)
        return kvpy_raise(rc);
    Py_RETURN_NONE;
}

static int db_traverse(kvpy_db *self, visitproc visit, void *arg)
{
    Py_VISIT(self->name);
    if (self->cmp) {
        Py_VISIT(self->cmp->fn);
        Py_VISIT(self->cmp->exc);
    }
    if (self->merge) {
        Py_VISIT(self->merge->fn);
        Py_VISIT(self->merge->exc);
    }
    return 0;
}

static int db_clear(kvpy_db *self)
{
    db_close_impl(self); /* the callbacks go with the handle */
    Py_CLEAR(self->name);
    return 0;
}

static void db_dealloc(kvpy_db *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakrefs)
        PyObject_ClearWeakRefs((PyObject *)self);
    db_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *db_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(self);
}

static PyObject *db_exit(kvpy_db *self, PyObject *args)
{
    (void)args;
    PyObject *r = db_close(self, NULL);
    if (!r)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

/* ---- get, put, delete ------------------------------------------------------------- */

/* The key, with the prefix (when not NULL) in front: in buf (cap bytes)
 * or, when longer, in *heap (freed by the caller). */
static const char *join_key(PyObject *prefix, const kvpy_arg *k, char *buf, size_t cap, char **heap,
                            size_t *len)
{
    if (!prefix) {
        *len = (size_t)k->n;
        return k->p;
    }
    size_t pn = (size_t)PyBytes_GET_SIZE(prefix);
    *len = pn + (size_t)k->n;
    char *p = *len <= cap ? buf : (*heap = PyMem_Malloc(*len ? *len : 1));
    if (!p) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(p, PyBytes_AS_STRING(prefix), pn);
    memcpy(p + pn, k->p, (size_t)k->n);
    return p;
}

/* Reads key's value: a new bytes object, NULL with *rc set (KV_NOTFOUND
 * or an error) and no exception. Called with the GIL held; releases it
 * around each read. */
static PyObject *read_value(kv_db *db, const kv_snapshot *snap, const char *key, size_t klen,
                            int *rc)
{
    char buf[1024];
    size_t vlen = 0;
    PyThreadState *ts = kvpy_leave();
    *rc = kv_get_into(db, snap, key, klen, buf, sizeof buf, &vlen);
    kvpy_return(ts);
    if (*rc == KV_OK)
        return PyBytes_FromStringAndSize(buf, (Py_ssize_t)vlen);
    while (*rc == KV_ERANGE) { /* longer than buf: read it straight into its object */
        PyObject *v = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)vlen);
        if (!v)
            return NULL;
        size_t cap = vlen;
        Py_BEGIN_ALLOW_THREADS;
        *rc = kv_get_into(db, snap, key, klen, PyBytes_AS_STRING(v), cap, &vlen);
        Py_END_ALLOW_THREADS;
        if (*rc == KV_OK) {
            if (vlen != cap && _PyBytes_Resize(&v, (Py_ssize_t)vlen) < 0)
                return NULL;
            return v;
        }
        Py_DECREF(v);
    }
    return NULL;
}

PyObject *kvpy_get(kvpy_db *db, const kv_snapshot *snap, PyObject *prefix, PyObject *const *args,
                   Py_ssize_t nargs, PyObject *kwnames, kvpy_snapshot *owner)
{
    static const char *const names[] = {"key", "default", "verify_checksums", "fill_cache", NULL};
    PyObject *karg = nargs > 0 ? args[0] : NULL, *dflt = nargs > 1 ? args[1] : Py_None;
    if (nargs > 2) {
        PyErr_Format(PyExc_TypeError, "get() takes at most 2 positional arguments (%zd given)",
                     nargs);
        return NULL;
    }
    if (kwnames) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
            int j = kvpy_kwindex(PyTuple_GET_ITEM(kwnames, i), names, "get");
            if (j < 0)
                return NULL;
            if (j == 0)
                karg = args[nargs + i];
            else if (j == 1)
                dflt = args[nargs + i];
        }
    }
    if (!karg) {
        PyErr_SetString(PyExc_TypeError, "get() missing required argument 'key'");
        return NULL;
    }
    if (kvpy_db_closed(db))
        return NULL;
    kvpy_arg k;
    if (kvpy_arg_get(karg, &k, "key") < 0)
        return NULL;
    char kbuf[256], *heap = NULL;
    size_t klen;
    const char *key = join_key(prefix, &k, kbuf, sizeof kbuf, &heap, &klen);
    PyObject *v = NULL;
    int rc = KV_EINVAL;
    if (key) {
        DB_ENTER(db);
        if (owner)
            owner->busy++;
        v = read_value(db->db, snap, key, klen, &rc);
        if (owner)
            owner->busy--;
        DB_LEAVE(db);
    }
    PyMem_Free(heap);
    kvpy_arg_release(&k);
    if (db->cmp && db->cmp->exc && kvpy_callback_check(db)) {
        Py_XDECREF(v);
        return NULL;
    }
    if (v || PyErr_Occurred() || !key)
        return v;
    if (rc == KV_NOTFOUND)
        return Py_NewRef(dflt);
    if (db->merge && db->merge->exc && kvpy_callback_check(db))
        return NULL;
    return kvpy_raise(rc);
}

static PyObject *db_get(kvpy_db *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return kvpy_get(self, NULL, NULL, args, nargs, kwnames, NULL);
}

/* Parses (key[, value], *, sync=False). */
static int parse_write(const char *fn, int nvals, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames, PyObject **key, PyObject **val, int *sync)
{
    static const char *const names[] = {"key", "value", "sync", NULL};
    *key = nargs > 0 ? args[0] : NULL;
    *val = nargs > 1 ? args[1] : NULL;
    *sync = 0;
    if (nargs > 1 + nvals) {
        PyErr_Format(PyExc_TypeError, "%s() takes %d positional arguments", fn, 1 + nvals);
        return -1;
    }
    for (Py_ssize_t i = 0; kwnames && i < PyTuple_GET_SIZE(kwnames); i++) {
        int j = kvpy_kwindex(PyTuple_GET_ITEM(kwnames, i), names, fn);
        PyObject *v = args[nargs + i];
        if (j < 0)
            return -1;
        if (j == 0)
            *key = v;
        else if (j == 1 && nvals)
            *val = v;
        else if (j == 2) {
            if ((*sync = PyObject_IsTrue(v)) < 0)
                return -1;
        } else {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument 'value'", fn);
            return -1;
        }
    }
    if (!*key || (nvals && !*val)) {
        PyErr_Format(PyExc_TypeError, "%s() missing a required argument", fn);
        return -1;
    }
    return 0;
}

enum { W_PUT, W_DELETE, W_MERGE, W_RANGE };

/* One write: a put, delete, merge or range delete, synced when sync. */
static int write_one(kv_db *db, int op, const kvpy_arg *k, const kvpy_arg *v, int sync)
{
    if (!sync) {
        switch (op) {
        case W_PUT: return kv_put(db, k->p, (size_t)k->n, v->p, (size_t)v->n);
        case W_DELETE: return kv_delete(db, k->p, (size_t)k->n);
        case W_MERGE: return kv_merge(db, k->p, (size_t)k->n, v->p, (size_t)v->n);
        default: return kv_delete_range(db, k->p, (size_t)k->n, v->p, (size_t)v->n);
        }
    }
    kv_batch *b;
    int rc = kv_batch_new(&b);
    if (rc != KV_OK)
        return rc;
    if (op == W_PUT)
        rc = kv_batch_put(b, k->p, (size_t)k->n, v->p, (size_t)v->n);
    else if (op == W_DELETE)
        rc = kv_batch_delete(b, k->p, (size_t)k->n);
    else if (op == W_MERGE)
        rc = kv_batch_merge(b, k->p, (size_t)k->n, v->p, (size_t)v->n);
    else
        rc = kv_batch_delete_range(b, k->p, (size_t)k->n, v->p, (size_t)v->n);
    kv_write_options wo = {1};
    if (rc == KV_OK)
        rc = kv_write_opts(db, &wo, b);
    kv_batch_free(b);
    return rc;
}

static PyObject *db_write(kvpy_db *self, const char *fn, int op, PyObject *const *args,
                          Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *ko, *vo;
    int sync;
    if (parse_write(fn, op != W_DELETE, args, nargs, kwnames, &ko, &vo, &sync) < 0)
        return NULL;
    if (kvpy_db_closed(self))
        return NULL;
    kvpy_arg k, v = {"", 0, {0}, 0};
    if (kvpy_arg_get(ko, &k, op == W_RANGE ? "start" : "key") < 0)
        return NULL;
    if (op != W_DELETE && kvpy_arg_get(vo, &v, op == W_RANGE ? "stop" : "value") < 0) {
        kvpy_arg_release(&k);
        return NULL;
    }
    int rc;
    DB_ENTER(self);
    Py_BEGIN_ALLOW_THREADS;
    rc = write_one(self->db, op, &k, &v, sync);
    Py_END_ALLOW_THREADS;
    DB_LEAVE(self);
    kvpy_arg_release(&k);
    kvpy_arg_release(&v);
    if (kvpy_callback_check(self))
        return NULL;
    if (rc != KV_OK)
        return kvpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *db_put(kvpy_db *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return db_write(self, "put", W_PUT, args, nargs, kwnames);
}

static PyObject *db_delete(kvpy_db *self, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames)
{
    return db_write(self, "delete", W_DELETE, args, nargs, kwnames);
}

static PyObject *db_merge(kvpy_db *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return db_write(self, "merge", W_MERGE, args, nargs, kwnames);
}

static PyObject *db_delete_range(kvpy_db *self, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames)
{
    return db_write(self, "delete_range", W_RANGE, args, nargs, kwnames);
}

/* ---- batches, iterators, snapshots --------------------------------------------------- */

static PyObject *db_write_batch(kvpy_db *self, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"transaction", "sync", "prefix", NULL};
    int transaction = 0, sync = 0;
    PyObject *prefix = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$ppO:write_batch", kw, &transaction, &sync,
                                     &prefix))
        return NULL;
    if (kvpy_db_closed(self))
        return NULL;
    if (prefix != Py_None && !PyBytes_Check(prefix)) {
        PyErr_SetString(PyExc_TypeError, "prefix must be bytes");
        return NULL;
    }
    return kvpy_batch_make(self, prefix == Py_None ? NULL : prefix, transaction, sync);
}

static PyObject *db_iterator(kvpy_db *self, PyObject *args, PyObject *kwargs)
{
    PyObject *db_prefix = NULL;
    if (kwargs && (db_prefix = PyDict_GetItemString(kwargs, "_db_prefix"))) {
        Py_INCREF(db_prefix);
        kwargs = PyDict_Copy(kwargs);
        if (!kwargs || PyDict_DelItemString(kwargs, "_db_prefix") < 0) {
            Py_XDECREF(kwargs);
            Py_DECREF(db_prefix);
            return NULL;
        }
    } else
        Py_XINCREF(kwargs);
    PyObject *r = kvpy_iter_make(self, NULL, db_prefix == Py_None ? NULL : db_prefix, args, kwargs);
    Py_XDECREF(kwargs);
    Py_XDECREF(db_prefix);
    return r;
}

static PyObject *db_iter(kvpy_db *self)
{
    return kvpy_iter_make(self, NULL, NULL, NULL, NULL);
}

static PyObject *db_raw_iterator(kvpy_db *self, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"verify_checksums", "fill_cache", NULL};
    PyObject *a = NULL, *b = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OO:raw_iterator", kw, &a, &b))
        return NULL;
    return kvpy_raw_iter_make(self, NULL);
}

static PyObject *db_snapshot(kvpy_db *self, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"prefix", NULL};
    PyObject *prefix = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$O:snapshot", kw, &prefix))
        return NULL;
    if (prefix != Py_None && !PyBytes_Check(prefix)) {
        PyErr_SetString(PyExc_TypeError, "prefix must be bytes");
        return NULL;
    }
    return kvpy_snapshot_make(self, prefix == Py_None ? NULL : prefix);
}

/* ---- properties, sizes, maintenance ------------------------------------------------------ */

static PyObject *db_get_property(kvpy_db *self, PyObject *name)
{
    if (!PyBytes_Check(name)) { /* as plyvel: bytes only */
        PyErr_Format(PyExc_TypeError, "property name must be bytes, not %.100s",
                     Py_TYPE(name)->tp_name);
        return NULL;
    }
    const char *s = PyBytes_AS_STRING(name);
    if (kvpy_db_closed(self))
        return NULL;
    /* LevelDB's "leveldb.<x>" is kv's "kv.<x>"; kv's own names go as
     * they are; anything else is no property. */
    char buf[160];
    if (!strncmp(s, "leveldb.", 8)) {
        if (snprintf(buf, sizeof buf, "kv.%s", s + 8) >= (int)sizeof buf)
            Py_RETURN_NONE;
        s = buf;
    } else if (strncmp(s, "kv.", 3) != 0)
        Py_RETURN_NONE;
    char *value = NULL;
    int rc;
    DB_ENTER(self);
    Py_BEGIN_ALLOW_THREADS;
    rc = kv_property(self->db, s, &value);
    Py_END_ALLOW_THREADS;
    DB_LEAVE(self);
    if (rc == KV_NOTFOUND)
        Py_RETURN_NONE;
    if (rc != KV_OK)
        return kvpy_raise(rc);
    PyObject *r = PyBytes_FromString(value);
    kv_free(value);
    return r;
}

static int optional_bytes(PyObject *o, kvpy_arg *a, const char *what)
{
    if (!o || o == Py_None) {
        a->p = NULL;
        a->n = 0;
        a->has_view = 0;
        return 0;
    }
    return kvpy_arg_get(o, a, what);
}

static PyObject *db_compact_range(kvpy_db *self, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"start", "stop", NULL};
    PyObject *so = NULL, *eo = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OO:compact_range", kw, &so, &eo))
        return NULL;
    if (kvpy_db_closed(self))
        return NULL;
    kvpy_arg s, e;
    if (optional_bytes(so, &s, "start") < 0)
        return NULL;
    if (optional_bytes(eo, &e, "stop") < 0) {
        kvpy_arg_release(&s);
        return NULL;
    }
    int rc;
    DB_ENTER(self);
    Py_BEGIN_ALLOW_THREADS;
    rc = kv_compact_range(self->db, s.p, (size_t)s.n, e.p, (size_t)e.n);
    Py_END_ALLOW_THREADS;
    DB_LEAVE(self);
    kvpy_arg_release(&s);
    kvpy_arg_release(&e);
    if (kvpy_callback_check(self))
        return NULL;
    if (rc != KV_OK)
        return kvpy_raise(rc);
    Py_RETURN_NONE;
}

/* sizes[i] for the n ranges in the sequence of pairs `ranges`. */
static PyObject *sizes_of(kvpy_db *self, PyObject *ranges)
{
    Py_ssize_t n = PyTuple_GET_SIZE(ranges);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PyTuple_GET_ITEM(ranges, i);
        if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2 ||
            !PyBytes_Check(PyTuple_GET_ITEM(r, 0)) || !PyBytes_Check(PyTuple_GET_ITEM(r, 1))) {
            PyErr_SetString(PyExc_TypeError,
                            "each range must be a (start, stop) tuple of two byte strings");
            return NULL;
        }
    }
    if (kvpy_db_closed(self))
        return NULL;
    size_t nn = (size_t)n;
    const void **keys = PyMem_Malloc((2 * nn + 1) * sizeof *keys);
    size_t *lens = PyMem_Malloc((2 * nn + 1) * sizeof *lens);
    uint64_t *sizes = PyMem_Malloc((nn + 1) * sizeof *sizes);
    PyObject *out = NULL;
    if (!keys || !lens || !sizes) {
        PyErr_NoMemory();
        goto out_free;
    }
    for (size_t i = 0; i < nn; i++)
        for (int j = 0; j < 2; j++) {
            PyObject *b = PyTuple_GET_ITEM(PyTuple_GET_ITEM(ranges, (Py_ssize_t)i), j);
            keys[j * nn + i] = PyBytes_AS_STRING(b);
            lens[j * nn + i] = (size_t)PyBytes_GET_SIZE(b);
        }
    int rc;
    DB_ENTER(self);
    Py_BEGIN_ALLOW_THREADS;
    rc = kv_approximate_sizes(self->db, nn, keys, lens, keys + nn, lens + nn, sizes);
    Py_END_ALLOW_THREADS;
    DB_LEAVE(self);
    if (rc != KV_OK) {
        kvpy_raise(rc);
        goto out_free;
    }
    if (!(out = PyList_New(n)))
        goto out_free;
    for (size_t i = 0; i < nn; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(sizes[i]);
        if (!v) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)i, v);
    }
out_free:
    PyMem_Free(keys);
    PyMem_Free(lens);
    PyMem_Free(sizes);
    return out;
}

static PyObject *db_approximate_sizes(kvpy_db *self, PyObject *args)
{
    return sizes_of(self, args);
}

static PyObject *db_approximate_size(kvpy_db *self, PyObject *args)
{
    PyObject *s, *e;
    if (!PyArg_ParseTuple(args, "OO:approximate_size", &s, &e))
        return NULL;
    PyObject *pair = PyTuple_Pack(2, s, e);
    PyObject *ranges = pair ? PyTuple_Pack(1, pair) : NULL;
    Py_XDECREF(pair);
    if (!ranges)
        return NULL;
    PyObject *l = sizes_of(self, ranges);
    Py_DECREF(ranges);
    if (!l)
        return NULL;
    PyObject *r = Py_NewRef(PyList_GET_ITEM(l, 0));
    Py_DECREF(l);
    return r;
}

/* A call db -> KV status with nothing but the handle, GIL released. */
static PyObject *db_simple(kvpy_db *self, int (*fn)(kv_db *))
{
    if (kvpy_db_closed(self))
        return NULL;
    int rc;
    DB_ENTER(self);
    Py_BEGIN_ALLOW_THREADS;
    rc = fn(self->db);
    Py_END_ALLOW_THREADS;
    DB_LEAVE(self);
    if (kvpy_callback_check(self))
        return NULL;
    if (rc != KV_OK)
        return kvpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *db_flush(kvpy_db *self, PyObject *unused)
{
    (void)unused;
    return db_simple(self, kv_flush);
}

static PyObject *db_catch_up(kvpy_db *self, PyObject *unused)
{
    (void)unused;
    return db_simple(self, kv_catch_up);
}

static PyObject *db_checkpoint(kvpy_db *self, PyObject *arg)
{
    PyObject *path;
    if (!PyUnicode_FSConverter(arg, &path))
        return NULL;
    if (kvpy_db_closed(self)) {
        Py_DECREF(path);
        return NULL;
    }
    int rc;
    DB_ENTER(self);
    Py_BEGIN_ALLOW_THREADS;
    rc = kv_checkpoint(self->db, PyBytes_AS_STRING(path));
    Py_END_ALLOW_THREADS;
    DB_LEAVE(self);
    Py_DECREF(path);
    if (rc != KV_OK)
        return kvpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *db_ingest(kvpy_db *self, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"paths", "move", NULL};
    PyObject *paths, *seq;
    int move = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|p:ingest", kw, &paths, &move))
        return NULL;
    if (PyUnicode_Check(paths) || PyBytes_Check(paths) ||
        PyObject_HasAttrString(paths, "__fspath__"))
        seq = PyTuple_Pack(1, paths);
    else
        seq = PySequence_Tuple(paths);
    if (!seq)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    PyObject *conv = PyTuple_New(n);
    const char **ps = PyMem_Malloc(((size_t)n + 1) * sizeof *ps);
    PyObject *out = NULL;
    if (!conv || !ps) {
        PyErr_NoMemory();
        goto out_free;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b;
        if (!PyUnicode_FSConverter(PyTuple_GET_ITEM(seq, i), &b))
            goto out_free;
        PyTuple_SET_ITEM(conv, i, b);
        ps[i] = PyBytes_AS_STRING(b);
    }
    if (kvpy_db_closed(self))
        goto out_free;
    int rc;
    DB_ENTER(self);
    Py_BEGIN_ALLOW_THREADS;
    rc = kv_ingest(self->db, ps, (size_t)n, move);
    Py_END_ALLOW_THREADS;
    DB_LEAVE(self);
    if (kvpy_callback_check(self))
        goto out_free;
    if (rc != KV_OK)
        kvpy_raise(rc);
    else
        out = Py_NewRef(Py_None);
out_free:
    PyMem_Free(ps);
    Py_XDECREF(conv);
    Py_DECREF(seq);
    return out;
}

/* ---- kv's own views: multi_get, stats, table_stats, metrics, explain ----------------- */

/* The keys with the prefix in front: a new list (NULL on error). */
static PyObject *prefixed_keys(PyObject *prefix, PyObject *seq)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *l = PyList_New(n);
    for (Py_ssize_t i = 0; l && i < n; i++) {
        PyObject *k = PySequence_Fast_GET_ITEM(seq, i), *pk = NULL;
        if (PyBytes_Check(k))
            pk = PySequence_Concat(prefix, k);
        else
            PyErr_Format(PyExc_TypeError, "key must be bytes, not %.100s", Py_TYPE(k)->tp_name);
        if (!pk) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, i, pk);
    }
    return l;
}

PyObject *kvpy_multi_get(kvpy_db *self, kvpy_snapshot *owner, PyObject *keys_arg)
{
    PyObject *seq = PySequence_Fast(keys_arg, "multi_get() takes a sequence of keys");
    if (seq && owner && owner->prefix) {
        Py_SETREF(seq, prefixed_keys(owner->prefix, seq));
    }
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    size_t nn = (size_t)n + 1;
    kvpy_arg *a = PyMem_Calloc(nn, sizeof *a);
    const void **keys = PyMem_Malloc(nn * sizeof *keys);
    size_t *klens = PyMem_Malloc(nn * sizeof *klens), *vlens = PyMem_Malloc(nn * sizeof *vlens);
    void **vals = PyMem_Calloc(nn, sizeof *vals);
    int *st = PyMem_Malloc(nn * sizeof *st);
    PyObject *out = NULL;
    Py_ssize_t got = 0;
    if (!a || !keys || !klens || !vlens || !vals || !st) {
        PyErr_NoMemory();
        goto out_free;
    }
    for (; got < n; got++) {
        if (kvpy_arg_get(PySequence_Fast_GET_ITEM(seq, got), &a[got], "key") < 0)
            goto out_free;
        keys[got] = a[got].p;
        klens[got] = (size_t)a[got].n;
    }
    if (kvpy_db_closed(self))
        goto out_free;
    int rc;
    DB_ENTER(self);
    if (owner)
        owner->busy++;
    Py_BEGIN_ALLOW_THREADS;
    rc = kv_multi_get(self->db, owner ? owner->snap : NULL, (size_t)n, keys, klens, vals, vlens,
                      st);
    Py_END_ALLOW_THREADS;
    if (owner)
        owner->busy--;
    DB_LEAVE(self);
    if (kvpy_callback_check(self))
        goto out_free;
    for (Py_ssize_t i = 0; rc == KV_OK && i < n; i++)
        if (st[i] != KV_OK && st[i] != KV_NOTFOUND)
            rc = st[i];
    if (rc != KV_OK) {
        kvpy_raise(rc);
        goto out_free;
    }
    if (!(out = PyList_New(n)))
        goto out_free;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = st[i] == KV_OK ? PyBytes_FromStringAndSize(vals[i], (Py_ssize_t)vlens[i])
                                     : Py_NewRef(Py_None);
        if (!v) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, v);
    }
out_free:
    for (Py_ssize_t i = 0; vals && i < n; i++)
        kv_free(vals[i]);
    for (Py_ssize_t i = 0; a && i < got; i++)
        kvpy_arg_release(&a[i]);
    PyMem_Free(a);
    PyMem_Free(keys);
    PyMem_Free(klens);
    PyMem_Free(vlens);
    PyMem_Free(vals);
    PyMem_Free(st);
    Py_DECREF(seq);
    return out;
}

static PyObject *db_multi_get(kvpy_db *self, PyObject *keys)
{
    return kvpy_multi_get(self, NULL, keys);
}

/* d[name] = v (a new reference, stolen); -1 when v is NULL or it fails. */
static int put_item(PyObject *d, const char *name, PyObject *v)
{
    if (!v)
        return -1;
    int r = PyDict_SetItemString(d, name, v);
    Py_DECREF(v);
    return r;
}

/* The uint64_t fields of struct kv_stats (write_amplification and
 * level_write_amp, doubles, and background_error, signed, apart; n > 1: an array of n, one per level; those last), in the struct's order: the
 * assertion below fails to compile when kv.h appends a field not listed. */
static const struct stat_field {
    const char *name;
    size_t off, n;
} stat_fields[] = {
#define F(f)                                                                                       \
    {                                                                                              \
#f, offsetof(struct kv_stats, f), sizeof(((struct kv_stats *)0)->f) / 8                    \
    }
    /* clang-format off */
    F(gets), F(puts), F(deletes), F(writes), F(memtable_hits), F(memtable_filter_negatives),
    F(tables_probed), F(filter_negatives), F(filter_positives), F(filter_false_positives),
    F(data_block_reads), F(data_block_read_bytes), F(block_cache_hits), F(block_cache_misses),
    F(flushes), F(flush_bytes), F(wal_bytes), F(wal_syncs), F(write_groups), F(stalls),
    F(stall_micros), F(slowdowns), F(slowdown_micros), F(compactions), F(compaction_pending),
    F(compaction_running), F(compaction_read_bytes), F(compaction_written_bytes), F(user_bytes),
    F(recovered_records), F(recovery_dropped_bytes), F(recovery_tail_damaged), F(last_sequence),
    F(memtable_bytes), F(tables), F(l0_tables), F(table_bytes), F(filter_bytes), F(index_bytes),
    F(filter_keys), F(table_files_open), F(table_file_reopens), F(table_file_evictions),
    F(device_reads), F(device_read_bytes), F(direct_reads), F(direct_reads_refused),
    F(write_delay_max_micros), F(delayed_write_rate), F(pending_compaction_bytes), F(blob_files),
    F(blob_bytes), F(blob_garbage_bytes), F(blob_reads), F(blob_read_bytes), F(blob_written_bytes),
    F(blob_relocated_bytes), F(idle_compactions), F(base_level), F(range_deletes), F(merges),
    F(range_tombstones_live), F(range_tombstone_bytes), F(merge_operands_read),
    F(merge_operands_compacted), F(expired_reads), F(expired_dropped), F(range_deleted_dropped),
    F(filter_kept), F(filter_removed), F(filter_changed), F(checkpoints), F(ingested_tables),
    F(ingested_bytes), F(catch_ups), F(background_errors), F(resumes), F(range_queries),
    F(range_tables_checked), F(prefix_filter_skips), F(prefix_filter_false_positives),
    F(range_filter_skips), F(range_filter_false_positives), F(range_tables_read),
    F(range_filter_bytes), F(memtable_range_skips), F(level_tables), F(level_bytes), F(level_written_bytes),
    F(level_target_bytes), F(level_runs), F(background_jobs), F(flushes_running),
    F(compactions_running), F(compactions_parallel_max), F(subcompactions), F(table_memory_bytes),
    F(tables_index_paged), F(tables_filter_paged), F(index_block_reads), F(filter_block_reads),
    F(compaction_max_read_bytes),
/* clang-format on */
#undef F
};
_Static_assert(offsetof(struct kv_stats, compaction_max_read_bytes) + sizeof(uint64_t) ==
                       offsetof(struct kv_stats, level_write_amp) &&
                   offsetof(struct kv_stats, level_write_amp) + 7 * sizeof(double) ==
                       sizeof(struct kv_stats),
               "kv_stats has a field that stats() does not give: add it to stat_fields");

static PyObject *u64_list(const uint64_t *v, size_t n)
{
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        PyObject *x = PyLong_FromUnsignedLongLong(v[i]);
        if (!x) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, x);
    }
    return l;
}

static PyObject *db_stats(kvpy_db *self, PyObject *unused)
{
    (void)unused;
    if (kvpy_db_closed(self))
        return NULL;
    struct kv_stats s;
    int rc = kv_stats(self->db, &s);
    if (rc != KV_OK)
        return kvpy_raise(rc);
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    for (size_t i = 0; i < sizeof stat_fields / sizeof stat_fields[0]; i++) {
        const struct stat_field *f = &stat_fields[i];
        const uint64_t *v = (const uint64_t *)((const char *)&s + f->off);
        if (put_item(d, f->name, f->n == 1 ? PyLong_FromUnsignedLongLong(*v) : u64_list(v, f->n)) <
            0)
            goto fail;
    }
    PyObject *amp = PyList_New(7);
    for (Py_ssize_t l = 0; amp && l < 7; l++) {
        PyObject *x = PyFloat_FromDouble(s.level_write_amp[l]);
        if (!x) {
            Py_CLEAR(amp);
            break;
        }
        PyList_SET_ITEM(amp, l, x);
    }
    if (put_item(d, "level_write_amp", amp) < 0)
        goto fail;
    if (put_item(d, "write_amplification", PyFloat_FromDouble(s.write_amplification)) < 0 ||
        put_item(d, "background_error", PyLong_FromLongLong(s.background_error)) < 0)
        goto fail;
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}

static PyObject *layout_name(int layout)
{
    if (layout == KV_BLOOM_BLOCKED)
        return PyUnicode_FromString("blocked");
    if (layout == KV_BLOOM_CLASSIC)
        return PyUnicode_FromString("classic");
    return Py_NewRef(Py_None);
}

static PyObject *table_dict(const kv_table_stats *t)
{
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    if (put_item(d, "number", PyLong_FromUnsignedLongLong(t->number)) < 0 ||
        put_item(d, "level", PyLong_FromUnsignedLong(t->level)) < 0 ||
        put_item(d, "keys", PyLong_FromUnsignedLongLong(t->entries)) < 0 ||
        put_item(d, "entries", PyLong_FromUnsignedLongLong(t->entries)) < 0 ||
        put_item(d, "file_size", PyLong_FromUnsignedLongLong(t->file_size)) < 0 ||
        put_item(d, "filter_layout", layout_name(t->filter_layout)) < 0 ||
        put_item(d, "bits_per_key", PyFloat_FromDouble(t->bits_per_key)) < 0 ||
        put_item(d, "k", PyLong_FromUnsignedLong(t->k)) < 0 ||
        put_item(d, "filter_keys", PyLong_FromUnsignedLongLong(t->filter_keys)) < 0 ||
        put_item(d, "filter_bytes", PyLong_FromUnsignedLongLong(t->filter_bytes)) < 0 ||
        put_item(d, "probes", PyLong_FromUnsignedLongLong(t->probes)) < 0 ||
        put_item(d, "filter_negatives", PyLong_FromUnsignedLongLong(t->filter_negatives)) < 0 ||
        put_item(d, "filter_false_positives",
                 PyLong_FromUnsignedLongLong(t->filter_false_positives)) < 0 ||
        put_item(d, "measured_fpr", PyFloat_FromDouble(t->measured_fpr)) < 0 ||
        put_item(d, "expected_fpr", PyFloat_FromDouble(t->expected_fpr)) < 0 ||
        put_item(d, "smallest",
                 PyBytes_FromStringAndSize((const char *)t->smallest,
                                           (Py_ssize_t)t->smallest_len)) < 0 ||
        put_item(d, "largest",
                 PyBytes_FromStringAndSize((const char *)t->largest, (Py_ssize_t)t->largest_len)) <
            0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

static PyObject *db_table_stats(kvpy_db *self, PyObject *unused)
{
    (void)unused;
    if (kvpy_db_closed(self))
        return NULL;
    kv_table_stats *t = NULL;
    size_t n = 0;
    int rc;
    DB_ENTER(self);
    Py_BEGIN_ALLOW_THREADS;
    rc = kv_table_stats_get(self->db, &t, &n);
    Py_END_ALLOW_THREADS;
    DB_LEAVE(self);
    if (rc != KV_OK)
        return kvpy_raise(rc);
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        PyObject *d = table_dict(&t[i]);
        if (!d) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, d);
    }
    kv_free(t);
    return l;
}

static PyObject *db_text(kvpy_db *self, int (*fn)(kv_db *, char **))
{
    if (kvpy_db_closed(self))
        return NULL;
    char *text = NULL;
    int rc;
    DB_ENTER(self);
    Py_BEGIN_ALLOW_THREADS;
    rc = fn(self->db, &text);
    Py_END_ALLOW_THREADS;
    DB_LEAVE(self);
    if (rc != KV_OK)
        return kvpy_raise(rc);
    PyObject *r = PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
    kv_free(text);
    return r;
}

static PyObject *db_metrics(kvpy_db *self, PyObject *unused)
{
    (void)unused;
    return db_text(self, kv_metrics_text);
}

static PyObject *db_recovery_report(kvpy_db *self, PyObject *unused)
{
    (void)unused;
    return db_text(self, kv_recovery_report);
}

static const char *const where_names[] = {"memtable", "immutable", "table"};
static const char *const outcome_names[] = {"absent",        "found",  "deleted", "failed",
                                            "range_deleted", "merged", "expired"};
static const char *const filter_names[] = {"not_asked", "negative", "maybe"};
static const char *const block_names[] = {"none", "cache", "file"};

static PyObject *name_of(const char *const *names, size_t n, int v)
{
    if (v >= 0 && (size_t)v < n)
        return PyUnicode_FromString(names[v]);
    return PyLong_FromLong(v);
}
#define NAME_OF(a, v) name_of(a, sizeof a / sizeof a[0], v)

static PyObject *step_dict(const kv_explain_step *s)
{
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    int table = s->where == KV_EXPLAIN_TABLE;
    if (put_item(d, "where", NAME_OF(where_names, s->where)) < 0 ||
        put_item(d, "outcome", NAME_OF(outcome_names, s->outcome)) < 0 ||
        put_item(d, "seq", PyLong_FromUnsignedLongLong(s->seq)) < 0 ||
        put_item(d, "filter", NAME_OF(filter_names, s->filter)) < 0 ||
        put_item(d, "level", table ? PyLong_FromUnsignedLong(s->level) : Py_NewRef(Py_None)) < 0 ||
        put_item(d, "number", table ? PyLong_FromUnsignedLongLong(s->number) : Py_NewRef(Py_None)) <
            0 ||
        put_item(d, "smallest",
                 table ? PyBytes_FromStringAndSize((const char *)s->smallest,
                                                   (Py_ssize_t)s->smallest_len)
                       : Py_NewRef(Py_None)) < 0 ||
        put_item(d, "largest",
                 table ? PyBytes_FromStringAndSize((const char *)s->largest,
                                                   (Py_ssize_t)s->largest_len)
                       : Py_NewRef(Py_None)) < 0 ||
        put_item(d, "block", NAME_OF(block_names, s->block)) < 0 ||
        put_item(d, "block_offset", PyLong_FromUnsignedLongLong(s->block_offset)) < 0 ||
        put_item(d, "block_bytes", PyLong_FromUnsignedLongLong(s->block_bytes)) < 0 ||
        put_item(d, "false_positive", PyBool_FromLong(s->false_positive)) < 0 ||
        put_item(d, "blob_number", PyLong_FromUnsignedLongLong(s->blob_number)) < 0 ||
        put_item(d, "blob_offset", PyLong_FromUnsignedLongLong(s->blob_offset)) < 0 ||
        put_item(d, "blob_bytes", PyLong_FromUnsignedLongLong(s->blob_bytes)) < 0 ||
        put_item(d, "merge_operands", PyLong_FromSize_t(s->merge_operands)) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

/* The explain's dict: its fields, the steps, and the totals a reader
 * wants first (tables probed, filter negatives, false positives, blocks
 * read from the file). */
static PyObject *explain_dict(const kv_explain *e)
{
    PyObject *d = PyDict_New(), *steps = PyList_New((Py_ssize_t)e->nsteps);
    size_t probed = 0, negatives = 0, fps = 0, reads = 0;
    if (!d || !steps)
        goto fail;
    for (size_t i = 0; i < e->nsteps; i++) {
        const kv_explain_step *s = &e->steps[i];
        probed += s->where == KV_EXPLAIN_TABLE;
        negatives += s->where == KV_EXPLAIN_TABLE && s->filter == KV_EXPLAIN_FILTER_NEGATIVE;
        fps += s->false_positive != 0;
        reads += s->block == KV_EXPLAIN_BLOCK_FILE;
        PyObject *sd = step_dict(s);
        if (!sd)
            goto fail;
        PyList_SET_ITEM(steps, (Py_ssize_t)i, sd);
    }
    const char *res = e->result == KV_OK ? "found" : e->result == KV_NOTFOUND ? "notfound" : NULL;
    if (put_item(d, "result", res ? PyUnicode_FromString(res) : PyLong_FromLong(e->result)) < 0 ||
        put_item(d, "found", PyBool_FromLong(e->result == KV_OK)) < 0 ||
        put_item(d, "error",
                 res ? Py_NewRef(Py_None) : PyUnicode_FromString(kv_strerror(e->result))) < 0 ||
        put_item(d, "value",
                 e->value ? PyBytes_FromStringAndSize(e->value, (Py_ssize_t)e->value_len)
                          : Py_NewRef(Py_None)) < 0 ||
        put_item(d, "hash", PyLong_FromUnsignedLongLong(e->hash)) < 0 ||
        put_item(d, "snapshot", PyLong_FromUnsignedLongLong(e->snapshot)) < 0 ||
        put_item(d, "live_tables", PyLong_FromSize_t(e->live_tables)) < 0 ||
        put_item(d, "tables_probed", PyLong_FromSize_t(probed)) < 0 ||
        put_item(d, "filter_negatives", PyLong_FromSize_t(negatives)) < 0 ||
        put_item(d, "false_positives", PyLong_FromSize_t(fps)) < 0 ||
        put_item(d, "blocks_read", PyLong_FromSize_t(reads)) < 0 ||
        put_item(d, "steps", Py_NewRef(steps)) < 0)
        goto fail;
    Py_DECREF(steps);
    return d;
fail:
    Py_XDECREF(d);
    Py_XDECREF(steps);
    return NULL;
}

static PyObject *db_explain(kvpy_db *self, PyObject *key)
{
    kvpy_arg k;
    if (kvpy_arg_get(key, &k, "key") < 0)
        return NULL;
    if (kvpy_db_closed(self)) {
        kvpy_arg_release(&k);
        return NULL;
    }
    kv_explain *e = NULL;
    int rc;
    DB_ENTER(self);
    Py_BEGIN_ALLOW_THREADS;
    rc = kv_explain_get(self->db, k.p, (size_t)k.n, &e);
    Py_END_ALLOW_THREADS;
    DB_LEAVE(self);
    kvpy_arg_release(&k);
    if (kvpy_callback_check(self)) {
        kv_free(e);
        return NULL;
    }
    if (rc != KV_OK)
        return kvpy_raise(rc);
    PyObject *d = explain_dict(e);
    kv_free(e);
    return d;
}

/* ---- the type ----------------------------------------------------------------------- */

static PyObject *db_get_closed(kvpy_db *self, void *c)
{
    (void)c;
    return PyBool_FromLong(self->db == NULL || self->closing);
}

static PyObject *db_get_name(kvpy_db *self, void *c)
{
    (void)c;
    return Py_NewRef(self->name ? self->name : Py_None);
}

static PyObject *db_repr(kvpy_db *self)
{
    return PyUnicode_FromFormat("<%s with name %R%s at %p>", Py_TYPE(self)->tp_name,
                                self->name ? self->name : Py_None, self->db ? "" : " (closed)",
                                self);
}

#define FAST(f) (PyCFunction)(void (*)(void))(f), METH_FASTCALL | METH_KEYWORDS
#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS

static PyMethodDef db_methods[] = {
    {"get", FAST(db_get), "get(key, default=None): the key's value, or default"},
    {"put", FAST(db_put), "put(key, value, *, sync=False)"},
    {"delete", FAST(db_delete), "delete(key, *, sync=False)"},
    {"merge", FAST(db_merge), "merge(key, operand, *, sync=False): kv_merge"},
    {"delete_range", FAST(db_delete_range),
     "delete_range(start, stop, *, sync=False): remove every key start <= k < stop"},
    {"write_batch", KW(db_write_batch), "write_batch(*, transaction=False, sync=False)"},
    {"iterator", KW(db_iterator), "iterator(*, reverse=False, start=None, stop=None, ...)"},
    {"raw_iterator", KW(db_raw_iterator), "raw_iterator(): a cursor as LevelDB's iterator"},
    {"snapshot", KW(db_snapshot), "snapshot(): the database as of now"},
    {"get_property", (PyCFunction)db_get_property, METH_O, "get_property(name): bytes or None"},
    {"compact_range", KW(db_compact_range), "compact_range(*, start=None, stop=None)"},
    {"approximate_size", (PyCFunction)db_approximate_size, METH_VARARGS,
     "approximate_size(start, stop): bytes on disk for the range"},
    {"approximate_sizes", (PyCFunction)db_approximate_sizes, METH_VARARGS,
     "approximate_sizes(*ranges): a list of approximate_size for each (start, stop)"},
    {"close", (PyCFunction)db_close, METH_NOARGS, "close(): close iterators, snapshots, the db"},
    {"flush", (PyCFunction)db_flush, METH_NOARGS, "flush(): write the memtable to a table"},
    {"catch_up", (PyCFunction)db_catch_up, METH_NOARGS,
     "catch_up(): a read_only handle moves to the writer's current state"},
    {"checkpoint", (PyCFunction)db_checkpoint, METH_O,
     "checkpoint(dir): an openable copy of the database as of now"},
    {"ingest", KW(db_ingest), "ingest(paths, move=False): add tables a TableWriter made"},
    {"multi_get", (PyCFunction)db_multi_get, METH_O,
     "multi_get(keys): a list of values (None when absent), in order"},
    {"explain", (PyCFunction)db_explain, METH_O, "explain(key): a dict of the Get's steps"},
    {"stats", (PyCFunction)db_stats, METH_NOARGS, "stats(): a dict of kv_stats"},
    {"table_stats", (PyCFunction)db_table_stats, METH_NOARGS,
     "table_stats(): a list of dicts, one per live table"},
    {"metrics", (PyCFunction)db_metrics, METH_NOARGS, "metrics(): Prometheus text"},
    {"recovery_report", (PyCFunction)db_recovery_report, METH_NOARGS,
     "recovery_report(): what the open found in the logs it replayed"},
    {"__enter__", (PyCFunction)db_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)db_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef db_getset[] = {
    {"closed", (getter)db_get_closed, NULL, "True once closed", NULL},
    {"name", (getter)db_get_name, NULL, "the name the database was opened with", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject kvpy_db_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kv.DB",
    .tp_basicsize = sizeof(kvpy_db),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "DB(name, create_if_missing=False, error_if_exists=False, **options)",
    .tp_new = db_new,
    .tp_init = (initproc)db_init,
    .tp_dealloc = (destructor)db_dealloc,
    .tp_traverse = (traverseproc)db_traverse,
    .tp_clear = (inquiry)db_clear,
    .tp_weaklistoffset = offsetof(kvpy_db, weakrefs),
    .tp_methods = db_methods,
    .tp_getset = db_getset,
    .tp_iter = (getiterfunc)db_iter,
    .tp_repr = (reprfunc)db_repr,
};

int kvpy_db_init_types(PyObject *m)
{
    if (PyType_Ready(&kvpy_db_type) < 0)
        return -1;
    return PyModule_AddObjectRef(m, "DB", (PyObject *)&kvpy_db_type);
}
