/* _kv.c - the module kv._kv: its exceptions, the mapping of kv's status
 * codes onto them, the open options (plyvel's names and kv_options'), the
 * Python callbacks kv calls (comparators, merge operators), destroy_db and
 * repair_db, and how a short call leaves the GIL (kvpy_leave). The objects
 * are in _kv_db.c, _kv_iter.c and _kv_objects.c. */
#include "_kv.h"

#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

PyObject *kvpy_error, *kvpy_ioerror, *kvpy_corruption, *kvpy_invalid_iter;

/* ---- leaving the GIL for a short call (_kv.h) ------------------------------------------- */

static _Atomic int gil_held;

/* Spins of the pause instruction, then yields, before asking for the GIL
 * anyway: the first cover a GIL held for the interpreter's part of a call
 * (under a microsecond), the yields let a thread on the same core run (the
 * holder, preempted). Chosen by python/bench.py's 4-thread gets on 2 cores:
 * these gave 1.7x to 1.9x one thread's rate; without the claim below (all
 * waiters asking at once) 0.9x to 1.7x, whatever the counts. */
#define SPINS 200
#define YIELDS 2000

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

PyThreadState *kvpy_leave(void)
{
    PyThreadState *ts = PyEval_SaveThread();
    atomic_store_explicit(&gil_held, 0, memory_order_release);
    return ts;
}

void kvpy_return(PyThreadState *ts)
{
    /* Claims the flag first: of the threads waiting here, one asks for the
     * GIL when it is let go, the others go on waiting here, not asleep in
     * PyEval_RestoreThread. */
    for (int i = 0; i < SPINS + YIELDS; i++) {
        int free = 0;
        if (atomic_compare_exchange_weak_explicit(&gil_held, &free, 1, memory_order_acquire,
                                                  memory_order_relaxed))
            break;
        if (i < SPINS)
            cpu_relax();
        else
            sched_yield();
    }
    PyEval_RestoreThread(ts);
    atomic_store_explicit(&gil_held, 1, memory_order_relaxed);
}
_Thread_local int kvpy_in_callback;

/* ---- errors ------------------------------------------------------------------- */

PyObject *kvpy_raise(int rc)
{
    if (rc == KV_ENOMEM)
        return PyErr_NoMemory();
    PyObject *type = kvpy_error;
    if (rc == KV_EIO || rc == KV_ENOSPC || rc == KV_EPERM)
        type = kvpy_ioerror;
    else if (rc == KV_ECORRUPT)
        type = kvpy_corruption;
    const char *text = kv_error_text();
    PyObject *exc = PyObject_CallFunction(type, "s", *text ? text : kv_strerror(rc));
    if (!exc)
        return NULL;
    PyObject *code = PyLong_FromLong(rc);
    if (code) {
        PyObject_SetAttrString(exc, "code", code);
        Py_DECREF(code);
    }
    PyErr_SetObject(type, exc);
    Py_DECREF(exc);
    return NULL;
}

PyObject *kvpy_closed(void)
{
    PyErr_SetString(PyExc_RuntimeError, "Database is closed");
    return NULL;
}

/* Raises kv.Error for cb's pending exception, which becomes its cause. */
static int callback_raise(kvpy_callback *cb, const char *what)
{
    PyObject *cause = cb->exc;
    cb->exc = NULL;
    PyObject *exc = PyObject_CallFunction(kvpy_error, "s", "");
    PyObject *msg = PyUnicode_FromFormat("the %s %s raised %R", what, cb->name, cause);
    if (!exc || !msg) {
        Py_XDECREF(exc);
        Py_XDECREF(msg);
        Py_DECREF(cause);
        return 1;
    }
    PyObject *args = PyTuple_Pack(1, msg);
    Py_DECREF(msg);
    if (args) {
        PyObject_SetAttrString(exc, "args", args);
        Py_DECREF(args);
    }
    PyException_SetCause(exc, cause); /* steals cause */
    PyErr_SetObject(kvpy_error, exc);
    Py_DECREF(exc);
    return 1;
}

int kvpy_callback_check(kvpy_db *db)
{
    if (db->cmp && db->cmp->exc)
        return callback_raise(db->cmp, "comparator");
    if (db->merge && db->merge->exc)
        return callback_raise(db->merge, "merge operator");
    return 0;
}

/* `key in x` for a snapshot or an iterator would walk the pairs: refused,
 * as plyvel does. */
