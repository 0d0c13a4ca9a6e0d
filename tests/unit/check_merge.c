/* check_merge.c - the merging iterator (kv/merge.h) through its header:
 * the order of a merge of sources with overlapping keys forward and
 * backward, seeks, the reader's rule (newest visible version wins, a
 * tombstone hides the older ones) against a model at every snapshot, the
 * compaction rule (kv_dropper_drop: what may go given the oldest snapshot
 * and the bottom), table sources (escaped keys) and a custom comparator. */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../kv/merge.h"
#include "fixture.h"
#include "util/ikey.h"

/* One version in the model: the sources hold them, spread at random. */
struct ver {
    uint8_t key[8];
    size_t klen;
    uint64_t seq;
    int kind;
    char val[24];
};

#define NSRC 3
#define NKEYS 40
#define NVERS 200

static struct ver vers[NVERS];
static kv_mem *mems[NSRC];

/* Model order: user key (bytewise, or reversed under rev_cmp), newest first. */
static int rev_order;

static int key_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int c = memcmp(a, b, n);
    if (!c)
        c = alen < blen ? -1 : alen > blen;
    return rev_order ? -c : c;
}

static int ver_cmp(const void *pa, const void *pb)
{
    const struct ver *a = pa, *b = pb;
    int c = key_cmp(a->key, a->klen, b->key, b->klen);
    if (c)
        return c;
    return a->seq > b->seq ? -1 : a->seq < b->seq;
}

/* A comparator that reverses bytewise order. */
static int reverse_compare(void *ctx, const void *a, size_t alen, const void *b, size_t blen)
{
    (void)ctx;
    size_t n = alen < blen ? alen : blen;
    int c = memcmp(a, b, n);
    if (!c)
        c = alen < blen ? -1 : alen > blen;
    return -c;
}

static const kv_comparator reverse_cmp = {"test.reverse", reverse_compare, NULL};

/* NVERS versions of NKEYS keys (some keys with a 0x00 byte, of two
 * lengths), unique sequences 1..NVERS in random order, a quarter of them
 * tombstones, spread over NSRC memtables ordered by cmp. */
static void make_sources(const kv_comparator *cmp, uint64_t seed)
{
    uint64_t seqs[NVERS];
    for (size_t i = 0; i < NVERS; i++)
        seqs[i] = i + 1;
    for (size_t i = NVERS; i > 1; i--) {
        size_t j = splitmix(seed + i) % i;
        uint64_t t = seqs[i - 1];
        seqs[i - 1] = seqs[j];
        seqs[j] = t;
    }
    for (int s = 0; s < NSRC; s++) {
        ck_assert_int_eq(kv_mem_new(0, 0, &mems[s]), KV_OK);
        kv_mem_set_comparator(mems[s], cmp);
    }
    for (size_t i = 0; i < NVERS; i++) {
        struct ver *v = &vers[i];
        unsigned k = (unsigned)(splitmix(seed ^ (i * 7919)) % NKEYS);
        v->klen = k % 3 == 0 ? 3 : 4;
        v->key[0] = 'k';
        v->key[1] = (uint8_t)(k / 10);
        v->key[2] = k % 5 == 0 ? 0x00 : (uint8_t)('0' + k % 10);
        v->key[3] = (uint8_t)k;
        v->seq = seqs[i];
        v->kind = splitmix(seed + 3 * i) % 4 == 0 ? KV_KIND_TOMBSTONE : KV_KIND_VALUE;
        snprintf(v->val, sizeof v->val, "v%llu", (unsigned long long)v->seq);
        int s = (int)(splitmix(seed + 5 * i) % NSRC);
        ck_assert_int_eq(kv_mem_add(mems[s], 0, v->seq, v->kind, v->key, v->klen,
                                    v->kind == KV_KIND_TOMBSTONE ? "" : v->val,
                                    v->kind == KV_KIND_TOMBSTONE ? 0 : strlen(v->val)),
                         KV_OK);
    }
    qsort(vers, NVERS, sizeof *vers, ver_cmp);
}

static void free_sources(void)
{
    for (int s = 0; s < NSRC; s++) {
        kv_mem_free(mems[s]);
        mems[s] = NULL;
    }
}

