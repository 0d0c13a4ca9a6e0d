/* _kv_iter.c - kv._kv.Iterator (plyvel's iterator: a cursor between
 * entries of a range, moved by next() and prev()) and kv._kv.RawIterator
 * (LevelDB's: positioned on an entry), both on a kv_iter.
 *
 * The Iterator's cursor is START (before the range's first entry), END
 * (after its last) or AT: just before the entry the kv_iter stands on. So
 * next() from AT returns that entry and steps the kv_iter forward; prev()
 * steps it back and returns the entry it lands on. A reverse iterator
 * swaps the two.
 *
 * The range: on a bytewise database its bounds are exact kv_iter bounds
 * (an excluded start is start + "\0", its successor, and so is an included
 * stop). Under a comparator there is no successor, so kv's bounds hold
 * start and an excluded stop, and the iterator checks the rest itself:
 * it passes over a key equal to an excluded start (a comparator calls two
 * keys equal only when their bytes are) and stops after an included stop. */
#include "_kv.h"

#include <string.h>

enum { S_START, S_END, S_AT };
enum { M_FIRST, M_LAST, M_SEEK, M_NEXT, M_PREV };

typedef struct {
    kvpy_child head;
    kvpy_db *db; /* strong; NULL once closed */
    PyObject *snap;
    kv_iter *it;
    PyObject *db_prefix; /* bytes or NULL */
    PyObject *start, *stop;
    int include_start, include_stop, include_key, include_value, reverse;
    int manual; /* a comparator: bounds partly checked here */
    int empty;  /* the range holds nothing (start after stop) */
    int state;
    long busy;
    /* The entry the kv_iter stands on (valid until it moves). */
    const char *kp, *vp;
    size_t kn, vn;
} kvpy_iter;

static int compare(kvpy_db *db, const char *a, size_t an, const char *b, size_t bn)
{
    if (!db->bytewise)
        return db->cmp->cmp.compare(db->cmp->cmp.ctx, a, an, b, bn);
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : an < bn ? -1 : an > bn;
}

static int key_is(const kvpy_iter *self, PyObject *b)
{
    return b && self->kn == (size_t)PyBytes_GET_SIZE(b) &&
           !memcmp(self->kp, PyBytes_AS_STRING(b), self->kn);
}

/* Reads the entry the kv_iter stands on into kp/vp: 1, or 0 when it is
 * not valid (or the value's read failed: kv_iter_status says). */
static int load(kvpy_iter *self)
{
    if (!kv_iter_valid(self->it))
        return 0;
    self->kp = kv_iter_key(self->it, &self->kn);
    if (self->include_value && !(self->vp = kv_iter_value(self->it, &self->vn)))
        return 0;
    return 1;
}

/* One move of the kv_iter and the range checks the bounds leave to us;
 * 1 when it stands on an entry of the range. Runs without the GIL. */
static int move(kvpy_iter *self, int op, const char *k, size_t kn)
{
    kv_iter *it = self->it;
    if (self->empty)
        return 0;
    int tail = self->manual && self->include_stop && self->stop;
    switch (op) {
    case M_FIRST: kv_iter_seek_first(it); break;
    case M_LAST:
        if (tail) { /* the last key <= stop */
            kv_iter_seek(it, PyBytes_AS_STRING(self->stop), (size_t)PyBytes_GET_SIZE(self->stop));
            if (!kv_iter_valid(it))
                kv_iter_seek_last(it);
            else if (load(self) && !key_is(self, self->stop))
                kv_iter_prev(it);
        } else
            kv_iter_seek_last(it);
        break;
    case M_SEEK: kv_iter_seek(it, k, kn); break;
    case M_NEXT: kv_iter_next(it); break;
    default: kv_iter_prev(it);
    }
    if (!load(self))
        return 0;
    if (!self->manual)
        return 1;
    if (!self->include_start && key_is(self, self->start)) {
        if (op == M_LAST || op == M_PREV)
            return 0; /* the range's first key is behind it */
        kv_iter_next(it);
        if (!load(self))
            return 0;
    }
    if (tail && compare(self->db, self->kp, self->kn, PyBytes_AS_STRING(self->stop),
                        (size_t)PyBytes_GET_SIZE(self->stop)) > 0)
        return 0;
    return 1;
}