static int no_contains(PyObject *self, PyObject *key)
{
    (void)self;
    (void)key;
    PyErr_SetString(PyExc_TypeError, "__contains__ is not supported: use get(key) is not None");
    return -1;
}

PySequenceMethods kvpy_no_contains = {.sq_contains = no_contains};

/* ---- arguments ------------------------------------------------------------------ */

int kvpy_arg_get(PyObject *o, kvpy_arg *a, const char *what)
{
    a->has_view = 0;
    if (PyBytes_Check(o)) {
        a->p = PyBytes_AS_STRING(o);
        a->n = PyBytes_GET_SIZE(o);
        return 0;
    }
    if (PyUnicode_Check(o) || !PyObject_CheckBuffer(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be bytes, not %.100s", what, Py_TYPE(o)->tp_name);
        return -1;
    }
    if (PyObject_GetBuffer(o, &a->view, PyBUF_SIMPLE) < 0)
        return -1;
    a->has_view = 1;
    a->p = a->view.buf;
    a->n = a->view.len;
    return 0;
}

void kvpy_arg_release(kvpy_arg *a)
{
    if (a->has_view) {
        PyBuffer_Release(&a->view);
        a->has_view = 0;
    }
}

void kvpy_wait_idle(volatile long *busy)
{
    while (*busy) {
        Py_BEGIN_ALLOW_THREADS;
        usleep(200);
        Py_END_ALLOW_THREADS;
    }
}

void kvpy_child_link(kvpy_db *db, kvpy_child *c)
{
    c->next = db->children.next;
    c->prev = &db->children;
    c->next->prev = c;
    db->children.next = c;
}

void kvpy_child_unlink(kvpy_child *c)
{
    if (c->next) {
        c->prev->next = c->next;
        c->next->prev = c->prev;
        c->prev = c->next = NULL;
    }
}

/* ---- callbacks kv calls ------------------------------------------------------------ */

/* Keeps the first exception a callback raised until a call reports it. */
static void callback_keep_exc(kvpy_callback *cb)
{
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    if (v && tb)
        PyException_SetTraceback(v, tb);
    Py_XDECREF(t);
    Py_XDECREF(tb);
    if (!cb->exc)
        cb->exc = v;
    else
        Py_XDECREF(v);
}

static int bytewise(const void *a, size_t alen, const void *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c ? c : alen < blen ? -1 : alen > blen;
}

/* The comparator must not fail: when the callable raises or returns what
 * is not an int, the exception is kept for the caller and the keys compare
 * bytewise (the order is then the caller's bug, never a crash). */
static int py_compare(void *ctx, const void *a, size_t alen, const void *b, size_t blen)
{
    kvpy_callback *cb = ctx;
    if (_Py_IsFinalizing())
        return bytewise(a, alen, b, blen);
    PyGILState_STATE g = PyGILState_Ensure();
    kvpy_in_callback++;
    int r = 0, ok = 0;
    PyObject *res = PyObject_CallFunction(cb->fn, "y#y#", (const char *)a, (Py_ssize_t)alen,
                                          (const char *)b, (Py_ssize_t)blen);
    if (res) {
        long v = PyLong_AsLong(res);
        if (!(v == -1 && PyErr_Occurred())) {
            r = v < 0 ? -1 : v > 0;
            ok = 1;
        }
        Py_DECREF(res);
    }
    if (!ok) {
        callback_keep_exc(cb);
        r = bytewise(a, alen, b, blen);
    }
    kvpy_in_callback--;
    PyGILState_Release(g);
    return r;
}

/* A Python merge operator: fn(key, existing or None, [operands]) -> bytes. */
static int py_full_merge(void *state, const void *key, size_t klen, const void *existing,
                         size_t existing_len, const void *const *operands,
                         const size_t *operand_lens, size_t n, void **result, size_t *result_len)
{
    kvpy_callback *cb = state;
    if (_Py_IsFinalizing())
        return 1;
    PyGILState_STATE g = PyGILState_Ensure();
    kvpy_in_callback++;
    int rc = 1;
    PyObject *ops = PyList_New((Py_ssize_t)n), *res = NULL;
    for (size_t i = 0; ops && i < n; i++) {
        PyObject *o = PyBytes_FromStringAndSize(operands[i], (Py_ssize_t)operand_lens[i]);
        if (!o) {
            Py_CLEAR(ops);
            break;
        }
        PyList_SET_ITEM(ops, (Py_ssize_t)i, o);
    }
    if (ops) {
        if (existing)
            res = PyObject_CallFunction(cb->fn, "y#y#O", (const char *)key, (Py_ssize_t)klen,
                                        (const char *)existing, (Py_ssize_t)existing_len, ops);
        else
            res = PyObject_CallFunction(cb->fn, "y#OO", (const char *)key, (Py_ssize_t)klen,
                                        Py_None, ops);
    }
    if (res) {
        kvpy_arg a;
        if (kvpy_arg_get(res, &a, "a merge operator's result") == 0) {
            void *p = malloc(a.n ? (size_t)a.n : 1);
            if (p) {
                memcpy(p, a.p, (size_t)a.n);
                *result = p;
                *result_len = (size_t)a.n;
                rc = 0;
            } else
                PyErr_NoMemory();
            kvpy_arg_release(&a);
        }
    }
    if (rc)
        callback_keep_exc(cb);
    Py_XDECREF(res);
    Py_XDECREF(ops);
    kvpy_in_callback--;
    PyGILState_Release(g);
    return rc;
}

static kvpy_callback *callback_new(PyObject *fn, const char *name)
{
    kvpy_callback *cb = calloc(1, sizeof *cb);
    if (!cb || !(cb->name = strdup(name))) {
        free(cb);
        PyErr_NoMemory();
        return NULL;
    }
    cb->fn = Py_NewRef(fn);
    cb->cmp.name = cb->name;
    cb->cmp.compare = py_compare;
    cb->cmp.ctx = cb;
    cb->merge.name = cb->name;
    cb->merge.state = cb;
    cb->merge.full_merge = py_full_merge;
    return cb;
}

void kvpy_callback_free(kvpy_callback *cb)
{
    if (!cb)
        return;
    Py_XDECREF(cb->fn);
    Py_XDECREF(cb->exc);
    free(cb->name);
    free(cb);
}

/* ---- options -------------------------------------------------------------------- */

enum { OPT_SIZE, OPT_INT, OPT_BOOL, OPT_DOUBLE, OPT_U64 };

/* kv_options' fields by name, those that take a plain number. */
static const struct opt {
    const char *name;
    size_t off;
    int type;
} opts_table[] = {
#define O(f, t)                                                                                    \
    {                                                                                              \
#f, offsetof(kv_options, f), t                                                             \
    }
    O(sync, OPT_BOOL),
    O(write_buffer_size, OPT_SIZE),
    O(block_size, OPT_SIZE),
    O(block_cache_size, OPT_SIZE),
    O(bloom_bits_per_key, OPT_DOUBLE),
    O(compression_level, OPT_INT),
    O(max_open_files, OPT_INT),
    O(l0_compaction_trigger, OPT_INT),
    O(l0_slowdown_trigger, OPT_INT),
    O(l0_stop_trigger, OPT_INT),
    O(target_file_size, OPT_SIZE),
    O(max_bytes_for_level_base, OPT_SIZE),
    O(memtable_filter, OPT_BOOL),
    O(use_direct_reads, OPT_BOOL),
    O(filter_keyed_hash, OPT_BOOL),
    O(compression_dict_bytes, OPT_SIZE),
    O(compression_min_level, OPT_INT),
    O(compressed_block_size, OPT_SIZE),
    O(delayed_write_rate, OPT_SIZE),
    O(background_nice, OPT_INT),
    O(blob_file_size, OPT_SIZE),
    O(blob_gc_threshold, OPT_DOUBLE),
    O(idle_compaction_ms, OPT_INT),
    O(dynamic_level_bytes, OPT_BOOL),
    O(ttl_seconds, OPT_U64),
    O(read_only, OPT_BOOL),
    O(prefix_len, OPT_SIZE),
    O(range_filter_bits, OPT_DOUBLE),
    O(runs_per_level, OPT_INT),
    O(max_background_jobs, OPT_INT),
    O(table_memory_budget, OPT_SIZE),
#undef O
};

static int set_number(kv_options *o, const struct opt *d, PyObject *v)
{
    char *p = (char *)o + d->off;
    if (d->type == OPT_BOOL) {
        int b = PyObject_IsTrue(v);
        if (b < 0)
            return -1;
        *(int *)p = b;
        return 0;
    }
    if (d->type == OPT_DOUBLE) {
        double x = PyFloat_AsDouble(v);
        if (x == -1.0 && PyErr_Occurred())
            return -1;
        *(double *)p = x;
        return 0;
    }
    if (!PyLong_Check(v)) {
        PyErr_Format(PyExc_TypeError, "option %s must be an int, not %.100s", d->name,
                     Py_TYPE(v)->tp_name);
        return -1;
    }
    if (d->type == OPT_INT) {
        long x = PyLong_AsLong(v);
        if (x == -1 && PyErr_Occurred())
            return -1;
        if (x < INT_MIN || x > INT_MAX) {
            PyErr_Format(PyExc_OverflowError, "option %s out of range", d->name);
            return -1;
        }
        *(int *)p = (int)x;
    } else if (d->type == OPT_SIZE) {
        size_t x = PyLong_AsSize_t(v);
        if (x == (size_t)-1 && PyErr_Occurred())
            return -1;
        *(size_t *)p = x;
    } else {
        unsigned long long x = PyLong_AsUnsignedLongLong(v);
        if (x == (unsigned long long)-1 && PyErr_Occurred())
            return -1;
        *(uint64_t *)p = x;
    }
    return 0;
}

/* A value that is a str (or bytes) naming one of names[], or an int. */
static int set_choice(const char *opt, PyObject *v, const char *const *names, const int *vals,
                      int *out)
{
    if (PyLong_Check(v)) {
        long x = PyLong_AsLong(v);
        if (x == -1 && PyErr_Occurred())
            return -1;
        *out = (int)x;
        return 0;
    }
    PyObject *s = PyBytes_Check(v) ? PyUnicode_FromEncodedObject(v, "utf-8", NULL) : Py_NewRef(v);
    if (!s)
        return -1;
    if (!PyUnicode_Check(s)) {
        Py_DECREF(s);
        PyErr_Format(PyExc_TypeError, "option %s must be a string", opt);
        return -1;
    }
    for (int i = 0; names[i]; i++)
        if (PyUnicode_CompareWithASCIIString(s, names[i]) == 0) {
            *out = vals[i];
            Py_DECREF(s);
            return 0;
        }
    PyErr_Format(PyExc_ValueError, "option %s: unknown value %R", opt, s);
    Py_DECREF(s);
    return -1;
}

static int set_compression(kv_options *o, PyObject *v)
{
    /* plyvel's 'snappy' (its default) is kv's zstd: kv has no snappy. */
    static const char *const names[] = {"snappy", "zstd", "none", NULL};
    static const int vals[] = {KV_COMPRESSION_ZSTD, KV_COMPRESSION_ZSTD, KV_COMPRESSION_NONE};
    if (v == Py_None) {
        o->compression = KV_COMPRESSION_NONE;
        return 0;
    }
    if (PyLong_Check(v) || !(PyUnicode_Check(v) || PyBytes_Check(v))) {
        PyErr_SetString(PyExc_TypeError, "'compression' must be None or a string");
        return -1;
    }
    return set_choice("compression", v, names, vals, &o->compression);
}

static int set_merge(PyObject *v, PyObject *name, kv_options *o, kvpy_callback **merge)
{
    if (v == Py_None)
        return 0;
    if (PyUnicode_Check(v)) {
        if (PyUnicode_CompareWithASCIIString(v, "uint64add") == 0 ||
            PyUnicode_CompareWithASCIIString(v, "uint64_add") == 0 ||
            PyUnicode_CompareWithASCIIString(v, "kv.uint64add") == 0) {
            o->merge_operator = kv_merge_uint64_add();
            return 0;
        }
        PyErr_Format(PyExc_ValueError, "unknown merge_operator %R", v);
        return -1;
    }
    if (!PyCallable_Check(v)) {
        PyErr_SetString(PyExc_TypeError, "merge_operator must be 'uint64add' or a callable");
        return -1;
    }
    PyObject *n = name && name != Py_None ? Py_NewRef(name)
                                          : PyObject_GetAttrString(v, "__qualname__");
    if (!n) {
        PyErr_Clear();
        n = PyUnicode_FromString("python");
    }
    const char *s = n ? (PyBytes_Check(n) ? PyBytes_AsString(n) : PyUnicode_AsUTF8(n)) : NULL;
    if (!s) {
        Py_XDECREF(n);
        return -1;
    }
    *merge = callback_new(v, s);
    Py_DECREF(n);
    if (!*merge)
        return -1;
    o->merge_operator = &(*merge)->merge;
    return 0;
}

static int set_comparator(PyObject *fn, PyObject *name, kv_options *o, kvpy_callback **cmp)
{
    if ((fn == NULL || fn == Py_None) != (name == NULL || name == Py_None)) {
        PyErr_SetString(PyExc_ValueError,
                        "'comparator' and 'comparator_name' must be specified together");
        return -1;
    }
    if (fn == NULL || fn == Py_None)
        return 0;
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "custom comparator object must be callable");
        return -1;
    }
    const char *s;
    if (PyBytes_Check(name))
        s = PyBytes_AS_STRING(name);
    else if (PyUnicode_Check(name)) {
        if (!(s = PyUnicode_AsUTF8(name)))
            return -1;
    } else {
        PyErr_SetString(PyExc_TypeError, "comparator_name must be bytes or str");
        return -1;
    }
    if (!(*cmp = callback_new(fn, s)))
        return -1;
    o->comparator = &(*cmp)->cmp;
    return 0;
}

