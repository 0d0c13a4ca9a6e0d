/* rangedel.c - range tombstone sets (sstable/internal.h, "range
 * tombstones"): building a fragmented set from tombstones and other sets,
 * the coverage lookup a Get makes, and the encoding of a table's range
 * tombstone block (doc/sstable_format.md, "Range tombstone block").
 *
 * A set is one allocation, immutable once built:
 *
 *   struct kv_rtset | struct frag[n + 1] | u64 ew[n] (bytewise only) |
 *   u64 seqs[] | key bytes
 *
 * Fragment i's start key is keys[f[i].key, + slen) and its end key follows
 * it at once (keys[f[i].key + slen, + elen)); its sequences, newest first,
 * are seqs[f[i].seq, f[i + 1].seq) (f[n] only closes the last list). The
 * fragments are sorted and do not overlap: f[i].end <= f[i + 1].start under
 * the set's comparator, and start < end within each. So ends strictly
 * increase too, and a key is covered by at most one fragment: the first
 * whose end is after it, if its start is at or before the key.
 *
 * Under the bytewise order every key of the set shares the first `skip`
 * bytes of the first start and the last end (the keys lie between them),
 * and ew[i] holds bytes [skip, skip + 8) of fragment i's end as a
 * big-endian word (keycmp.h, kv_key_word): the search for a key's fragment
 * is a branch-free binary search over those words, one small array, and
 * reads keys only on a tie. Per fragment: 16 bytes of entry, 8 of word, 8
 * per sequence, and its two keys; the allocation is rounded up by at most
 * 12.5% (set_alloc says why).
 *
 * Key offsets, key lengths and sequence indexes are 32-bit: a set holds
 * less than 4 GiB of key bytes and 2^32 sequences (a union that would pass
 * that is KV_ENOMEM; a block that would is KV_ECORRUPT). */
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "order.h"
#include "util/coding.h"
#include "util/error.h"
#include "util/keycmp.h"

#define MAX_SEQ (((uint64_t)1 << 56) - 1)

struct frag {
    uint32_t key;  /* offset of the start key in keys; the end key follows it */
    uint32_t slen; /* start key bytes */
    uint32_t elen; /* end key bytes */
    uint32_t seq;  /* index of the first (newest) sequence in seqs */
};

struct kv_rtset {
    atomic_size_t refs;
    const kv_comparator *cmp;
    size_t n;         /* fragments, >= 1 */
    size_t bytes;     /* the allocation */
    uint64_t max_seq; /* the newest sequence of any fragment */
    uint64_t *ew;     /* n end words; NULL under a comparator */
    size_t skip;      /* the bytes every key shares (keys[0, skip)); bytewise only */
    uint64_t *seqs;
    uint8_t *keys;
    struct frag f[]; /* n + 1 */
};

/* A set with room for n fragments, nseq sequences and kbytes key bytes;
 * its fragments, bytes and words are the caller's to fill (set_words).
 * NULL: out of memory (or past the 32-bit limits). */
static kv_rtset *set_alloc(const kv_comparator *cmp, size_t n, size_t nseq, size_t kbytes)
{
    if (n == 0 || n >= UINT32_MAX || nseq > UINT32_MAX || kbytes > UINT32_MAX)
        return NULL;
    size_t head = sizeof(kv_rtset) + (n + 1) * sizeof(struct frag);
    head = (head + 7) & ~(size_t)7;
    size_t words = cmp ? 0 : n;
    size_t bytes = head + (words + nseq) * sizeof(uint64_t) + kbytes;
    /* Rounded up to one of eight sizes per power of two (12.5% at most
     * unused): a store replaces its memtable's set by a union of it and
     * one more tombstone at each commit, so sets one tombstone apart come
     * and go; of one size, each fits where the one before the last was
     * freed, and malloc reuses that memory instead of mapping fresh pages
     * (at 10,000 fragments, freshly mapped pages made a union 15 times
     * slower). */
    if (bytes > 4096) {
        size_t top = 4096; /* the largest power of two <= bytes */
        while (top <= bytes / 2)
            top <<= 1;
        bytes = (bytes + top / 8 - 1) & ~(top / 8 - 1);
    }
    kv_rtset *s = malloc(bytes);
    if (!s)
        return NULL;
    atomic_init(&s->refs, 1);
    s->cmp = cmp;
    s->n = n;
    s->bytes = bytes;
    s->max_seq = 0;
    s->ew = cmp ? NULL : (uint64_t *)((uint8_t *)s + head);
    s->skip = 0;
    s->seqs = (uint64_t *)((uint8_t *)s + head) + words;
    s->keys = (uint8_t *)(s->seqs + nseq);
    return s;
}