static int iter_closed(kvpy_iter *self)
{
    if (self->it && self->db && !self->db->closing)
        return 0;
    PyErr_SetString(PyExc_RuntimeError, "Database or iterator is closed");
    return 1;
}

/* Starts a call: -1 (exception set) when closed or in use by another
 * thread (a kv_iter is one thread's at a time). */
static int iter_enter(kvpy_iter *self)
{
    if (iter_closed(self))
        return -1;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the iterator is in use by another thread");
        return -1;
    }
    self->busy++;
    return 0;
}

/* Runs move() with the GIL released; -1 with an exception when the
 * iterator failed (or a callback raised), else its result. */
static int do_move(kvpy_iter *self, int op, const char *k, size_t kn)
{
    int valid;
    Py_BEGIN_ALLOW_THREADS;
    valid = move(self, op, k, kn);
    Py_END_ALLOW_THREADS;
    if (kvpy_callback_check(self->db))
        return -1;
    if (!valid) {
        int rc = kv_iter_status(self->it);
        if (rc != KV_OK) {
            kvpy_raise(rc);
            return -1;
        }
    }
    return valid;
}

/* The entry in kp/vp as plyvel gives it: (key, value), key, value or None. */
static PyObject *current(kvpy_iter *self)
{
    PyObject *k = NULL, *v = NULL;
    if (self->include_key) {
        size_t skip = self->db_prefix ? (size_t)PyBytes_GET_SIZE(self->db_prefix) : 0;
        if (skip > self->kn)
            skip = self->kn;
        if (!(k = PyBytes_FromStringAndSize(self->kp + skip, (Py_ssize_t)(self->kn - skip))))
            return NULL;
    }
    if (self->include_value && !(v = PyBytes_FromStringAndSize(self->vp, (Py_ssize_t)self->vn))) {
        Py_XDECREF(k);
        return NULL;
    }
    if (k && v) {
        PyObject *t = PyTuple_New(2);
        if (!t) {
            Py_DECREF(k);
            Py_DECREF(v);
            return NULL;
        }
        PyTuple_SET_ITEM(t, 0, k);
        PyTuple_SET_ITEM(t, 1, v);
        return t;
    }
    return k ? k : v ? v : Py_NewRef(Py_None);
}

/* Forward one entry; NULL without an exception at the end. */
static PyObject *real_next(kvpy_iter *self)
{
    int v;
    if (self->state == S_END)
        return NULL;
    if (self->state == S_START) {
        if ((v = do_move(self, M_FIRST, NULL, 0)) <= 0) {
            self->state = S_END;
            return NULL;
        }
        self->state = S_AT;
    }
    PyObject *out = current(self);
    if (!out)
        return NULL;
    if ((v = do_move(self, M_NEXT, NULL, 0)) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    self->state = v ? S_AT : S_END;
    return out;
}

static PyObject *real_prev(kvpy_iter *self)
{
    int v;
    if (self->state == S_START)
        return NULL;
    v = do_move(self, self->state == S_END ? M_LAST : M_PREV, NULL, 0);
    if (v <= 0) {
        if (v == 0)
            self->state = S_START;
        return NULL;
    }
    self->state = S_AT;
    return current(self);
}

static PyObject *iter_step(kvpy_iter *self, int forward)
{
    if (iter_enter(self) < 0)
        return NULL;
    PyObject *r = forward != self->reverse ? real_next(self) : real_prev(self);
    self->busy--;
    return r;
}

static PyObject *iter_next(kvpy_iter *self)
{
    return iter_step(self, 1);
}

static PyObject *iter_prev(kvpy_iter *self, PyObject *unused)
{
    (void)unused;
    PyObject *r = iter_step(self, 0);
    if (!r && !PyErr_Occurred())
        PyErr_SetNone(PyExc_StopIteration);
    return r;
}

static PyObject *iter_next_method(kvpy_iter *self, PyObject *unused)
{
    (void)unused;
    PyObject *r = iter_step(self, 1);
    if (!r && !PyErr_Occurred())
        PyErr_SetNone(PyExc_StopIteration);
    return r;
}

static PyObject *iter_seek_to(kvpy_iter *self, int state)
{
    if (iter_closed(self))
        return NULL;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the iterator is in use by another thread");
        return NULL;
    }
    self->state = state;
    Py_RETURN_NONE;
}