/* One keyword argument that is not a plain number of kv_options. 1: taken;
 * 0: not one of these; -1: error. */
static int parse_special(const char *k, PyObject *v, kv_options *o, int *create, int *exists)
{
    static const char *const layouts[] = {"blocked", "classic", NULL};
    static const int layout_vals[] = {KV_BLOOM_BLOCKED, KV_BLOOM_CLASSIC};
    static const char *const policies[] = {"uniform", "monkey", NULL};
    static const int policy_vals[] = {KV_FILTER_UNIFORM, KV_FILTER_MONKEY};
    static const char *const styles[] = {"leveled", "lazy_leveled", NULL};
    static const int style_vals[] = {KV_COMPACTION_LEVELED, KV_COMPACTION_LAZY_LEVELED};
    int b;
    if (!strcmp(k, "create_if_missing") || !strcmp(k, "error_if_exists")) {
        if ((b = PyObject_IsTrue(v)) < 0)
            return -1;
        *(k[0] == 'c' ? create : exists) = b;
        return 1;
    }
    if (!strcmp(k, "compression"))
        return set_compression(o, v) < 0 ? -1 : 1;
    if (!strcmp(k, "filter_layout"))
        return set_choice(k, v, layouts, layout_vals, &o->filter_layout) < 0 ? -1 : 1;
    if (!strcmp(k, "filter_policy"))
        return set_choice(k, v, policies, policy_vals, &o->filter_policy) < 0 ? -1 : 1;
    if (!strcmp(k, "compaction_style"))
        return set_choice(k, v, styles, style_vals, &o->compaction_style) < 0 ? -1 : 1;
    if (!strcmp(k, "min_blob_size")) {
        if (v == Py_None) {
            o->min_blob_size = KV_BLOB_NEVER;
            return 1;
        }
        size_t x = PyLong_AsSize_t(v);
        if (x == (size_t)-1 && PyErr_Occurred())
            return -1;
        o->min_blob_size = x;
        return 1;
    }
    /* plyvel's names. */
    static const struct opt lru = {"lru_cache_size", offsetof(kv_options, block_cache_size),
                                   OPT_SIZE};
    if (!strcmp(k, "lru_cache_size"))
        return v == Py_None ? 1 : set_number(o, &lru, v) < 0 ? -1 : 1;
    if (!strcmp(k, "bloom_filter_bits")) {
        long x = PyLong_AsLong(v);
        if (x == -1 && PyErr_Occurred())
            return -1;
        o->bloom_bits_per_key = x > 0 ? (double)x : 0;
        return 1;
    }
    if (!strcmp(k, "max_file_size")) {
        if (v == Py_None)
            return 1;
        size_t x = PyLong_AsSize_t(v);
        if (x == (size_t)-1 && PyErr_Occurred())
            return -1;
        o->target_file_size = x;
        if (o->max_bytes_for_level_base < x)
            o->max_bytes_for_level_base = x;
        return 1;
    }
    /* Accepted for plyvel and ignored: kv always checks what it reads,
     * and its blocks restart every 8 keys. */
    if (!strcmp(k, "paranoid_checks") || !strcmp(k, "block_restart_interval")) {
        if (v != Py_None && !PyLong_Check(v)) {
            PyErr_Format(PyExc_TypeError, "option %s must be an int or bool", k);
            return -1;
        }
        return 1;
    }
    return 0;
}

