/* _kv_objects.c - kv._kv.Snapshot, kv._kv.WriteBatch and kv._kv.TableWriter. */
#include "_kv.h"

#include <string.h>

/* ---- Snapshot ------------------------------------------------------------------------ */

PyObject *kvpy_snapshot_make(kvpy_db *db, PyObject *prefix)
{
    if (kvpy_db_closed(db))
        return NULL;
    kvpy_snapshot *self = PyObject_GC_New(kvpy_snapshot, &kvpy_snapshot_type);
    if (!self)
        return NULL;
    memset((char *)self + sizeof(PyObject), 0, sizeof *self - sizeof(PyObject));
    self->head.kind = KVPY_SNAPSHOT;
    kv_snapshot *s = NULL;
    int rc;
    db->busy++;
    Py_BEGIN_ALLOW_THREADS;
    rc = kv_snapshot_new(db->db, &s);
    Py_END_ALLOW_THREADS;
    db->busy--;
    if (rc != KV_OK) {
        Py_DECREF(self);
        return kvpy_raise(rc);
    }
    self->snap = s;
    self->db = (kvpy_db *)Py_NewRef(db);
    self->prefix = prefix && PyBytes_GET_SIZE(prefix) ? Py_NewRef(prefix) : NULL;
    kvpy_child_link(db, &self->head);
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

void kvpy_snapshot_close(kvpy_snapshot *self)
{
    kvpy_wait_idle(&self->busy);
    kvpy_child_unlink(&self->head);
    kv_snapshot *s = self->snap;
    kvpy_db *owner = (kvpy_db *)Py_XNewRef(self->db); /* as in kvpy_iter_close */
    self->snap = NULL;
    if (s && owner && owner->db) {
        kv_db *db = owner->db;
        owner->busy++; /* as an iterator's free (kvpy_iter_close) */
        Py_BEGIN_ALLOW_THREADS;
        kv_snapshot_release(db, s);
        Py_END_ALLOW_THREADS;
        owner->busy--;
    }
    Py_CLEAR(self->db);
    Py_XDECREF(owner);
}

static int snap_closed(kvpy_snapshot *self)
{
    if (self->snap && self->db && !self->db->closing)
        return 0;
    PyErr_SetString(PyExc_RuntimeError, "Database or snapshot is closed");
    return 1;
}

static PyObject *snap_get(kvpy_snapshot *self, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames)
{
    if (snap_closed(self))
        return NULL;
    return kvpy_get(self->db, self->snap, self->prefix, args, nargs, kwnames, self);
}

static PyObject *snap_multi_get(kvpy_snapshot *self, PyObject *keys)
{
    if (snap_closed(self))
        return NULL;
    return kvpy_multi_get(self->db, self, keys);
}

static PyObject *snap_iterator(kvpy_snapshot *self, PyObject *args, PyObject *kwargs)
{
    if (snap_closed(self))
        return NULL;
    return kvpy_iter_make(self->db, self, self->prefix, args, kwargs);
}

static PyObject *snap_iter(kvpy_snapshot *self)
{
    return snap_iterator(self, NULL, NULL);
}

static PyObject *snap_raw_iterator(kvpy_snapshot *self, PyObject *args, PyObject *kwargs)
{
    (void)args;
    (void)kwargs;
    if (snap_closed(self))
        return NULL;
    return kvpy_raw_iter_make(self->db, self);
}

static PyObject *snap_close(kvpy_snapshot *self, PyObject *unused)
{
    (void)unused;
    if (kvpy_in_callback) {
        PyErr_SetString(PyExc_RuntimeError, "a snapshot cannot be closed from a callback");
        return NULL;
    }
    kvpy_snapshot_close(self);
    Py_RETURN_NONE;
}

static PyObject *snap_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(self);
}

static PyObject *snap_exit(kvpy_snapshot *self, PyObject *args)
{
    (void)args;
    kvpy_snapshot_close(self);
    Py_RETURN_FALSE;
}

static int snap_traverse(kvpy_snapshot *self, visitproc visit, void *arg)
{
    Py_VISIT(self->db);
    return 0;
}

static int snap_clear(kvpy_snapshot *self)
{
    kvpy_snapshot_close(self);
    Py_CLEAR(self->prefix);
    return 0;
}