static PyObject *iter_seek_to_start(kvpy_iter *self, PyObject *unused)
{
    (void)unused;
    return iter_seek_to(self, S_START);
}

static PyObject *iter_seek_to_stop(kvpy_iter *self, PyObject *unused)
{
    (void)unused;
    return iter_seek_to(self, S_END);
}

static PyObject *iter_seek(kvpy_iter *self, PyObject *target)
{
    kvpy_arg t;
    if (kvpy_arg_get(target, &t, "target") < 0)
        return NULL;
    if (iter_enter(self) < 0) {
        kvpy_arg_release(&t);
        return NULL;
    }
    PyObject *joined = NULL;
    const char *k = t.p;
    size_t kn = (size_t)t.n;
    if (self->db_prefix) {
        joined = PyBytes_FromStringAndSize(NULL, PyBytes_GET_SIZE(self->db_prefix) + t.n);
        if (!joined)
            goto out;
        memcpy(PyBytes_AS_STRING(joined), PyBytes_AS_STRING(self->db_prefix),
               (size_t)PyBytes_GET_SIZE(self->db_prefix));
        memcpy(PyBytes_AS_STRING(joined) + PyBytes_GET_SIZE(self->db_prefix), t.p, (size_t)t.n);
        k = PyBytes_AS_STRING(joined);
        kn = (size_t)PyBytes_GET_SIZE(joined);
    }
    int v = do_move(self, M_SEEK, k, kn);
    if (v >= 0)
        self->state = v ? S_AT : S_END;
out:
    self->busy--;
    Py_XDECREF(joined);
    kvpy_arg_release(&t);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

/* ---- lifetime ------------------------------------------------------------------------ */

void kvpy_iter_close(kvpy_child *c)
{
    kvpy_iter *self = (kvpy_iter *)c;
    kvpy_wait_idle(&self->busy);
    kvpy_child_unlink(c);
    /* it is taken before the GIL goes, so a second closer meanwhile (another
     * thread, or the db's close) frees nothing; db is held here, as that
     * closer may clear self->db. */
    kv_iter *it = self->it;
    kvpy_db *db = (kvpy_db *)Py_XNewRef(self->db);
    self->it = NULL;
    if (it) { /* counted on the db: its close must not pass a free in flight */
        db->busy++;
        Py_BEGIN_ALLOW_THREADS;
        kv_iter_free(it);
        Py_END_ALLOW_THREADS;
        db->busy--;
    }
    Py_CLEAR(self->snap);
    Py_CLEAR(self->db);
    Py_XDECREF(db);
}

static PyObject *iter_close(kvpy_iter *self, PyObject *unused)
{
    (void)unused;
    if (kvpy_in_callback) {
        PyErr_SetString(PyExc_RuntimeError, "an iterator cannot be closed from a callback");
        return NULL;
    }
    kvpy_iter_close(&self->head);
    Py_RETURN_NONE;
}

static int iter_traverse(kvpy_iter *self, visitproc visit, void *arg)
{
    Py_VISIT(self->db);
    Py_VISIT(self->snap);
    return 0;
}

static int iter_clear(kvpy_iter *self)
{
    kvpy_iter_close(&self->head);
    Py_CLEAR(self->db_prefix);
    Py_CLEAR(self->start);
    Py_CLEAR(self->stop);
    return 0;
}

static void iter_dealloc(kvpy_iter *self)
{
    PyObject_GC_UnTrack(self);
    iter_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *iter_enter_cm(PyObject *self, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(self);
}

static PyObject *iter_exit_cm(kvpy_iter *self, PyObject *args)
{
    (void)args;
    kvpy_iter_close(&self->head);
    Py_RETURN_FALSE;
}

/* A new iterator object of type, with its kv_iter, linked to db. */
static kvpy_iter *iter_new(PyTypeObject *type, kvpy_db *db, kvpy_snapshot *snap)
{
    if (kvpy_db_closed(db))
        return NULL;
    if (snap && !snap->snap) {
        PyErr_SetString(PyExc_RuntimeError, "Snapshot is closed");
        return NULL;
    }
    kvpy_iter *self = PyObject_GC_New(kvpy_iter, type);
    if (!self)
        return NULL;
    memset((char *)self + sizeof(PyObject), 0, sizeof *self - sizeof(PyObject));
    self->head.kind = KVPY_ITER;
    kv_iter *it = NULL;
    int rc;
    db->busy++;
    if (snap)
        snap->busy++; /* its close waits: kv_iter_new reads the snapshot */
    Py_BEGIN_ALLOW_THREADS;
    rc = kv_iter_new(db->db, snap ? snap->snap : NULL, &it);
    Py_END_ALLOW_THREADS;
    if (snap)
        snap->busy--;
    db->busy--;
    if (rc != KV_OK) {
        Py_DECREF(self);
        return (kvpy_iter *)kvpy_raise(rc);
    }
    self->it = it;
    self->db = (kvpy_db *)Py_NewRef(db);
    self->snap = snap ? Py_NewRef(snap) : NULL;
    kvpy_child_link(db, &self->head);
    PyObject_GC_Track(self);
    return self;
}

/* The first key after every key that starts with s (None: there is none). */
static PyObject *bytes_increment(PyObject *s)
{
    Py_ssize_t i = PyBytes_GET_SIZE(s);
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(s);
    while (i > 0 && p[i - 1] == 0xff)
        i--;
    if (i == 0)
        return NULL;
    /* A new object, never the interpreter's cached one-byte bytes. */
    PyObject *r = PyBytes_FromStringAndSize(NULL, i);
    if (r) {
        memcpy(PyBytes_AS_STRING(r), p, (size_t)i);
        PyBytes_AS_STRING(r)[i - 1]++;
    }
    return r;
}

static PyObject *concat(PyObject *a, PyObject *b)
{
    PyObject *r = Py_NewRef(a);
    PyBytes_Concat(&r, b);
    return r;
}

static PyObject *with_nul(PyObject *b)
{
    PyObject *r = PyBytes_FromStringAndSize(NULL, PyBytes_GET_SIZE(b) + 1);
    if (r) {
        memcpy(PyBytes_AS_STRING(r), PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
        PyBytes_AS_STRING(r)[PyBytes_GET_SIZE(b)] = 0;
    }
    return r;
}

/* Turns start/stop/prefix (and a PrefixedDB's db_prefix) into the range,
 * as plyvel does, into self->start, stop and the include flags. */
static int set_range(kvpy_iter *self, PyObject *start, PyObject *stop, PyObject *prefix)
{
    /* self->start and stop own what is made here as soon as it is made:
     * on an error the iterator's dealloc frees it. */
    PyObject *dbp = self->db_prefix;
    if (prefix && (start || stop)) {
        PyErr_SetString(PyExc_TypeError, "'prefix' cannot be used together with 'start' or 'stop'");
        return -1;
    }
    if (prefix) {
        PyObject *p = dbp ? concat(dbp, prefix) : Py_NewRef(prefix);
        if (!(self->start = p))
            return -1;
        self->stop = bytes_increment(p); /* NULL: no key follows them all */
        self->include_start = 1;
        self->include_stop = 0;
        return self->stop || !PyErr_Occurred() ? 0 : -1;
    }
    if (!dbp) {
        self->start = Py_XNewRef(start);
        self->stop = Py_XNewRef(stop);
        return 0;
    }
    if (!start)
        self->include_start = 1;
    if (!(self->start = start ? concat(dbp, start) : Py_NewRef(dbp)))
        return -1;
    if (!stop)
        self->include_stop = 0;
    self->stop = stop ? concat(dbp, stop) : bytes_increment(dbp);
    return self->stop || !PyErr_Occurred() ? 0 : -1;
}

/* Sets the kv_iter's bounds for the range (see the top of the file). */
static int set_bounds(kvpy_iter *self)
{
    PyObject *lo = NULL, *hi = NULL;
    self->manual = !self->db->bytewise;
    if (self->start)
        lo = self->include_start || self->manual ? Py_NewRef(self->start) : with_nul(self->start);
    if (self->stop) {
        if (!self->include_stop)
            hi = Py_NewRef(self->stop);
        else if (!self->manual)
            hi = with_nul(self->stop);
    }
    if ((self->start && !lo) || (self->stop && !hi && !self->manual)) {
        Py_XDECREF(lo);
        Py_XDECREF(hi);
        return -1;
    }
    int rc = KV_OK;
    if (lo && hi &&
        compare(self->db, PyBytes_AS_STRING(lo), (size_t)PyBytes_GET_SIZE(lo),
                PyBytes_AS_STRING(hi), (size_t)PyBytes_GET_SIZE(hi)) > 0)
        self->empty = 1;
    else if (self->manual && self->start && self->stop &&
             compare(self->db, PyBytes_AS_STRING(self->start),
                     (size_t)PyBytes_GET_SIZE(self->start), PyBytes_AS_STRING(self->stop),
                     (size_t)PyBytes_GET_SIZE(self->stop)) > 0)
        self->empty = 1;
    else if (lo || hi)
        rc = kv_iter_set_bounds(self->it, lo ? PyBytes_AS_STRING(lo) : NULL,
                                lo ? (size_t)PyBytes_GET_SIZE(lo) : 0,
                                hi ? PyBytes_AS_STRING(hi) : NULL,
                                hi ? (size_t)PyBytes_GET_SIZE(hi) : 0);
    Py_XDECREF(lo);
    Py_XDECREF(hi);
    if (kvpy_callback_check(self->db))
        return -1;
    if (rc != KV_OK) {
        kvpy_raise(rc);
        return -1;
    }
    return 0;
}

static int bytes_or_none(PyObject **o, const char *what)
{
    if (*o == Py_None)
        *o = NULL;
    if (*o && !PyBytes_Check(*o)) {
        PyErr_Format(PyExc_TypeError, "'%s' must be bytes or None", what);
        return -1;
    }
    return 0;
}

PyObject *kvpy_iter_make(kvpy_db *db, kvpy_snapshot *snap, PyObject *db_prefix, PyObject *args,
                         PyObject *kwargs)
{
    static char *kw[] = {"reverse",          "start",      "stop",        "include_start",
                         "include_stop",     "prefix",     "include_key", "include_value",
                         "verify_checksums", "fill_cache", NULL};
    int reverse = 0, include_start = 1, include_stop = 0, include_key = 1, include_value = 1;
    PyObject *start = Py_None, *stop = Py_None, *prefix = Py_None, *vc = NULL, *fc = NULL;
    PyObject *empty = NULL;
    if (!args && !(args = empty = PyTuple_New(0)))
        return NULL;
    int ok = PyArg_ParseTupleAndKeywords(args, kwargs, "|$pOOppOppOO:iterator", kw, &reverse,
                                         &start, &stop, &include_start, &include_stop, &prefix,
                                         &include_key, &include_value, &vc, &fc);
    Py_XDECREF(empty);
    if (!ok || bytes_or_none(&start, "start") < 0 || bytes_or_none(&stop, "stop") < 0 ||
        bytes_or_none(&prefix, "prefix") < 0)
        return NULL;
    if (db_prefix && !PyBytes_Check(db_prefix)) {
        PyErr_SetString(PyExc_TypeError, "the database prefix must be bytes");
        return NULL;
    }
    kvpy_iter *self = iter_new(&kvpy_iter_type, db, snap);
    if (!self)
        return NULL;
    self->reverse = reverse;
    self->include_start = include_start;
    self->include_stop = include_stop;
    self->include_key = include_key;
    self->include_value = include_value;
    self->db_prefix = db_prefix && PyBytes_GET_SIZE(db_prefix) ? Py_NewRef(db_prefix) : NULL;
    if (set_range(self, start, stop, prefix) < 0 || set_bounds(self) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->state = reverse ? S_END : S_START;
    return (PyObject *)self;
}

/* ---- RawIterator ------------------------------------------------------------------------ */

PyObject *kvpy_raw_iter_make(kvpy_db *db, kvpy_snapshot *snap)
{
    kvpy_iter *self = iter_new(&kvpy_raw_iter_type, db, snap);
    if (self)
        self->include_value = 1;
    return (PyObject *)self;
}

static PyObject *raw_valid(kvpy_iter *self, PyObject *unused)
{
    (void)unused;
    if (iter_closed(self))
        return NULL;
    return PyBool_FromLong(!self->busy && kv_iter_valid(self->it));
}

/* A move of the raw iterator; need_valid: refused when not on an entry. */
static PyObject *raw_move(kvpy_iter *self, int op, PyObject *target, int need_valid)
{
    kvpy_arg t = {"", 0, {0}, 0};
    if (target && kvpy_arg_get(target, &t, "target") < 0)
        return NULL;
    if (iter_enter(self) < 0) {
        kvpy_arg_release(&t);
        return NULL;
    }
    PyObject *r = NULL;
    if (need_valid && !kv_iter_valid(self->it))
        PyErr_SetNone(kvpy_invalid_iter);
    else if (do_move(self, op, t.p, (size_t)t.n) >= 0)
        r = Py_NewRef(Py_None);
    self->busy--;
    kvpy_arg_release(&t);
    return r;
}

static PyObject *raw_seek_to_first(kvpy_iter *self, PyObject *unused)
{
    (void)unused;
    return raw_move(self, M_FIRST, NULL, 0);
}

static PyObject *raw_seek_to_last(kvpy_iter *self, PyObject *unused)
{
    (void)unused;
    return raw_move(self, M_LAST, NULL, 0);
}

static PyObject *raw_seek(kvpy_iter *self, PyObject *target)
{
    return raw_move(self, M_SEEK, target, 0);
}

/* seek_for_prev(target): the last key <= target. */
static PyObject *raw_seek_for_prev(kvpy_iter *self, PyObject *target)
{
    PyObject *r = raw_move(self, M_SEEK, target, 0);
    if (!r)
        return NULL;
    Py_DECREF(r);
    kvpy_arg t;
    if (kvpy_arg_get(target, &t, "target") < 0)
        return NULL;
    int op = -1;
    if (!kv_iter_valid(self->it))
        op = M_LAST;
    else if (!(self->kn == (size_t)t.n && !memcmp(self->kp, t.p, self->kn)))
        op = M_PREV;
    kvpy_arg_release(&t);
    return op < 0 ? Py_NewRef(Py_None) : raw_move(self, op, NULL, 0);
}

static PyObject *raw_next(kvpy_iter *self, PyObject *unused)
{
    (void)unused;
    return raw_move(self, M_NEXT, NULL, 1);
}

static PyObject *raw_prev(kvpy_iter *self, PyObject *unused)
{
    (void)unused;
    return raw_move(self, M_PREV, NULL, 1);
}

static PyObject *raw_part(kvpy_iter *self, int value)
{
    if (iter_closed(self))
        return NULL;
    if (self->busy || !kv_iter_valid(self->it)) {
        PyErr_SetNone(kvpy_invalid_iter);
        return NULL;
    }
    return value ? PyBytes_FromStringAndSize(self->vp, (Py_ssize_t)self->vn)
                 : PyBytes_FromStringAndSize(self->kp, (Py_ssize_t)self->kn);
}

static PyObject *raw_key(kvpy_iter *self, PyObject *unused)
{
    (void)unused;
    return raw_part(self, 0);
}

static PyObject *raw_value(kvpy_iter *self, PyObject *unused)
{
    (void)unused;
    return raw_part(self, 1);
}

static PyObject *raw_item(kvpy_iter *self, PyObject *unused)
{
    (void)unused;
    PyObject *k = raw_part(self, 0), *v = k ? raw_part(self, 1) : NULL;
    if (!v) {
        Py_XDECREF(k);
        return NULL;
    }
    PyObject *t = PyTuple_Pack(2, k, v);
    Py_DECREF(k);
    Py_DECREF(v);
    return t;
}

/* ---- types ------------------------------------------------------------------------------ */

static PyMethodDef iter_methods[] = {
    {"prev", (PyCFunction)iter_prev, METH_NOARGS, "prev(): the entry before the cursor"},
    {"next", (PyCFunction)iter_next_method, METH_NOARGS, "next(): the entry after the cursor"},
    {"seek_to_start", (PyCFunction)iter_seek_to_start, METH_NOARGS, NULL},
    {"seek_to_stop", (PyCFunction)iter_seek_to_stop, METH_NOARGS, NULL},
    {"seek", (PyCFunction)iter_seek, METH_O,
     "seek(target): the cursor before the first key >= target"},
    {"close", (PyCFunction)iter_close, METH_NOARGS, NULL},
    {"__enter__", (PyCFunction)iter_enter_cm, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)iter_exit_cm, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef raw_methods[] = {
    {"valid", (PyCFunction)raw_valid, METH_NOARGS, NULL},
    {"seek_to_first", (PyCFunction)raw_seek_to_first, METH_NOARGS, NULL},
    {"seek_to_last", (PyCFunction)raw_seek_to_last, METH_NOARGS, NULL},
    {"seek", (PyCFunction)raw_seek, METH_O, NULL},
    {"seek_for_prev", (PyCFunction)raw_seek_for_prev, METH_O, NULL},
    {"next", (PyCFunction)raw_next, METH_NOARGS, NULL},
    {"prev", (PyCFunction)raw_prev, METH_NOARGS, NULL},
    {"key", (PyCFunction)raw_key, METH_NOARGS, NULL},
    {"value", (PyCFunction)raw_value, METH_NOARGS, NULL},
    {"item", (PyCFunction)raw_item, METH_NOARGS, NULL},
    {"close", (PyCFunction)iter_close, METH_NOARGS, NULL},
    {"__enter__", (PyCFunction)iter_enter_cm, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)iter_exit_cm, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

PyTypeObject kvpy_iter_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kv.Iterator",
    .tp_basicsize = sizeof(kvpy_iter),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "An iterator over a range of the database (DB.iterator)",
    .tp_dealloc = (destructor)iter_dealloc,
    .tp_traverse = (traverseproc)iter_traverse,
    .tp_clear = (inquiry)iter_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)iter_next,
    .tp_as_sequence = &kvpy_no_contains,
    .tp_methods = iter_methods,
};

PyTypeObject kvpy_raw_iter_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kv.RawIterator",
    .tp_basicsize = sizeof(kvpy_iter),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A cursor on the database's entries (DB.raw_iterator)",
    .tp_dealloc = (destructor)iter_dealloc,
    .tp_traverse = (traverseproc)iter_traverse,
    .tp_clear = (inquiry)iter_clear,
    .tp_methods = raw_methods,
};

int kvpy_iter_init_types(PyObject *m)
{
    if (PyType_Ready(&kvpy_iter_type) < 0 || PyType_Ready(&kvpy_raw_iter_type) < 0)
        return -1;
    if (PyModule_AddObjectRef(m, "Iterator", (PyObject *)&kvpy_iter_type) < 0 ||
        PyModule_AddObjectRef(m, "RawIterator", (PyObject *)&kvpy_raw_iter_type) < 0)
        return -1;
    return 0;
}