int kvpy_parse_options(PyObject *kwargs, kv_options *o, kvpy_callback **cmp, kvpy_callback **merge,
                       int *create, int *exists)
{
    PyObject *key, *v, *cmp_fn = NULL, *cmp_name = NULL, *merge_fn = NULL, *merge_name = NULL;
    Py_ssize_t pos = 0;
    *cmp = *merge = NULL;
    while (kwargs && PyDict_Next(kwargs, &pos, &key, &v)) {
        const char *k = PyUnicode_AsUTF8(key);
        if (!k)
            return -1;
        if (!strcmp(k, "comparator"))
            cmp_fn = v;
        else if (!strcmp(k, "comparator_name"))
            cmp_name = v;
        else if (!strcmp(k, "merge_operator"))
            merge_fn = v;
        else if (!strcmp(k, "merge_operator_name"))
            merge_name = v;
        else {
            int r = parse_special(k, v, o, create, exists);
            if (r < 0)
                return -1;
            if (r)
                continue;
            size_t i = 0, n = sizeof opts_table / sizeof opts_table[0];
            while (i < n && strcmp(opts_table[i].name, k))
                i++;
            if (i == n) {
                PyErr_Format(PyExc_TypeError, "unexpected option '%s'", k);
                return -1;
            }
            if (v != Py_None && set_number(o, &opts_table[i], v) < 0)
                return -1;
        }
    }
    if (set_comparator(cmp_fn, cmp_name, o, cmp) < 0)
        return -1;
    if (merge_fn && set_merge(merge_fn, merge_name, o, merge) < 0) {
        kvpy_callback_free(*cmp);
        *cmp = NULL;
        return -1;
    }
    return 0;
}