static void open_merge(struct kv_merge *m, const kv_comparator *cmp)
{
    ck_assert_int_eq(kv_merge_init(m, cmp, NULL, NSRC), KV_OK);
    for (int s = 0; s < NSRC; s++)
        kv_merge_add_mem(m, mems[s]);
}

static void assert_at(const struct kv_merge *m, const struct ver *v)
{
    const struct kv_merge_source *s = kv_merge_top(m);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(s->klen, v->klen);
    ck_assert_mem_eq(s->key, v->key, v->klen);
    ck_assert_uint_eq(s->seq, v->seq);
    ck_assert_int_eq(s->kind, v->kind);
}

/* Every version, forward then backward, in the model's order. */
static void check_order(const kv_comparator *cmp)
{
    struct kv_merge m;
    open_merge(&m, cmp);
    ck_assert_int_eq(kv_merge_first(&m), KV_OK);
    for (size_t i = 0; i < NVERS; i++) {
        assert_at(&m, &vers[i]);
        ck_assert_int_eq(kv_merge_step(&m), KV_OK);
    }
    ck_assert_ptr_null(kv_merge_top(&m));
    ck_assert_int_eq(kv_merge_last(&m), KV_OK);
    for (size_t i = NVERS; i-- > 0;) {
        assert_at(&m, &vers[i]);
        ck_assert_int_eq(kv_merge_step(&m), KV_OK);
    }
    ck_assert_ptr_null(kv_merge_top(&m));
    kv_merge_free(&m);
}

START_TEST(merge_orders_overlapping_sources_both_ways)
{
    make_sources(NULL, 11);
    check_order(NULL);
    free_sources();
}
END_TEST

START_TEST(merge_follows_a_custom_comparator)
{
    rev_order = 1;
    make_sources(&reverse_cmp, 12);
    /* The model's first key is the bytewise largest. */
    ck_assert_int_gt(memcmp(vers[0].key, vers[NVERS - 1].key, 2), 0);
    check_order(&reverse_cmp);
    rev_order = 0;
    free_sources();
}
END_TEST

/* The model's answer at snap, as the index of each key's visible version
 * (tombstones not included), in order: returns how many. */
static size_t model_visible(uint64_t snap, size_t *out)
{
    size_t n = 0;
    for (size_t i = 0; i < NVERS;) {
        size_t j = i, pick = SIZE_MAX;
        for (; j < NVERS && key_cmp(vers[j].key, vers[j].klen, vers[i].key, vers[i].klen) == 0; j++)
            if (pick == SIZE_MAX && vers[j].seq <= snap)
                pick = j;
        if (pick != SIZE_MAX && vers[pick].kind != KV_KIND_TOMBSTONE)
            out[n++] = pick;
        i = j;
    }
    return n;
}

START_TEST(reader_sees_the_newest_visible_version_at_every_snapshot)
{
    make_sources(NULL, 13);
    size_t want[NVERS];
    for (uint64_t snap = 0; snap <= NVERS + 1; snap += 7) {
        size_t n = model_visible(snap, want);
        struct kv_merge m;
        open_merge(&m, NULL);
        /* Forward: as kv_iter_next does. */
        ck_assert_int_eq(kv_merge_first(&m), KV_OK);
        struct kv_merge_source *s;
        for (size_t i = 0;; i++) {
            ck_assert_int_eq(kv_merge_next_visible(&m, snap, NULL, 0, i > 0, &s), KV_OK);
            if (i == n) {
                ck_assert_ptr_null(s);
                break;
            }
            ck_assert_ptr_nonnull(s);
            const struct ver *v = &vers[want[i]];
            ck_assert_mem_eq(s->key, v->key, v->klen);
            ck_assert_uint_eq(s->seq, v->seq);
            ck_assert_uint_eq(s->vlen, strlen(v->val));
            ck_assert_mem_eq(s->val, v->val, s->vlen);
            ck_assert_int_eq(kv_merge_set_skip(&m, s->key, s->klen), KV_OK);
            ck_assert_int_eq(kv_merge_step(&m), KV_OK);
        }
        /* Backward: the copied pair. */
        ck_assert_int_eq(kv_merge_last(&m), KV_OK);
        for (size_t i = n;; i--) {
            int found;
            ck_assert_int_eq(kv_merge_prev_visible(&m, snap, NULL, 0, &found), KV_OK);
            if (i == 0) {
                ck_assert_int_eq(found, 0);
                break;
            }
            ck_assert_int_eq(found, 1);
            const struct ver *v = &vers[want[i - 1]];
            ck_assert_uint_eq(m.sklen, v->klen);
            ck_assert_mem_eq(m.sk, v->key, v->klen);
            ck_assert_uint_eq(m.svlen, strlen(v->val));
            ck_assert_mem_eq(m.sv, v->val, m.svlen);
        }
        kv_merge_free(&m);
    }
    free_sources();
}
END_TEST