/* Fragment i's end key. */
static inline const uint8_t *end_key(const kv_rtset *s, size_t i)
{
    return s->keys + s->f[i].key + s->f[i].slen;
}

/* The bytes every key of s shares: those its first start and last end
 * share (every key lies between them). */
static size_t common_skip(const kv_rtset *s)
{
    const struct frag *a = &s->f[0], *z = &s->f[s->n - 1];
    return kv_key_common_prefix(s->keys + a->key, a->slen, end_key(s, s->n - 1), z->elen);
}

/* Fills s's end words (bytewise sets), for fragments [from, to) unless
 * `like` -- a set of the same skip and shared prefix -- already holds them
 * at like_from onwards (a union that copies a run of fragments unchanged). */
static void set_words(kv_rtset *s, size_t from, size_t to, const kv_rtset *like, size_t like_from)
{
    if (!s->ew)
        return;
    if (like && like->ew && like->skip == s->skip) {
        memcpy(s->ew + from, like->ew + like_from, (to - from) * sizeof *s->ew);
        return;
    }
    for (size_t i = from; i < to; i++)
        s->ew[i] = kv_key_word(end_key(s, i), s->f[i].elen, s->skip);
}

void kv_rtset_ref(kv_rtset *s)
{
    if (s)
        atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

void kv_rtset_unref(kv_rtset *s)
{
    if (s && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
        free(s);
}

size_t kv_rtset_count(const kv_rtset *s)
{
    return s ? s->n : 0;
}

size_t kv_rtset_bytes(const kv_rtset *s)
{
    return s ? s->bytes : 0;
}

uint64_t kv_rtset_max_seq(const kv_rtset *s)
{
    return s ? s->max_seq : 0;
}

void kv_rtset_fragment(const kv_rtset *s, size_t i, kv_rt_fragment *out)
{
    if (!out)
        return;
    if (!s || i >= s->n) {
        memset(out, 0, sizeof *out);
        return;
    }
    const struct frag *f = &s->f[i];
    out->start = s->keys + f->key;
    out->slen = f->slen;
    out->end = s->keys + f->key + f->slen;
    out->elen = f->elen;
    out->seqs = s->seqs + f->seq;
    out->nseq = f[1].seq - f->seq;
}

/* The first fragment whose end is after key (s->n when none): ends
 * strictly increase, so a binary search; over the end words first, when
 * the set has them (then the keys only where words tie). */
static size_t seek(const kv_rtset *s, const void *key, size_t klen)
{
    size_t lo = 0, hi = s->n;
    if (s->ew) {
        /* A key without the shared prefix lies before or after them all. */
        size_t m = klen < s->skip ? klen : s->skip;
        int c = m ? memcmp(key, s->keys, m) : 0;
        if (c < 0 || (c == 0 && klen < s->skip))
            return 0;
        if (c > 0)
            return s->n;
        uint64_t w = kv_key_word(key, klen, s->skip);
        lo = kv_word_lower_bound(s->ew, s->n, w); /* ends before: smaller words */
        /* Ends of a larger word are after the key; of the same word, the
         * keys decide: walk a few (a tie is rare and short), then search
         * the rest of the tie. */
        for (int step = 0; step < 4; step++, lo++) {
            if (lo == s->n || s->ew[lo] != w)
                return lo;
            const struct frag *f = &s->f[lo];
            if (kv_sst_cmp(NULL, s->keys + f->key + f->slen, f->elen, key, klen) > 0)
                return lo;
        }
        hi = w == UINT64_MAX ? s->n : lo + kv_word_lower_bound(s->ew + lo, s->n - lo, w + 1);
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct frag *f = &s->f[mid];
        if (kv_sst_cmp(s->cmp, s->keys + f->key + f->slen, f->elen, key, klen) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

size_t kv_rtset_seek(const kv_rtset *s, const void *key, size_t klen)
{
    return s ? seek(s, key, klen) : 0;
}

uint64_t kv_rtset_cover(const kv_rtset *s, const void *key, size_t klen, uint64_t snap)
{
    if (!s)
        return 0;
    size_t i = seek(s, key, klen);
    if (i == s->n)
        return 0;
    const struct frag *f = &s->f[i];
    if (kv_sst_cmp(s->cmp, s->keys + f->key, f->slen, key, klen) > 0)
        return 0;
    const uint64_t *q = s->seqs + f->seq;
    size_t n = f[1].seq - f->seq;
    if (q[0] <= snap) /* the usual case: a read at the newest snapshot */
        return q[0];
    size_t lo = 1, hi = n; /* the first index whose sequence is <= snap */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (q[mid] <= snap)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo < n ? q[lo] : 0;
}

/* ---- union -------------------------------------------------------------------- */

/* A boundary of one input piece (a tombstone or a set's fragment): its
 * start or end key. `id` is the piece's index, shifted left once, its low
 * bit set for an end. 16 bytes. */
struct ev {
    const uint8_t *key;
    uint32_t len;
    uint32_t id;
};

/* An input piece's sequences (newest first, distinct). */
struct piece {
    const uint64_t *seqs;
    size_t nseq;
};

/* A sequence and how many active pieces hold it. */
struct act {
    uint64_t seq;
    size_t count;
};

/* An output fragment before the set is built. */
struct outf {
    const uint8_t *s, *e;
    uint32_t slen, elen;
    size_t seq; /* index in the output sequences */
    size_t nseq;
};

/* Merges the sorted runs a[0, na) and b[0, nb) into out (stable). */
static void ev_merge(const kv_comparator *cmp, const struct ev *a, size_t na, const struct ev *b,
                     size_t nb, struct ev *out)
{
    size_t i = 0, j = 0, k = 0;
    while (i < na && j < nb) {
        if (kv_sst_cmp(cmp, b[j].key, b[j].len, a[i].key, a[i].len) < 0)
            out[k++] = b[j++];
        else
            out[k++] = a[i++];
    }
    memcpy(out + k, a + i, (na - i) * sizeof *a);
    k += na - i;
    memcpy(out + k, b + j, (nb - j) * sizeof *b);
}

/* Sorts ev[0, n), made of the sorted runs that begin at run[0 .. nrun)
 * (run[0] == 0; run[nrun] == n, room for it), by merging neighbouring runs
 * pass after pass: O(n log nrun) comparisons. tmp has room for n. Returns
 * the array that holds the result (ev or tmp). */
static struct ev *ev_sort(const kv_comparator *cmp, struct ev *ev, struct ev *tmp, size_t n,
                          size_t *run, size_t nrun)
{
    run[nrun] = n;
    while (nrun > 1) {
        size_t w = 0;
        for (size_t r = 0; r < nrun; r += 2) {
            size_t a = run[r], b = run[r + 1], c = r + 2 <= nrun ? run[r + 2] : b;
            if (r + 1 < nrun)
                ev_merge(cmp, ev + a, b - a, ev + b, c - b, tmp + a);
            else
                memcpy(tmp + a, ev + a, (b - a) * sizeof *ev);
            run[w++] = a;
        }
        run[w] = n;
        nrun = w;
        struct ev *t = ev;
        ev = tmp;
        tmp = t;
    }
    return ev;
}

/* Adds (sign > 0) or removes a piece's sequences to or from the active
 * multiset act[0, *na), sorted newest first, through scratch: O(*na + n). */
static void act_apply(struct act *act, size_t *na, struct act *scratch, const uint64_t *q, size_t n,
                      int sign)
{
    size_t i = 0, j = 0, k = 0, m = *na;
    while (i < m || j < n) {
        if (j == n || (i < m && act[i].seq > q[j])) {
            scratch[k++] = act[i++];
        } else if (i == m || act[i].seq < q[j]) {
            /* only an add meets a sequence that is not active */
            scratch[k].seq = q[j++];
            scratch[k++].count = 1;
        } else {
            scratch[k] = act[i++];
            scratch[k].count = sign > 0 ? scratch[k].count + 1 : scratch[k].count - 1;
            j++;
            if (scratch[k].count)
                k++;
        }
    }
    memcpy(act, scratch, k * sizeof *act);
    *na = k;
}

static int grow_seqs(uint64_t **seqs, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 1;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    uint64_t *p = realloc(*seqs, c * sizeof *p);
    if (!p)
        return 0;
    *seqs = p;
    *cap = c;
    return 1;
}

/* Fragments [from, to) of a set: an input of the sweep. */
struct span {
    const kv_rtset *s;
    size_t from, to;
};

/* What the sweep made: fragments whose keys point into the inputs, and
 * their sequences. */
struct swept {
    struct outf *of;
    size_t nof;
    uint64_t *seq;
    size_t nseq, cap;
};

/* The sweep: the distinct boundary keys in order; between two neighbours,
 * every piece that began at or before the first and has not ended covers
 * the whole gap, so the gap is one output fragment whose sequences are the
 * active multiset's (distinct, newest first). Consecutive fragments with
 * the same sequences (after keep) are joined. The pieces: the fragments of
 * the spans, and the non-empty tombstones of rts (checked by the caller).
 * O(E log runs) comparisons for E boundaries in `runs` sorted runs (a
 * span is one, a tombstone another), and work and memory linear in what
 * it makes. KV_OK, KV_ENOMEM; *out's arrays the caller's to free. */
static int sweep(const kv_comparator *cmp, const struct span *sp, size_t nsp, const kv_rt *rts,
                 size_t nrt,
                 size_t (*keep)(void *ctx, const uint8_t *start, size_t slen, const uint8_t *end,
                                size_t elen, uint64_t *seqs, size_t nseq),
                 void *ctx, struct swept *out)
{
    memset(out, 0, sizeof *out);
    size_t npiece = nrt, nseq_in = nrt;
    for (size_t i = 0; i < nsp; i++) {
        npiece += sp[i].to - sp[i].from;
        nseq_in += sp[i].s->f[sp[i].to].seq - sp[i].s->f[sp[i].from].seq;
    }
    if (npiece == 0)
        return KV_OK;
    if (npiece >= (size_t)1 << 30)
        return KV_ENOMEM;
    size_t nev = 2 * npiece;
    int rc = KV_ENOMEM;
    struct ev *ev = malloc(2 * nev * sizeof *ev);
    size_t *run = malloc((nsp + nrt + 1) * sizeof *run);
    struct piece *pc = malloc(npiece * sizeof *pc);
    struct act *act = malloc(2 * nseq_in * sizeof *act);
    struct outf *of = malloc(nev * sizeof *of);
    uint64_t *oseq = NULL;
    size_t ocap = 0, nof = 0, nos = 0;
    if (!ev || !run || !pc || !act || !of)
        goto out_free;

    /* The events: each span's are sorted already (s0 < e0 <= s1 < e1 ..),
     * a run of its own; each tombstone's two form a run. */
    size_t k = 0, p = 0, r = 0;
    for (size_t i = 0; i < nsp; i++) {
        const kv_rtset *s = sp[i].s;
        if (sp[i].from == sp[i].to)
            continue;
        run[r++] = k;
        for (size_t j = sp[i].from; j < sp[i].to; j++, p++) {
            const struct frag *f = &s->f[j];
            pc[p].seqs = s->seqs + f->seq;
            pc[p].nseq = f[1].seq - f->seq;
            ev[k++] = (struct ev){s->keys + f->key, f->slen, (uint32_t)(p << 1)};
            ev[k++] = (struct ev){s->keys + f->key + f->slen, f->elen, (uint32_t)(p << 1 | 1)};
        }
    }
    for (size_t i = 0; i < nrt; i++) {
        const kv_rt *t = &rts[i];
        if (kv_sst_cmp(cmp, t->start, t->slen, t->end, t->elen) >= 0)
            continue; /* empty */
        run[r++] = k;
        pc[p].seqs = &t->seq;
        pc[p].nseq = 1;
        ev[k++] = (struct ev){t->start, (uint32_t)t->slen, (uint32_t)(p << 1)};
        ev[k++] = (struct ev){t->end, (uint32_t)t->elen, (uint32_t)(p << 1 | 1)};
        p++;
    }
    nev = k;
    struct ev *sorted = nev ? ev_sort(cmp, ev, ev + 2 * npiece, nev, run, r) : ev;

    size_t na = 0, joinable = SIZE_MAX; /* of[nof - 1] ended at the current key */
    struct act *scratch = act + nseq_in;
    for (size_t i = 0; i < nev;) {
        const struct ev *g = &sorted[i];
        size_t j = i;
        do {
            const struct piece *q = &pc[sorted[j].id >> 1];
            act_apply(act, &na, scratch, q->seqs, q->nseq, sorted[j].id & 1 ? -1 : 1);
            j++;
        } while (j < nev && kv_sst_cmp(cmp, sorted[j].key, sorted[j].len, g->key, g->len) == 0);
        if (j < nev && na > 0) {
            if (!grow_seqs(&oseq, &ocap, nos + na))
                goto out_free;
            uint64_t *q = oseq + nos;
            for (size_t a = 0; a < na; a++)
                q[a] = act[a].seq;
            size_t cnt = na;
            if (keep) {
                cnt = keep(ctx, g->key, g->len, sorted[j].key, sorted[j].len, q, na);
                if (cnt > na)
                    cnt = na;
            }
            if (cnt > 0) {
                struct outf *prev = nof ? &of[nof - 1] : NULL;
                if (joinable == i && prev->nseq == cnt &&
                    memcmp(oseq + prev->seq, q, cnt * sizeof *q) == 0) {
                    prev->e = sorted[j].key; /* the same sequences: one fragment */
                    prev->elen = sorted[j].len;
                } else {
                    struct outf *o = &of[nof++];
                    o->s = g->key;
                    o->slen = g->len;
                    o->e = sorted[j].key;
                    o->elen = sorted[j].len;
                    o->seq = nos;
                    o->nseq = cnt;
                    nos += cnt;
                }
                joinable = j;
            }
        }
        i = j;
    }
    out->of = of;
    out->nof = nof;
    out->seq = oseq;
    out->nseq = nos;
    of = NULL;
    oseq = NULL;
    rc = KV_OK;
out_free:
    free(oseq);
    free(of);
    free(act);
    free(pc);
    free(run);
    free(ev);
    return rc;
}

/* The set: fragments [0, pre) of base, then the swept ones, then
 * fragments [post, base->n) of base (base NULL: the swept ones alone), in
 * one allocation. The runs of base are copied whole: keys and sequences
 * keep their order, so the first run's offsets stay as they were and the
 * last run's move by one amount. *out NULL when that is no fragment.
 * KV_OK, KV_ENOMEM. */
static int build(const kv_comparator *cmp, const kv_rtset *base, size_t pre, size_t post,
                 const struct swept *w, kv_rtset **out)
{
    *out = NULL;
    size_t nb = base ? pre + (base->n - post) : 0;
    size_t n = nb + w->nof;
    if (n == 0)
        return KV_OK;
    size_t kbytes = 0, nseq = w->nseq;
    for (size_t i = 0; i < w->nof; i++)
        kbytes += (size_t)w->of[i].slen + w->of[i].elen;
    if (base) {
        kbytes += base->f[pre].key + (base->f[base->n].key - base->f[post].key);
        nseq += base->f[pre].seq + (base->f[base->n].seq - base->f[post].seq);
    }
    kv_rtset *s = set_alloc(cmp, n, nseq, kbytes);
    if (!s)
        return KV_ENOMEM;
    size_t i = 0, ko = 0, qo = 0;
    if (base && pre) { /* the first run: as it was */
        memcpy(s->f, base->f, pre * sizeof *s->f);
        ko = base->f[pre].key;
        qo = base->f[pre].seq;
        memcpy(s->keys, base->keys, ko);
        memcpy(s->seqs, base->seqs, qo * sizeof *s->seqs);
        i = pre;
    }
    for (size_t j = 0; j < w->nof; j++, i++) {
        const struct outf *o = &w->of[j];
        struct frag *f = &s->f[i];
        f->key = (uint32_t)ko;
        f->slen = o->slen;
        f->elen = o->elen;
        f->seq = (uint32_t)qo;
        if (o->slen)
            memcpy(s->keys + ko, o->s, o->slen);
        ko += o->slen;
        if (o->elen)
            memcpy(s->keys + ko, o->e, o->elen);
        ko += o->elen;
        memcpy(s->seqs + qo, w->seq + o->seq, o->nseq * sizeof *s->seqs);
        qo += o->nseq;
    }
    size_t mid_end = i;
    if (base && post < base->n) { /* the last run: moved */
        uint32_t k0 = base->f[post].key, q0 = base->f[post].seq;
        for (size_t j = post; j < base->n; j++, i++) {
            s->f[i] = base->f[j];
            s->f[i].key = base->f[j].key - k0 + (uint32_t)ko;
            s->f[i].seq = base->f[j].seq - q0 + (uint32_t)qo;
        }
        memcpy(s->keys + ko, base->keys + k0, base->f[base->n].key - k0);
        memcpy(s->seqs + qo, base->seqs + q0, (base->f[base->n].seq - q0) * sizeof *s->seqs);
        ko += base->f[base->n].key - k0;
        qo += base->f[base->n].seq - q0;
    }
    s->f[n].key = (uint32_t)ko;
    s->f[n].slen = s->f[n].elen = 0;
    s->f[n].seq = (uint32_t)qo;
    /* The newest sequence: each fragment's first. A base keeps all its
     * sequences (its runs are copied, its swept fragments had no keep), so
     * its own newest is still there. */
    uint64_t max = base ? base->max_seq : 0;
    for (size_t j = 0; j < w->nof; j++)
        if (w->seq[w->of[j].seq] > max)
            max = w->seq[w->of[j].seq];
    s->max_seq = max;
    if (s->ew) {
        s->skip = common_skip(s);
        int same = base && base->ew && base->skip == s->skip;
        set_words(s, 0, pre, same ? base : NULL, 0);
        set_words(s, pre, mid_end, NULL, 0);
        set_words(s, mid_end, n, same ? base : NULL, post);
    }
    *out = s;
    return KV_OK;
}

int kv_rtset_union(const kv_comparator *cmp, const kv_rtset *const *sets, size_t n,
                   const kv_rt *rts, size_t nrt,
                   size_t (*keep)(void *ctx, const uint8_t *start, size_t slen, const uint8_t *end,
                                  size_t elen, uint64_t *seqs, size_t nseq),
                   void *ctx, kv_rtset **out)
{
    if (!out || (n && !sets) || (nrt && !rts))
        return KV_EINVAL;
    *out = NULL;
    size_t nset = 0, last = 0;
    for (size_t i = 0; i < n; i++) {
        if (sets[i]) {
            nset++;
            last = i;
        }
    }
    /* The tombstones' extent, [lo, hi): where they can change a set. */
    const kv_rt *lo = NULL, *hi = NULL;
    for (size_t i = 0; i < nrt; i++) {
        const kv_rt *t = &rts[i];
        if ((t->slen && !t->start) || (t->elen && !t->end) || t->slen > UINT32_MAX ||
            t->elen > UINT32_MAX || t->seq == 0 || t->seq > MAX_SEQ)
            return KV_EINVAL;
        if (kv_sst_cmp(cmp, t->start, t->slen, t->end, t->elen) >= 0)
            continue; /* empty */
        if (!lo || kv_sst_cmp(cmp, t->start, t->slen, lo->start, lo->slen) < 0)
            lo = t;
        if (!hi || kv_sst_cmp(cmp, t->end, t->elen, hi->end, hi->elen) > 0)
            hi = t;
    }
    const kv_rtset *base = nset == 1 && !keep && sets[last]->cmp == cmp ? sets[last] : NULL;
    if (base && !lo) { /* one set alone, nothing dropped: the set itself */
        kv_rtset_ref((kv_rtset *)base);
        *out = (kv_rtset *)base;
        return KV_OK;
    }
    struct span *sp = malloc((nset ? nset : 1) * sizeof *sp);
    if (!sp)
        return KV_ENOMEM;
    size_t nsp = 0, pre = 0, post = 0;
    if (base) {
        /* A store's memtable: one set and the tombstones of one commit.
         * Only the fragments that meet [lo, hi) -- and one more each side,
         * so that a fragment the sweep makes can join its neighbour as
         * it would in a whole sweep -- are swept; the rest are copied. */
        size_t a = seek(base, lo->start, lo->slen), b = a;
        size_t bhi = base->n; /* the first fragment starting at or after hi */
        while (b < bhi) {
            size_t mid = b + (bhi - b) / 2;
            const struct frag *f = &base->f[mid];
            if (kv_sst_cmp(cmp, base->keys + f->key, f->slen, hi->end, hi->elen) < 0)
                b = mid + 1;
            else
                bhi = mid;
        }
        pre = a > 0 ? a - 1 : 0;
        post = b < base->n ? b + 1 : base->n;
        sp[nsp++] = (struct span){base, pre, post};
    } else {
        for (size_t i = 0; i < n; i++)
            if (sets[i])
                sp[nsp++] = (struct span){sets[i], 0, sets[i]->n};
    }
    struct swept w;
    int rc = sweep(cmp, sp, nsp, rts, nrt, keep, ctx, &w);
    if (rc == KV_OK)
        rc = build(cmp, base, pre, post, &w, out);
    free(w.of);
    free(w.seq);
    free(sp);
    return rc;
}

/* ---- the range tombstone block ------------------------------------------------- */

/* Layout (doc/sstable_format.md, "Range tombstone block"):
 *   u32le count, then per fragment:
 *   varint slen | start | varint elen | end | varint nseq | nseq varints (newest first) */

int kv_rtset_encode(const kv_rtset *s, uint8_t **out, size_t *len)
{
    if (!out || !len)
        return KV_EINVAL;
    *out = NULL;
    *len = 0;
    if (!s)
        return KV_OK;
    size_t need = 4;
    for (size_t i = 0; i < s->n; i++) {
        const struct frag *f = &s->f[i];
        need += 3 * 10 + f->slen + f->elen + (size_t)(f[1].seq - f->seq) * 10;
    }
    uint8_t *b = malloc(need), *p = b;
    if (!b)
        return KV_ENOMEM;
    kv_put32(p, (uint32_t)s->n);
    p += 4;
    for (size_t i = 0; i < s->n; i++) {
        const struct frag *f = &s->f[i];
        p += kv_put_varint(p, f->slen);
        memcpy(p, s->keys + f->key, f->slen);
        p += f->slen;
        p += kv_put_varint(p, f->elen);
        memcpy(p, s->keys + f->key + f->slen, f->elen);
        p += f->elen;
        p += kv_put_varint(p, f[1].seq - f->seq);
        for (uint32_t j = f->seq; j < f[1].seq; j++)
            p += kv_put_varint(p, s->seqs[j]);
    }
    *out = b;
    *len = (size_t)(p - b);
    return KV_OK;
}

/* One fragment read from a block. */
struct rd {
    const uint8_t *s, *e;
    uint64_t slen, elen, nseq;
    const uint8_t *seqs; /* the varints */
};

static int read_key(const uint8_t **p, const uint8_t *end, uint64_t *len, const uint8_t **key)
{
    if (!kv_get_varint(p, end, len) || *len > (uint64_t)(end - *p))
        return 0;
    *key = *p;
    *p += *len;
    return 1;
}

#define BAD(...) kv_error_set(KV_ECORRUPT, "range tombstone block: " __VA_ARGS__)

/* Reads the fragment at *p into *f and advances *p, checking it (its keys
 * in order under cmp only when `order`: a second read of a checked block
 * skips the comparisons). */
static int read_frag(const kv_comparator *cmp, int order, const uint8_t **p, const uint8_t *end,
                     size_t i, struct rd *f, uint64_t *max_seq)
{
    if (!read_key(p, end, &f->slen, &f->s))
        return BAD("fragment %zu: start key truncated", i);
    if (!read_key(p, end, &f->elen, &f->e))
        return BAD("fragment %zu: end key truncated", i);
    if (f->slen > UINT32_MAX || f->elen > UINT32_MAX)
        return BAD("fragment %zu: key over 4 GiB", i);
    if (order && kv_sst_cmp(cmp, f->s, f->slen, f->e, f->elen) >= 0)
        return BAD("fragment %zu: start not before end", i);
    if (!kv_get_varint(p, end, &f->nseq) || f->nseq > (uint64_t)(end - *p))
        return BAD("fragment %zu: sequence count truncated", i);
    if (f->nseq == 0)
        return BAD("fragment %zu: no sequence", i);
    f->seqs = *p;
    uint64_t prev = UINT64_MAX;
    for (uint64_t j = 0; j < f->nseq; j++) {
        uint64_t q;
        if (!kv_get_varint(p, end, &q))
            return BAD("fragment %zu: sequence %llu truncated", i, (unsigned long long)j);
        if (q == 0 || q > MAX_SEQ)
            return BAD("fragment %zu: sequence %llu out of range", i, (unsigned long long)q);
        if (q >= prev)
            return BAD("fragment %zu: sequences not strictly decreasing", i);
        if (j == 0 && q > *max_seq)
            *max_seq = q;
        prev = q;
    }
    return KV_OK;
}

static int decode(const kv_comparator *cmp, int order, const uint8_t *p, size_t len, kv_rtset **out)
{
    if (!out || (len && !p))
        return KV_EINVAL;
    *out = NULL;
    if (len == 0)
        return KV_OK;
    if (len < 4)
        return BAD("%zu bytes, too short for its count", len);
    const uint8_t *end = p + len, *b = p + 4;
    uint32_t n = kv_get32(p);
    /* Each fragment takes at least 4 bytes (three lengths and a sequence). */
    if (n > (len - 4) / 4)
        return BAD("%u fragments cannot fit in %zu bytes", n, len);

    /* Pass 1: check everything and count. */
    uint64_t kbytes = 0, nseq = 0, max_seq = 0;
    struct rd f, prev = {0};
    for (uint32_t i = 0; i < n; i++) {
        int rc = read_frag(cmp, order, &b, end, i, &f, &max_seq);
        if (rc != KV_OK)
            return rc;
        if (order && i > 0 && kv_sst_cmp(cmp, prev.e, prev.elen, f.s, f.slen) > 0)
            return BAD("fragment %u overlaps or precedes fragment %u", i, i - 1);
        kbytes += f.slen + f.elen;
        nseq += f.nseq;
        prev = f;
    }
    if (b != end)
        return BAD("%zu bytes after the last fragment", (size_t)(end - b));
    if (n == 0)
        return KV_OK;
    if (kbytes > UINT32_MAX || nseq > UINT32_MAX)
        return BAD("more than 4 GiB of keys or 2^32 sequences");

    /* Pass 2: the set. */
    kv_rtset *s = set_alloc(cmp, n, (size_t)nseq, (size_t)kbytes);
    if (!s)
        return KV_ENOMEM;
    s->max_seq = max_seq;
    b = p + 4;
    uint32_t ko = 0, qo = 0;
    for (uint32_t i = 0; i < n; i++) {
        read_frag(cmp, 0, &b, end, i, &f, &max_seq); /* checked above: cannot fail */
        struct frag *g = &s->f[i];
        g->key = ko;
        g->slen = (uint32_t)f.slen;
        g->elen = (uint32_t)f.elen;
        g->seq = qo;
        memcpy(s->keys + ko, f.s, f.slen);
        ko += (uint32_t)f.slen;
        memcpy(s->keys + ko, f.e, f.elen);
        ko += (uint32_t)f.elen;
        const uint8_t *q = f.seqs;
        for (uint64_t j = 0; j < f.nseq; j++)
            kv_get_varint(&q, end, &s->seqs[qo++]);
    }
    s->f[n].key = ko;
    s->f[n].slen = s->f[n].elen = 0;
    s->f[n].seq = qo;
    if (s->ew) {
        s->skip = common_skip(s);
        set_words(s, 0, n, NULL, 0);
    }
    *out = s;
    return KV_OK;
}

int kv_rtset_decode(const kv_comparator *cmp, const uint8_t *p, size_t len, kv_rtset **out)
{
    return decode(cmp, 1, p, len, out);
}

int kv_rtset_decode_unordered(const uint8_t *p, size_t len, kv_rtset **out)
{
    return decode(NULL, 0, p, len, out);
}