/* ---- module functions ----------------------------------------------------------- */

/* A path argument: str (file system encoding) or bytes, into *out (a new
 * bytes object). */
static int path_arg(PyObject *name, PyObject **out)
{
    if (!PyUnicode_Check(name) && !PyBytes_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "'name' arg must be a byte string or a unicode string");
        return -1;
    }
    return PyUnicode_FSConverter(name, out) ? 0 : -1;
}

static PyObject *destroy_db(PyObject *self, PyObject *arg)
{
    (void)self;
    PyObject *path;
    if (path_arg(arg, &path) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS;
    rc = kv_destroy(PyBytes_AS_STRING(path));
    Py_END_ALLOW_THREADS;
    Py_DECREF(path);
    if (rc != KV_OK)
        return kvpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *repair_db(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    PyObject *name, *path;
    if (!PyArg_ParseTuple(args, "O:repair_db", &name) || path_arg(name, &path) < 0)
        return NULL;
    kv_options o;
    kv_options_init(&o);
    kvpy_callback *cmp, *merge;
    int create = 0, exists = 0;
    if (kvpy_parse_options(kwargs, &o, &cmp, &merge, &create, &exists) < 0) {
        Py_DECREF(path);
        return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS;
    rc = kv_repair(PyBytes_AS_STRING(path), &o);
    Py_END_ALLOW_THREADS;
    Py_DECREF(path);
    kvpy_callback_free(cmp);
    kvpy_callback_free(merge);
    if (rc != KV_OK)
        return kvpy_raise(rc);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"destroy_db", destroy_db, METH_O, "destroy_db(name): remove the database in directory name"},
    {"repair_db", (PyCFunction)(void (*)(void))repair_db, METH_VARARGS | METH_KEYWORDS,
     "repair_db(name, **options): rebuild the database's manifest (kv_repair)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "kv._kv",
    "kv's C extension: the engine's objects",
    -1,
    module_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

static PyObject *new_exc(PyObject *m, const char *name, PyObject *base, const char *doc)
{
    char full[64];
    snprintf(full, sizeof full, "kv.%s", name);
    PyObject *e = PyErr_NewExceptionWithDoc(full, doc, base, NULL);
    if (e && PyModule_AddObjectRef(m, name, e) < 0)
        Py_CLEAR(e);
    return e;
}

PyMODINIT_FUNC PyInit__kv(void); /* the one symbol the module exports */

PyMODINIT_FUNC PyInit__kv(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    if (!(kvpy_error = new_exc(m, "Error", NULL, "An error kv reported.")) ||
        !(kvpy_ioerror = new_exc(m, "IOError", kvpy_error,
                                 "A file could not be read or written.")) ||
        !(kvpy_corruption = new_exc(m, "CorruptionError", kvpy_error,
                                    "Stored data failed a check.")) ||
        !(kvpy_invalid_iter = new_exc(m, "IteratorInvalidError", kvpy_error,
                                      "The raw iterator is not on a pair.")) ||
        kvpy_db_init_types(m) < 0 || kvpy_iter_init_types(m) < 0 ||
        kvpy_objects_init_types(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "MAX_KEY_SIZE", (long)KV_MAX_KEY_SIZE);
    PyModule_AddIntConstant(m, "MAX_VALUE_SIZE", (long)KV_MAX_VALUE_SIZE);
    return m;
}