START_TEST(seeks_land_where_the_contract_says)
{
    make_sources(NULL, 14);
    struct kv_merge m;
    open_merge(&m, NULL);
    for (size_t i = 0; i < NVERS; i += 3) {
        const struct ver *v = &vers[i];
        /* seek (key, seq): the first version >= it, i.e. vers[i] itself. */
        ck_assert_int_eq(kv_merge_seek(&m, v->key, v->klen, v->seq), KV_OK);
        assert_at(&m, v);
        /* seek_past: the first version of the next key. */
        size_t j = i;
        while (j < NVERS && key_cmp(vers[j].key, vers[j].klen, v->key, v->klen) == 0)
            j++;
        ck_assert_int_eq(kv_merge_seek_past(&m, v->key, v->klen), KV_OK);
        if (j == NVERS)
            ck_assert_ptr_null(kv_merge_top(&m));
        else
            assert_at(&m, &vers[j]);
        /* seek_before: the oldest version of the previous key. */
        size_t b = i;
        while (b > 0 && key_cmp(vers[b - 1].key, vers[b - 1].klen, v->key, v->klen) == 0)
            b--;
        ck_assert_int_eq(kv_merge_seek_before(&m, v->key, v->klen), KV_OK);
        if (b == 0)
            ck_assert_ptr_null(kv_merge_top(&m));
        else
            assert_at(&m, &vers[b - 1]);
    }
    kv_merge_free(&m);
    free_sources();
}
END_TEST

/* Compaction's rule: the merge fed to kv_dropper_drop with oldest snapshot
 * `horizon`; the kept versions must give every reader at a snapshot at or
 * above the horizon the answer all versions give, and no more versions
 * than that needs. */
static void check_drop(uint64_t horizon, int base)
{
    struct kv_merge m;
    open_merge(&m, NULL);
    struct kv_dropper d = {.horizon = horizon};
    int kept[NVERS] = {0};
    size_t i = 0;
    ck_assert_int_eq(kv_merge_first(&m), KV_OK);
    for (struct kv_merge_source *s; (s = kv_merge_top(&m)) != NULL; i++) {
        int r = kv_dropper_drop(&d, s->key, s->klen, s->seq, s->kind, base);
        ck_assert_int_ge(r, 0);
        kept[i] = !r;
        ck_assert_int_eq(kv_merge_step(&m), KV_OK);
    }
    ck_assert_uint_eq(i, NVERS);
    kv_dropper_free(&d);
    kv_merge_free(&m);
    for (size_t a = 0; a < NVERS;) {
        size_t z = a;
        while (z < NVERS && key_cmp(vers[z].key, vers[z].klen, vers[a].key, vers[a].klen) == 0)
            z++;
        /* Readers at each snapshot >= horizon see the same version. */
        for (uint64_t snap = horizon; snap <= NVERS; snap++) {
            size_t all = SIZE_MAX, k = SIZE_MAX;
            for (size_t j = a; j < z; j++) {
                if (vers[j].seq <= snap && all == SIZE_MAX)
                    all = j;
                if (vers[j].seq <= snap && kept[j] && k == SIZE_MAX)
                    k = j;
            }
            int all_live = all != SIZE_MAX && vers[all].kind != KV_KIND_TOMBSTONE;
            int k_live = k != SIZE_MAX && vers[k].kind != KV_KIND_TOMBSTONE;
            ck_assert_int_eq(all_live, k_live);
            if (all_live)
                ck_assert_uint_eq(all, k);
        }
        /* What is kept: the newest version, and each version some
         * snapshot at or above the horizon can reach. A tombstone at the
         * bottom that every snapshot sees goes. */
        for (size_t j = a; j < z; j++) {
            int needed = j == a || vers[j - 1].seq > horizon;
            if (base && vers[j].kind == KV_KIND_TOMBSTONE && vers[j].seq <= horizon)
                needed = 0;
            ck_assert_msg(kept[j] == needed, "version %llu: kept %d, needed %d",
                          (unsigned long long)vers[j].seq, kept[j], needed);
        }
        a = z;
    }
}