static void snap_dealloc(kvpy_snapshot *self)
{
    PyObject_GC_UnTrack(self);
    snap_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *snap_get_prefix(kvpy_snapshot *self, void *c)
{
    (void)c;
    return Py_NewRef(self->prefix ? self->prefix : Py_None);
}

static PyObject *snap_get_db(kvpy_snapshot *self, void *c)
{
    (void)c;
    return Py_NewRef(self->db ? (PyObject *)self->db : Py_None);
}

static PyMethodDef snap_methods[] = {
    {"get", (PyCFunction)(void (*)(void))snap_get, METH_FASTCALL | METH_KEYWORDS,
     "get(key, default=None): the value as of the snapshot"},
    {"multi_get", (PyCFunction)snap_multi_get, METH_O,
     "multi_get(keys): a list of values (None when absent) as of the snapshot"},
    {"iterator", (PyCFunction)(void (*)(void))snap_iterator, METH_VARARGS | METH_KEYWORDS, NULL},
    {"raw_iterator", (PyCFunction)(void (*)(void))snap_raw_iterator, METH_VARARGS | METH_KEYWORDS,
     NULL},
    {"close", (PyCFunction)snap_close, METH_NOARGS, "close(): release the snapshot"},
    {"release", (PyCFunction)snap_close, METH_NOARGS, "release(): as close()"},
    {"__enter__", (PyCFunction)snap_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)snap_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef snap_getset[] = {
    {"prefix", (getter)snap_get_prefix, NULL, NULL, NULL},
    {"db", (getter)snap_get_db, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject kvpy_snapshot_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kv.Snapshot",
    .tp_basicsize = sizeof(kvpy_snapshot),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The database as of a moment (DB.snapshot)",
    .tp_dealloc = (destructor)snap_dealloc,
    .tp_traverse = (traverseproc)snap_traverse,
    .tp_clear = (inquiry)snap_clear,
    .tp_iter = (getiterfunc)snap_iter,
    .tp_as_sequence = &kvpy_no_contains,
    .tp_methods = snap_methods,
    .tp_getset = snap_getset,
};

/* ---- WriteBatch -------------------------------------------------------------------------- */

/* kv_batch_foreach passes range deletes and merges over, so append() could
 * not copy them: the batch also logs those (op, position, a, b) in `log`. */
enum { B_PUT, B_DELETE, B_MERGE, B_RANGE };

typedef struct {
    PyObject_HEAD kvpy_db *db;
    kv_batch *b;
    PyObject *prefix;
    PyObject *log; /* list of (op, position, a, b) for merges and range deletes */
    int transaction, sync;
    size_t bytes;
    long busy;
} kvpy_batch;

PyObject *kvpy_batch_make(kvpy_db *db, PyObject *prefix, int transaction, int sync)
{
    kvpy_batch *self = PyObject_GC_New(kvpy_batch, &kvpy_batch_type);
    if (!self)
        return NULL;
    memset((char *)self + sizeof(PyObject), 0, sizeof *self - sizeof(PyObject));
    int rc = kv_batch_new(&self->b);
    if (rc != KV_OK) {
        Py_DECREF(self);
        return kvpy_raise(rc);
    }
    self->db = (kvpy_db *)Py_NewRef(db);
    self->prefix = prefix && PyBytes_GET_SIZE(prefix) ? Py_NewRef(prefix) : NULL;
    self->transaction = transaction;
    self->sync = sync;
    self->bytes = 12;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static int batch_usable(kvpy_batch *self)
{
    if (kvpy_db_closed(self->db))
        return 0;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the batch is being written by another thread");
        return 0;
    }
    return 1;
}

/* Adds one entry, keys with the batch's prefix in front. */
static int batch_add(kvpy_batch *self, int op, const char *k, size_t kn, const char *v, size_t vn)
{
    PyObject *pk = NULL, *pv = NULL;
    if (self->prefix) {
        pk = PyBytes_FromStringAndSize(NULL, PyBytes_GET_SIZE(self->prefix) + (Py_ssize_t)kn);
        if (!pk)
            return -1;
        memcpy(PyBytes_AS_STRING(pk), PyBytes_AS_STRING(self->prefix),
               (size_t)PyBytes_GET_SIZE(self->prefix));
        memcpy(PyBytes_AS_STRING(pk) + PyBytes_GET_SIZE(self->prefix), k, kn);
        k = PyBytes_AS_STRING(pk);
        kn = (size_t)PyBytes_GET_SIZE(pk);
        if (op == B_RANGE) {
            pv = PyBytes_FromStringAndSize(NULL, PyBytes_GET_SIZE(self->prefix) + (Py_ssize_t)vn);
            if (!pv) {
                Py_DECREF(pk);
                return -1;
            }
            memcpy(PyBytes_AS_STRING(pv), PyBytes_AS_STRING(self->prefix),
                   (size_t)PyBytes_GET_SIZE(self->prefix));
            memcpy(PyBytes_AS_STRING(pv) + PyBytes_GET_SIZE(self->prefix), v, vn);
            v = PyBytes_AS_STRING(pv);
            vn = (size_t)PyBytes_GET_SIZE(pv);
        }
    }
    uint32_t pos = kv_batch_count(self->b);
    int rc;
    switch (op) {
    case B_PUT: rc = kv_batch_put(self->b, k, kn, v, vn); break;
    case B_DELETE: rc = kv_batch_delete(self->b, k, kn); break;
    case B_MERGE: rc = kv_batch_merge(self->b, k, kn, v, vn); break;
    default: rc = kv_batch_delete_range(self->b, k, kn, v, vn);
    }
    if (rc == KV_OK && (op == B_MERGE || op == B_RANGE)) {
        if (!self->log && !(self->log = PyList_New(0)))
            rc = KV_ENOMEM;
        PyObject *e = rc == KV_OK
                          ? Py_BuildValue("(iIy#y#)", op, pos, k, (Py_ssize_t)kn, v, (Py_ssize_t)vn)
                          : NULL;
        if (!e || PyList_Append(self->log, e) < 0)
            rc = KV_ENOMEM;
        Py_XDECREF(e);
    }
    Py_XDECREF(pk);
    Py_XDECREF(pv);
    if (rc != KV_OK) {
        if (!PyErr_Occurred())
            kvpy_raise(rc);
        return -1;
    }
    self->bytes += kn + vn + 8;
    return 0;
}

static PyObject *batch_op(kvpy_batch *self, int op, PyObject *args, const char *fmt)
{
    PyObject *ko, *vo = NULL;
    if (!PyArg_ParseTuple(args, fmt, &ko, &vo))
        return NULL;
    if (!batch_usable(self))
        return NULL;
    kvpy_arg k, v = {"", 0, {0}, 0};
    if (kvpy_arg_get(ko, &k, op == B_RANGE ? "start" : "key") < 0)
        return NULL;
    if (vo && kvpy_arg_get(vo, &v, op == B_RANGE ? "stop" : "value") < 0) {
        kvpy_arg_release(&k);
        return NULL;
    }
    int r = batch_add(self, op, k.p, (size_t)k.n, v.p, (size_t)v.n);
    kvpy_arg_release(&k);
    kvpy_arg_release(&v);
    if (r < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *batch_put(kvpy_batch *self, PyObject *args)
{
    return batch_op(self, B_PUT, args, "OO:put");
}

static PyObject *batch_delete(kvpy_batch *self, PyObject *args)
{
    return batch_op(self, B_DELETE, args, "O:delete");
}

static PyObject *batch_merge(kvpy_batch *self, PyObject *args)
{
    return batch_op(self, B_MERGE, args, "OO:merge");
}

static PyObject *batch_delete_range(kvpy_batch *self, PyObject *args)
{
    return batch_op(self, B_RANGE, args, "OO:delete_range");
}

static void batch_reset(kvpy_batch *self)
{
    kv_batch_clear(self->b);
    Py_CLEAR(self->log);
    self->bytes = 12;
}

static PyObject *batch_clear_method(kvpy_batch *self, PyObject *unused)
{
    (void)unused;
    if (!batch_usable(self))
        return NULL;
    batch_reset(self);
    Py_RETURN_NONE;
}

static PyObject *batch_write(kvpy_batch *self, PyObject *unused)
{
    (void)unused;
    if (!batch_usable(self))
        return NULL;
    kvpy_db *db = self->db;
    /* sync=True forces a sync; else the database's own sync option holds,
     * as for put and delete. */
    kv_write_options wo = {1};
    const kv_write_options *opts = self->sync ? &wo : NULL;
    int rc;
    self->busy++;
    db->busy++;
    Py_BEGIN_ALLOW_THREADS;
    rc = kv_write_opts(db->db, opts, self->b);
    Py_END_ALLOW_THREADS;
    db->busy--;
    self->busy--;
    if (kvpy_callback_check(db))
        return NULL;
    if (rc != KV_OK)
        return kvpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *batch_approximate_size(kvpy_batch *self, PyObject *unused)
{
    (void)unused;
    if (!batch_usable(self))
        return NULL;
    return PyLong_FromSize_t(self->bytes);
}

/* Replays another batch into this one: its puts and deletes (foreach),
 * with its logged merges and range deletes put back at their positions. */
typedef struct {
    kvpy_batch *dst;
    PyObject *log;
    Py_ssize_t next; /* the log's next entry */
    uint32_t pos;    /* entries of the source replayed */
} append_ctx;

static int replay_logged(append_ctx *c)
{
    Py_ssize_t n = c->log ? PyList_GET_SIZE(c->log) : 0;
    while (c->next < n) {
        PyObject *e = PyList_GET_ITEM(c->log, c->next);
        unsigned long at = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(e, 1));
        if (at != c->pos)
            break;
        PyObject *k = PyTuple_GET_ITEM(e, 2), *v = PyTuple_GET_ITEM(e, 3);
        int op = (int)PyLong_AsLong(PyTuple_GET_ITEM(e, 0));
        /* Logged keys carry the source's prefix already: add them bare. */
        PyObject *saved = c->dst->prefix;
        c->dst->prefix = NULL;
        int r = batch_add(c->dst, op, PyBytes_AS_STRING(k), (size_t)PyBytes_GET_SIZE(k),
                          PyBytes_AS_STRING(v), (size_t)PyBytes_GET_SIZE(v));
        c->dst->prefix = saved;
        if (r < 0)
            return -1;
        c->next++;
        c->pos++;
    }
    return 0;
}

static int append_put(void *ctx, const void *k, size_t kn, const void *v, size_t vn)
{
    append_ctx *c = ctx;
    if (replay_logged(c) < 0)
        return -1;
    int rc = kv_batch_put(c->dst->b, k, kn, v, vn);
    c->dst->bytes += kn + vn + 8;
    c->pos++;
    return rc;
}

static int append_del(void *ctx, const void *k, size_t kn)
{
    append_ctx *c = ctx;
    if (replay_logged(c) < 0)
        return -1;
    int rc = kv_batch_delete(c->dst->b, k, kn);
    c->dst->bytes += kn + 8;
    c->pos++;
    return rc;
}

static PyObject *batch_append(kvpy_batch *self, PyObject *other)
{
    if (!PyObject_TypeCheck(other, &kvpy_batch_type)) {
        PyErr_SetString(PyExc_TypeError, "append() takes a WriteBatch");
        return NULL;
    }
    if (!batch_usable(self))
        return NULL;
    kvpy_batch *src = (kvpy_batch *)other;
    append_ctx c = {self, src->log, 0, 0};
    Py_XINCREF(c.log);
    int rc = kv_batch_foreach(src->b, &c, append_put, append_del);
    if (rc == KV_OK && replay_logged(&c) < 0)
        rc = -1;
    Py_XDECREF(c.log);
    if (rc != KV_OK) {
        if (!PyErr_Occurred())
            kvpy_raise(rc);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *batch_enter(kvpy_batch *self, PyObject *unused)
{
    (void)unused;
    if (!batch_usable(self))
        return NULL;
    return Py_NewRef(self);
}

static PyObject *batch_exit(kvpy_batch *self, PyObject *args)
{
    PyObject *type = Py_None, *val, *tb;
    if (!PyArg_ParseTuple(args, "|OOO", &type, &val, &tb))
        return NULL;
    if (!batch_usable(self))
        return NULL;
    if (!(self->transaction && type != Py_None)) {
        PyObject *r = batch_write(self, NULL);
        if (!r)
            return NULL;
        Py_DECREF(r);
    }
    batch_reset(self);
    Py_RETURN_FALSE;
}

static int batch_traverse(kvpy_batch *self, visitproc visit, void *arg)
{
    Py_VISIT(self->db);
    Py_VISIT(self->log);
    return 0;
}

static int batch_clear(kvpy_batch *self)
{
    Py_CLEAR(self->db);
    Py_CLEAR(self->log);
    Py_CLEAR(self->prefix);
    return 0;
}

static void batch_dealloc(kvpy_batch *self)
{
    PyObject_GC_UnTrack(self);
    kv_batch_free(self->b);
    batch_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *batch_len(kvpy_batch *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromUnsignedLong(kv_batch_count(self->b));
}

static PyMethodDef batch_methods[] = {
    {"put", (PyCFunction)batch_put, METH_VARARGS, "put(key, value)"},
    {"delete", (PyCFunction)batch_delete, METH_VARARGS, "delete(key)"},
    {"merge", (PyCFunction)batch_merge, METH_VARARGS, "merge(key, operand)"},
    {"delete_range", (PyCFunction)batch_delete_range, METH_VARARGS, "delete_range(start, stop)"},
    {"clear", (PyCFunction)batch_clear_method, METH_NOARGS, "clear(): remove every entry"},
    {"write", (PyCFunction)batch_write, METH_NOARGS, "write(): apply the batch atomically"},
    {"approximate_size", (PyCFunction)batch_approximate_size, METH_NOARGS, NULL},
    {"append", (PyCFunction)batch_append, METH_O, "append(other): add another batch's entries"},
    {"count", (PyCFunction)batch_len, METH_NOARGS, "count(): entries in the batch"},
    {"__enter__", (PyCFunction)batch_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)batch_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

PyTypeObject kvpy_batch_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kv.WriteBatch",
    .tp_basicsize = sizeof(kvpy_batch),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Writes applied together or not at all (DB.write_batch)",
    .tp_dealloc = (destructor)batch_dealloc,
    .tp_traverse = (traverseproc)batch_traverse,
    .tp_clear = (inquiry)batch_clear,
    .tp_methods = batch_methods,
};

/* ---- TableWriter ---------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD kv_table_writer *w; /* NULL once finished or abandoned */
    kvpy_callback *cmp, *merge;
    PyObject *path;
    long busy;
} kvpy_tw;

static PyObject *tw_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *name, *path;
    if (!PyArg_ParseTuple(args, "O:TableWriter", &name) || !PyUnicode_FSConverter(name, &path))
        return NULL;
    kv_options o;
    kv_options_init(&o);
    int create = 0, exists = 0;
    kvpy_callback *cmp, *merge;
    if (kvpy_parse_options(kwargs, &o, &cmp, &merge, &create, &exists) < 0) {
        Py_DECREF(path);
        return NULL;
    }
    kv_table_writer *w = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS;
    rc = kv_table_writer_open(PyBytes_AS_STRING(path), &o, &w);
    Py_END_ALLOW_THREADS;
    kvpy_tw *self = rc == KV_OK ? (kvpy_tw *)type->tp_alloc(type, 0) : NULL;
    if (!self) {
        if (w)
            kv_table_writer_abandon(w);
        kvpy_callback_free(cmp);
        kvpy_callback_free(merge);
        Py_DECREF(path);
        return rc == KV_OK ? NULL : kvpy_raise(rc);
    }
    self->w = w;
    self->cmp = cmp;
    self->merge = merge;
    self->path = path;
    return (PyObject *)self;
}

static int tw_usable(kvpy_tw *self)
{
    if (!self->w) {
        PyErr_SetString(PyExc_RuntimeError, "the table writer is finished");
        return 0;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the table writer is in use by another thread");
        return 0;
    }
    return 1;
}

static PyObject *tw_op(kvpy_tw *self, int op, PyObject *args, const char *fmt)
{
    PyObject *ko, *vo = NULL;
    if (!PyArg_ParseTuple(args, fmt, &ko, &vo) || !tw_usable(self))
        return NULL;
    kvpy_arg k, v = {"", 0, {0}, 0};
    if (kvpy_arg_get(ko, &k, "key") < 0)
        return NULL;
    if (vo && kvpy_arg_get(vo, &v, "value") < 0) {
        kvpy_arg_release(&k);
        return NULL;
    }
    kv_table_writer *w = self->w;
    int rc;
    self->busy++;
    Py_BEGIN_ALLOW_THREADS;
    switch (op) {
    case B_PUT: rc = kv_table_writer_put(w, k.p, (size_t)k.n, v.p, (size_t)v.n); break;
    case B_DELETE: rc = kv_table_writer_delete(w, k.p, (size_t)k.n); break;
    case B_MERGE: rc = kv_table_writer_merge(w, k.p, (size_t)k.n, v.p, (size_t)v.n); break;
    default: rc = kv_table_writer_delete_range(w, k.p, (size_t)k.n, v.p, (size_t)v.n);
    }
    Py_END_ALLOW_THREADS;
    self->busy--;
    kvpy_arg_release(&k);
    kvpy_arg_release(&v);
    if (rc != KV_OK)
        return kvpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *tw_put(kvpy_tw *self, PyObject *args)
{
    return tw_op(self, B_PUT, args, "OO:put");
}

static PyObject *tw_delete(kvpy_tw *self, PyObject *args)
{
    return tw_op(self, B_DELETE, args, "O:delete");
}

static PyObject *tw_merge(kvpy_tw *self, PyObject *args)
{
    return tw_op(self, B_MERGE, args, "OO:merge");
}

static PyObject *tw_delete_range(kvpy_tw *self, PyObject *args)
{
    return tw_op(self, B_RANGE, args, "OO:delete_range");
}

static void tw_free_callbacks(kvpy_tw *self)
{
    kvpy_callback_free(self->cmp);
    kvpy_callback_free(self->merge);
    self->cmp = self->merge = NULL;
}

static PyObject *tw_finish(kvpy_tw *self, PyObject *unused)
{
    (void)unused;
    if (!tw_usable(self))
        return NULL;
    kv_table_writer *w = self->w;
    self->w = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS;
    rc = kv_table_writer_finish(w);
    Py_END_ALLOW_THREADS;
    tw_free_callbacks(self);
    if (rc != KV_OK)
        return kvpy_raise(rc);
    Py_RETURN_NONE;
}

static void tw_abandon_impl(kvpy_tw *self)
{
    kvpy_wait_idle(&self->busy);
    kv_table_writer *w = self->w;
    self->w = NULL;
    if (w) {
        Py_BEGIN_ALLOW_THREADS;
        kv_table_writer_abandon(w);
        Py_END_ALLOW_THREADS;
    }
    tw_free_callbacks(self);
}

static PyObject *tw_abandon(kvpy_tw *self, PyObject *unused)
{
    (void)unused;
    tw_abandon_impl(self);
    Py_RETURN_NONE;
}

static PyObject *tw_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(self);
}

static PyObject *tw_exit(kvpy_tw *self, PyObject *args)
{
    PyObject *type = Py_None, *val, *tb;
    if (!PyArg_ParseTuple(args, "|OOO", &type, &val, &tb))
        return NULL;
    if (type != Py_None || !self->w) {
        tw_abandon_impl(self);
        Py_RETURN_FALSE;
    }
    PyObject *r = tw_finish(self, NULL);
    if (!r)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

static int tw_traverse(kvpy_tw *self, visitproc visit, void *arg)
{
    if (self->cmp)
        Py_VISIT(self->cmp->fn);
    if (self->merge)
        Py_VISIT(self->merge->fn);
    return 0;
}

static int tw_clear(kvpy_tw *self)
{
    tw_abandon_impl(self); /* the callbacks go with the writer */
    return 0;
}

static void tw_dealloc(kvpy_tw *self)
{
    PyObject_GC_UnTrack(self);
    tw_abandon_impl(self);
    Py_CLEAR(self->path);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *tw_get_path(kvpy_tw *self, void *c)
{
    (void)c;
    return PyUnicode_DecodeFSDefault(PyBytes_AS_STRING(self->path));
}

static PyMethodDef tw_methods[] = {
    {"put", (PyCFunction)tw_put, METH_VARARGS, "put(key, value): keys in ascending order"},
    {"delete", (PyCFunction)tw_delete, METH_VARARGS, "delete(key)"},
    {"merge", (PyCFunction)tw_merge, METH_VARARGS, "merge(key, operand)"},
    {"delete_range", (PyCFunction)tw_delete_range, METH_VARARGS, "delete_range(start, stop)"},
    {"finish", (PyCFunction)tw_finish, METH_NOARGS, "finish(): complete and sync the table"},
    {"abandon", (PyCFunction)tw_abandon, METH_NOARGS, "abandon(): remove the partial table"},
    {"__enter__", (PyCFunction)tw_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)tw_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef tw_getset[] = {
    {"path", (getter)tw_get_path, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject kvpy_tw_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kv.TableWriter",
    .tp_basicsize = sizeof(kvpy_tw),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)tw_traverse,
    .tp_clear = (inquiry)tw_clear,
    .tp_doc = "TableWriter(path, **options): a table for DB.ingest",
    .tp_new = tw_new,
    .tp_dealloc = (destructor)tw_dealloc,
    .tp_methods = tw_methods,
    .tp_getset = tw_getset,
};

int kvpy_objects_init_types(PyObject *m)
{
    if (PyType_Ready(&kvpy_snapshot_type) < 0 || PyType_Ready(&kvpy_batch_type) < 0 ||
        PyType_Ready(&kvpy_tw_type) < 0)
        return -1;
    if (PyModule_AddObjectRef(m, "Snapshot", (PyObject *)&kvpy_snapshot_type) < 0 ||
        PyModule_AddObjectRef(m, "WriteBatch", (PyObject *)&kvpy_batch_type) < 0 ||
        PyModule_AddObjectRef(m, "TableWriter", (PyObject *)&kvpy_tw_type) < 0)
        return -1;
    return 0;
}