START_TEST(compaction_drops_what_no_snapshot_reaches)
{
    make_sources(NULL, 15);
    check_drop(NVERS, 1);     /* no snapshot: one version a key, no tombstone */
    check_drop(NVERS, 0);     /* not the bottom: tombstones stay */
    check_drop(NVERS / 2, 1); /* a snapshot pins versions above it */
    check_drop(0, 1);         /* a snapshot of nothing: everything stays */
    free_sources();
}
END_TEST

/* A lone table reader as a source (its keys escaped internal keys, some
 * with 0x00 bytes), merged with a memtable. */
START_TEST(table_sources_merge_with_memtables)
{
    char path[4096];
    test_path(path, sizeof path, "000001.sst");
    make_sources(NULL, 16);
    kv_sst_options so;
    kv_sst_options_init(&so);
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_new(path, &so, &w), KV_OK);
    /* The table takes the versions with odd sequences, in order. */
    kv_mem *mem;
    ck_assert_int_eq(kv_mem_new(0, 0, &mem), KV_OK);
    for (size_t i = 0; i < NVERS; i++) {
        const struct ver *v = &vers[i];
        const char *val = v->kind == KV_KIND_TOMBSTONE ? "" : v->val;
        if (v->seq % 2) {
            uint8_t ik[2 * 8 + 2 + KV_IKEY_TRAILER];
            size_t n = kv_ikey_put_prefix(ik, v->key, v->klen);
            kv_ikey_put_trailer(ik + n, v->seq, v->kind);
            ck_assert_int_eq(kv_sst_writer_add(w, ik, n + KV_IKEY_TRAILER, val, strlen(val)),
                             KV_OK);
        } else {
            ck_assert_int_eq(kv_mem_add(mem, 0, v->seq, v->kind, v->key, v->klen, val, strlen(val)),
                             KV_OK);
        }
    }
    uint64_t size;
    ck_assert_int_eq(kv_sst_writer_finish(w, &size), KV_OK);
    kv_sst_reader *rd;
    ck_assert_int_eq(kv_sst_reader_open(path, NULL, 1, &rd), KV_OK);
    struct kv_merge m;
    ck_assert_int_eq(kv_merge_init(&m, NULL, NULL, 2), KV_OK);
    kv_merge_add_reader(&m, rd);
    kv_merge_add_mem(&m, mem);
    ck_assert_int_eq(kv_merge_first(&m), KV_OK);
    for (size_t i = 0; i < NVERS; i++) {
        assert_at(&m, &vers[i]);
        const struct kv_merge_source *s = kv_merge_top(&m);
        ck_assert_int_eq(s->ikey != NULL, (int)(vers[i].seq % 2)); /* tables give the stored key */
        ck_assert_int_eq(kv_merge_step(&m), KV_OK);
    }
    ck_assert_ptr_null(kv_merge_top(&m));
    ck_assert_int_eq(kv_merge_last(&m), KV_OK);
    for (size_t i = NVERS; i-- > 0;) {
        assert_at(&m, &vers[i]);
        ck_assert_int_eq(kv_merge_step(&m), KV_OK);
    }
    for (size_t i = 1; i < NVERS; i += 5) {
        ck_assert_int_eq(kv_merge_seek(&m, vers[i].key, vers[i].klen, vers[i].seq), KV_OK);
        assert_at(&m, &vers[i]);
    }
    kv_merge_free(&m);
    kv_sst_reader_close(rd);
    kv_mem_free(mem);
    free_sources();
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("merge");
    TCase *order = test_tcase(s, "order", 30, 1);
    tcase_add_test(order, merge_orders_overlapping_sources_both_ways);
    tcase_add_test(order, merge_follows_a_custom_comparator);
    tcase_add_test(order, seeks_land_where_the_contract_says);
    tcase_add_test(order, table_sources_merge_with_memtables);
    TCase *rule = test_tcase(s, "rule", 30, 0);
    tcase_add_test(rule, reader_sees_the_newest_visible_version_at_every_snapshot);
    tcase_add_test(rule, compaction_drops_what_no_snapshot_reaches);
    return s;
}
