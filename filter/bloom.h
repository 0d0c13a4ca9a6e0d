/* bloom.h - Bloom filters: sizing, two layouts, concurrent adds, a codec.
 *
 * A filter answers "definitely absent" (0) or "maybe present" (1) for a key.
 * It never answers 0 for a key that was added. Keys are byte strings hashed
 * once with XXH3-64 and the filter's seed; callers that already hold that
 * hash (an SSTable reader, a store that hashed the user key) pass it to the
 * *_hash functions and skip rehashing.
 *
 * Keyed filters (kv_bloom_new_keyed) hash keys with SipHash-2-4 under a
 * 128-bit secret instead: someone who chooses the keys but does not know
 * the secret cannot pick keys that all land on the same bits (with seeded
 * XXH3, whoever learns the seed can). SipHash costs more per key than XXH3
 * (doc/filter_science.md, "Hash shoot-out"). The secret is never encoded:
 * a keyed filter's encoding records only a check value of the secret, and
 * decoding it needs the secret again (kv_bloom_decode_keyed).
 *
 * Two layouts:
 *   KV_BLOOM_BLOCKED  512-bit blocks, one cache line each, 64-byte aligned;
 *                     all k probes of a key fall in one block: one cache miss
 *                     per query. FPR slightly above the classic layout's.
 *   KV_BLOOM_CLASSIC  m bits, k probes by Kirsch-Mitzenmacher double hashing.
 *
 * Concurrency: kv_bloom_add and kv_bloom_add_hash may run from any number of
 * threads at once, and queries may run concurrently with them. Queries never
 * lock. A filter is cut into regions (a classic filter is one; a blocked one
 * up to 64 runs of whole blocks). While only one thread has added to a
 * region, its adds there are plain loads and stores; the first add of a
 * second thread hands the region over to shared adds for good (on Linux,
 * with one membarrier(2) call; where that is unavailable, adds are shared
 * from the start). A shared blocked add rewrites its key's block while
 * holding that block's spin lock (one locked instruction; the exact key
 * count rides in the lock word); a shared classic add sets each bit with an
 * atomic OR and counts in a per-thread stripe. Freeing a filter while
 * another thread uses it is the caller's bug.
 *
 * Several threads filling one filter: threads whose keys spread over the
 * whole filter write the same cache lines, which then move between their
 * cores on most adds; for a filter that fits in the CPU caches that costs
 * more than the second thread brings. Give each thread the keys of its own
 * part instead (kv_bloom_partition): then no two threads write one line and
 * each adds with plain stores.
 *
 * On x86-64 CPUs with AVX-512 the blocked layout's probes run as vector
 * code, which sets and tests exactly the bits the portable code does; a
 * filter made while the environment says KV_BLOOM_SIMD=0 uses the portable
 * code. The choice changes speed only, never an answer or a byte encoded.
 *
 * A filter can also live in a file that many processes map at once
 * (kv_bloom_open_shared): one cache-penetration guard for a fleet of
 * service processes on one machine, without a server.
 *
 * The encoding (kv_bloom_encode / kv_bloom_decode, kv_bloom_save /
 * kv_bloom_load) and the shared file are documented byte by byte in
 * doc/filter_format.md. */
#ifndef KV_BLOOM_H
#define KV_BLOOM_H

#include <stddef.h>
#include <stdint.h>

#include <kv/common.h> /* kv_bloom_layout: KV_BLOOM_BLOCKED, KV_BLOOM_CLASSIC */
#include <kv/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kv_bloom kv_bloom;

typedef struct {
    kv_bloom_layout layout;
    uint64_t bits;           /* m: bits addressed by probes */
    unsigned k;              /* probes per key */
    uint64_t keys_added;     /* exact count of adds (or as decoded) */
    uint64_t bits_set;       /* popcount of the bit array */
    double fill;             /* bits_set / bits */
    double estimated_keys;   /* Swamidass-Baldi: -(m/k) ln(1 - bits_set/m) */
    double expected_fpr;     /* for keys_added keys */
    size_t bytes;            /* memory of the bit array */
} kv_bloom_info;

/* Largest number of bits one filter may have (2^40, 128 GiB). */
#define KV_BLOOM_MAX_BITS ((uint64_t)1 << 40)
/* k is always within [KV_BLOOM_MIN_K, KV_BLOOM_MAX_K]. */
#define KV_BLOOM_MIN_K 1u
#define KV_BLOOM_MAX_K 30u

/* Creates an empty filter sized for `expected_keys` keys at `bits_per_key`
 * bits each (fractional allowed, > 0 and <= 1000). m = ceil(n * bits_per_key),
 * at least 64 bits (classic), or rounded up to whole 512-bit blocks, at
 * least one (blocked). k: classic round(bits_per_key * ln 2); blocked the k
 * that minimises the blocked layout's expected FPR (kv_bloom_expected_fpr)
 * for this m and n; both clamped to [1, 30].
 * KV_EINVAL: bad layout, NULL out, bits_per_key not finite or out of range,
 * or m above KV_BLOOM_MAX_BITS. KV_ENOMEM: allocation failed.
 * On error *out is NULL. */
KV_API int kv_bloom_new(kv_bloom_layout layout, uint64_t expected_keys,
                        double bits_per_key, uint64_t seed, kv_bloom **out);

/* Creates an empty filter sized for `expected_keys` keys at a target FPR in
 * (0, 1): m = ceil(-n ln p / (ln 2)^2), k = round((m/n) ln 2) for the classic
 * layout (n = 1,000,000, p = 0.01: m = 9,585,059, k = 7). The blocked layout
 * starts from the same m and grows it until its own expected FPR reaches p.
 * Errors as kv_bloom_new; also KV_EINVAL when p implies more than 1000 bits
 * per key (p below about 1e-209), and, for the blocked layout, when no
 * filter of at most KV_BLOOM_BLOCKED_MAX_RATIO times the classic m (at
 * least one block) and KV_BLOOM_MAX_BITS reaches p: targets so near 1 that
 * its blocks saturate (2^40 keys at p = 0.999999 would take 10 GB; the
 * classic layout gives 2.3M bits, k = 1), or below about 1e-19 (over
 * ~1000 bits per key; with k <= 30 its FPR cannot fall below about 1e-37
 * times the keys per block). Such a refusal is found before anything is
 * allocated, in microseconds, and kv_error_text says why. */
KV_API int kv_bloom_new_fpr(kv_bloom_layout layout, uint64_t expected_keys,
                            double target_fpr, uint64_t seed, kv_bloom **out);

/* Most bits the blocked layout may spend, as a multiple of the classic
 * layout's m, to reach a target FPR (kv_bloom_new_fpr). Between 0.9 and
 * 1e-18 it needs 1 to 8 times. */
#define KV_BLOOM_BLOCKED_MAX_RATIO 16

/* The m and k kv_bloom_new_fpr would give, without allocating: what a
 * filter for this target will cost (kv_bloom_bytes: m / 8 blocked, m / 64
 * rounded up, times 8, classic) before it is made, and what a decoded
 * filter claiming these parameters must measure. Errors as
 * kv_bloom_new_fpr (KV_EINVAL, also for NULL m_out or k_out). */
KV_API int kv_bloom_size_fpr(kv_bloom_layout layout, uint64_t expected_keys, double target_fpr,
                             uint64_t *m_out, unsigned *k_out);

/* Frees the filter; a shared one (kv_bloom_open_shared) is unmapped, and
 * its file stays, with every key added to it. NULL is a no-op. */
KV_API void kv_bloom_free(kv_bloom *f);

/* The hash the *_hash functions take: XXH3-64 of the key with the filter's
 * seed, or for a keyed filter SipHash-2-4 of the key under its secret.
 * `key` may be NULL when len is 0. Cannot fail. */
KV_API uint64_t kv_bloom_hash(const kv_bloom *f, const void *key, size_t len);

/* Adds a key (or its hash). Safe from many threads at once, and concurrently
 * with queries. Cannot fail: the filter is already allocated. */
KV_API void kv_bloom_add(kv_bloom *f, const void *key, size_t len);
KV_API void kv_bloom_add_hash(kv_bloom *f, uint64_t h);

/* Adds a key (or its hash), as kv_bloom_add does, and tells whether it may
 * have been present before: 1 when every bit it sets was set already ("maybe
 * present": a key added before, or a false positive at the filter's FPR), 0
 * when at least one was not (surely new). The bits are read and set in one
 * pass. Safe from many threads at once, and with kv_bloom_add and queries,
 * like kv_bloom_add; the key counts as one add whatever the answer.
 * What holds with several threads (or processes) at once:
 *   - a key whose kv_bloom_add or kv_bloom_add_check returned before this
 *     call began always gets 1 (no false "new");
 *   - when several calls add the same absent key at once, at least one of
 *     them gets 0: each word's ORs happen one after another, and the first
 *     to reach a word that lacked one of the key's bits sees it lacking.
 *     Under a block lock (blocked layout, shared adds in one process)
 *     exactly one gets 0; where the bits are set by atomic ORs (the
 *     classic layout, a shared file) more than one may, each having set a
 *     bit itself. A caller that needs exactly one winner per key must
 *     decide it elsewhere (a lock, or the store the filter guards).
 * NULL f: 1 (no filter rejects anything), nothing added. Cannot fail. */
KV_API int kv_bloom_add_check(kv_bloom *f, const void *key, size_t len);
KV_API int kv_bloom_add_check_hash(kv_bloom *f, uint64_t h);

/* Adds n hashes, as kv_bloom_add_hash would each, with plain loads and
 * stores instead of atomic ones: for a filter that no other thread can see
 * yet (a table writer builds its filter alone, before anyone holds it).
 * The caller guarantees that no other thread adds to or reads f meanwhile.
 * On a shared filter (kv_bloom_open_shared), which other processes may be
 * adding to, they are kv_bloom_add_hash's atomic adds instead.
 * NULL f or hashes: no-op. Cannot fail. */
KV_API void kv_bloom_add_hashes_owned(kv_bloom *f, const uint64_t *hashes, size_t n);

/* Which of `parts` parts of the filter a key with hash h belongs to, in
 * [0, parts): the parts are runs of whole regions (see Concurrency above),
 * each within one region (1/33 of the filter at most) of an even share of
 * the blocks, so threads that each add the keys of
 * their own part never write a cache line another one writes (a blocked
 * filter of fewer regions than parts leaves some parts empty). A classic
 * filter, or a blocked one of a single block, cannot be split: its parts
 * only share the keys out evenly, and threads adding them share the bit
 * array. 0 when f is NULL or parts <= 1. Cannot fail. */
KV_API unsigned kv_bloom_partition(const kv_bloom *f, uint64_t h, unsigned parts);

/* 0: definitely absent; 1: maybe present. Cannot fail. */
KV_API int kv_bloom_may_contain(const kv_bloom *f, const void *key, size_t len);
KV_API int kv_bloom_may_contain_hash(const kv_bloom *f, uint64_t h);

/* Starts bringing into the cache the lines a query of hash h reads (one
 * block, or a classic filter's k words), and returns at once: a caller
 * about to query several filters with one key asks each of them first, so
 * their memory latencies overlap instead of adding up. Changes no answer;
 * NULL f is a no-op. Cannot fail. */
KV_API void kv_bloom_prefetch_hash(const kv_bloom *f, uint64_t h);

/* out[i] = kv_bloom_may_contain_hash(f, hashes[i]) for i < n, prefetching the
 * cache lines of later queries while earlier ones are answered: for filters
 * larger than the CPU caches this hides most of the memory latency. */
KV_API void kv_bloom_may_contain_batch(const kv_bloom *f, const uint64_t *hashes,
                                       size_t n, uint8_t *out);

/* Serialises the filter (doc/filter_format.md) into a new buffer that the
 * caller frees with kv_free. A filter being added to concurrently encodes
 * some consistent-enough state: every add that returned before the call is
 * included. KV_EINVAL on NULL arguments, KV_ENOMEM. */
KV_API int kv_bloom_encode(const kv_bloom *f, void **buf, size_t *len);

/* Bytes [offset, offset + len) of the filter's encoding, without making the
 * rest: a caller that hands an encoding out in chunks (the Redis module's
 * BF.SCANDUMP) pays each chunk its own bytes. The range must lie within
 * the header and the bit array, the first 40 + kv_bloom_bytes(f) bytes;
 * the 8-byte checksum that ends the encoding covers all of them, and
 * kv_bloom_encode_check computes it (O(m), no allocation). With no add in
 * between, the pieces and the checksum are kv_bloom_encode's bytes.
 * KV_EINVAL: NULL f, NULL dst with len > 0, or a range past the bit array. */
KV_API int kv_bloom_encode_range(const kv_bloom *f, uint64_t offset, void *dst, size_t len);
KV_API int kv_bloom_encode_check(const kv_bloom *f, uint64_t *out);

/* Rebuilds a filter from an encoding. Every field is checked before the
 * payload is touched and the checksum covers every byte, so any truncated,
 * altered or foreign buffer gives KV_ECORRUPT; KV_EINVAL on NULL arguments
 * and for the encoding of a keyed filter (kv_bloom_decode_keyed);
 * KV_ENOMEM. On error *out is NULL. */
KV_API int kv_bloom_decode(const void *buf, size_t len, kv_bloom **out);

/* ---- operations on whole filters --------------------------------------------
 * Two filters combine when they have the same layout, bits (m), k and seed
 * (they were made with the same layout, sizing and seed; keyed filters with
 * the same secret, and never a keyed one with an unkeyed one): then a key
 * has the same bits in both. Otherwise KV_EINVAL, and nothing changes.
 *
 * Concurrency: dst must not be added to, combined or cleared by another
 * thread during the call (such bits could be lost), but may be queried:
 * a query during the call sees each word before or after it. src may be
 * queried and added to meanwhile; its adds that race with the call may or
 * may not reach dst. A shared filter (kv_bloom_open_shared) as dst: the
 * call's ORs are atomic, so kv_bloom_union loses no add other processes
 * make meanwhile; kv_bloom_intersect and kv_bloom_clear may drop (some
 * bits of) an add that overlaps them, never one that returned before the
 * call began or began after it returned. */

/* dst |= src, bit by bit: dst then holds every key of both, exactly the
 * bits of a filter to which both filters' keys were added, and answers
 * "maybe" for any key either does. Key count: the sum of both, exact when
 * no key was added to both (an upper bound on the distinct keys
 * otherwise), saturating at 2^64 - 1 (a decoded filter may claim any
 * count; every key count kv_bloom_stats reports saturates so, never
 * wrapping to a small number). dst == src: nothing changes. KV_EINVAL: NULL argument or a
 * mismatch (above). */
KV_API int kv_bloom_union(kv_bloom *dst, const kv_bloom *src);

/* dst &= src, bit by bit: dst keeps only the bits both have, so it
 * answers "maybe" only for keys both did, and for every key added to both.
 * Bits that keys of one filter alone set in both may remain, so its FPR can
 * be above that of a filter built from the common keys alone. Key count: the
 * estimate of the common keys from the bits set (Swamidass-Baldi,
 * n(X) = -(m/k) ln(1 - X/m), by inclusion-exclusion: n(A) + n(B) -
 * n(A|B), rounded, within 0 .. the smaller of the two counts); the
 * true number of common keys is unknown. dst == src: nothing changes.
 * KV_EINVAL: NULL argument or a mismatch. */
KV_API int kv_bloom_intersect(kv_bloom *dst, const kv_bloom *src);

/* Empties the filter: every bit 0, key count 0; it keeps its parameters
 * and answers 0 for every key until keys are added again. Concurrency as
 * dst above. NULL: no-op. Cannot fail. */
KV_API void kv_bloom_clear(kv_bloom *f);

/* ---- files ----------------------------------------------------------------- */

/* Writes the filter's encoding (kv_bloom_encode) to `path` so that a crash
 * leaves the old file or the new one, whole: the bytes go to "<path>.tmp"
 * (a leftover of an earlier crash is replaced), which is synced, renamed
 * over path, and the directory synced. Two saves to one path at once are
 * the caller's to prevent (they share the temporary name). A filter being
 * added to meanwhile saves as kv_bloom_encode describes.
 * Errors, each with kv_error_text naming the file: KV_EINVAL (NULL
 * argument, a name too long), KV_ENOMEM, KV_EIO, KV_ENOSPC, KV_EPERM (as
 * util maps errno: a read-only file system or directory, EACCES); on error
 * no temporary file is left and path is as it was, but for a failure of
 * the last step, the directory's sync, after which path may hold either
 * filter. */
KV_API int kv_bloom_save(const kv_bloom *f, const char *path);

/* Reads a filter that kv_bloom_save wrote (or any file holding one
 * encoding). KV_NOTFOUND: no such file; KV_ECORRUPT: anything but exactly
 * one valid encoding (truncated, extended, a flipped byte, a foreign file,
 * not a regular file); KV_EIO, KV_EPERM, KV_ENOMEM; KV_EINVAL for NULL
 * arguments, and for the file of a keyed filter, which needs its secret:
 * kv_error_text then says to load it with kv_bloom_load_keyed. Every
 * error sets kv_error_text, naming the file. On error *out is NULL. */
KV_API int kv_bloom_load(const char *path, kv_bloom **out);


/* A filter whose bits live in the file at `path`, mapped (MAP_SHARED) into
 * this process: any number of processes on one machine (and threads in
 * each) open the same file, add to it and query it at once, and each sees
 * every other's adds as they land. This is one cache-penetration guard for
 * a whole fleet of service processes, with no server in between.
 *
 * When no file has that name, one is made for these parameters (sized as
 * kv_bloom_new would) and put in place whole, so that any number of
 * processes may open the same new path at once: one creates it, all open
 * it. When it exists, its stored parameters win: a layout, expected_keys,
 * bits_per_key or seed other than the stored ones (bits_per_key compared
 * exactly) is KV_EINVAL. expected_keys 0 means "open an existing filter,
 * whatever its parameters" (layout, bits_per_key and seed are then
 * ignored, and a missing file is KV_NOTFOUND).
 *
 * Every add is an atomic OR per word it touches (never a lock, so a
 * process killed mid-add blocks nobody, and its key may be half there);
 * the key count lives in the file, exact across processes. The header is
 * checked (checksum, sizes, the file's length) on every open: KV_ECORRUPT
 * on damage. The bit array, which changes all the time, carries no
 * checksum. kv_bloom_encode, kv_bloom_save and every query work on it as
 * on any filter; kv_bloom_free unmaps it and leaves the file.
 *
 * Durability: the file is created and synced before it gets its name; the
 * adds reach the disk when the system writes the pages back. A process
 * crash loses nothing; a machine crash may lose recent adds (false
 * negatives), so treat the file as a cache and rebuild it after a reboot,
 * or keep a kv_bloom_save snapshot. Nobody may truncate the file while it
 * is open: by design, every process that has it mapped then gets SIGBUS
 * (killed) on its next query or add past the new end, which no library
 * can turn into an error; replace the file by renaming a new one over it
 * instead. It must be on a local file system.
 *
 * A path that is a symbolic link is followed to an existing file; one
 * whose target does not exist (a dangling link) is KV_EINVAL at once,
 * with kv_error_text naming the link: the filter is never created through
 * it.
 *
 * Errors, each with kv_error_text naming the file: KV_EINVAL (NULL path or
 * out, bad parameters as kv_bloom_new, other stored parameters),
 * KV_NOTFOUND (expected_keys 0 and no file), KV_ECORRUPT (also key
 * counters whose sum passes 2^64 - 1), KV_ENOSPC (no room to create it),
 * KV_EPERM, KV_EIO, KV_ENOMEM. On error *out is NULL. */
KV_API int kv_bloom_open_shared(const char *path, kv_bloom_layout layout,
                                uint64_t expected_keys, double bits_per_key, uint64_t seed,
                                kv_bloom **out);
/* ---- keyed filters ------------------------------------------------------------ */

/* Bytes of a keyed filter's secret. */
#define KV_BLOOM_SECRET_BYTES 16

/* kv_bloom_new, for a filter whose hash is SipHash-2-4 under `secret` (16
 * bytes, the paper's k0 || k1 as little-endian words) instead of seeded
 * XXH3: kv_bloom_hash, kv_bloom_add and kv_bloom_may_contain all use it,
 * and everything after the hash (block, probes) is the same. The filter
 * keeps the secret in memory only. KV_EINVAL also for a NULL secret. */
KV_API int kv_bloom_new_keyed(kv_bloom_layout layout, uint64_t expected_keys,
                              double bits_per_key, const uint8_t secret[KV_BLOOM_SECRET_BYTES],
                              kv_bloom **out);

/* 1 when f is keyed (made by kv_bloom_new_keyed or kv_bloom_decode_keyed),
 * else 0 (and for NULL). Cannot fail. */
KV_API int kv_bloom_is_keyed(const kv_bloom *f);

/* A 64-bit check value of a secret: SipHash-2-4 under the secret of the 16
 * ASCII bytes "kv filter secret". It tells whether two secrets are the
 * same without revealing either (finding the secret from it is as hard as
 * breaking SipHash). A keyed filter's encoding stores it in place of the
 * seed; a store records it beside tables whose filters are keyed. NULL: 0.
 * Cannot fail. */
KV_API uint64_t kv_bloom_secret_check(const uint8_t secret[KV_BLOOM_SECRET_BYTES]);

/* kv_bloom_decode for the encoding of a keyed filter: the filter comes back
 * keyed with `secret`, which must be the one it was made with: the
 * encoding's check value (kv_bloom_secret_check) must match, else
 * KV_EINVAL (a filter queried with another secret would answer "absent"
 * for keys it holds). KV_EINVAL also for an unkeyed encoding (use
 * kv_bloom_decode) or a NULL secret; damage is KV_ECORRUPT as for
 * kv_bloom_decode. kv_bloom_decode refuses a keyed encoding with KV_EINVAL
 * and says so in kv_error_text. On error *out is NULL. */
KV_API int kv_bloom_decode_keyed(const void *buf, size_t len,
                                 const uint8_t secret[KV_BLOOM_SECRET_BYTES], kv_bloom **out);

/* kv_bloom_load for the file of a keyed filter (kv_bloom_new_keyed, then
 * kv_bloom_save): the filter comes back keyed with `secret`, which must be
 * the one it was made with (kv_bloom_decode_keyed's check), else KV_EINVAL.
 * KV_EINVAL also for a NULL secret and for the file of an unkeyed filter
 * (kv_bloom_load); other errors as kv_bloom_load. */
KV_API int kv_bloom_load_keyed(const char *path, const uint8_t secret[KV_BLOOM_SECRET_BYTES],
                               kv_bloom **out);

/* Bytes of the filter's bit array (kv_bloom_info.bytes), without counting
 * its bits: O(1). 0 for NULL. Cannot fail. */
KV_API size_t kv_bloom_bytes(const kv_bloom *f);

/* Fills *out with the filter's parameters and fill metrics (counts the set
 * bits: O(m/64)). Cannot fail; a NULL argument leaves nothing written. */
KV_API void kv_bloom_stats(const kv_bloom *f, kv_bloom_info *out);

/* 1 when f's blocked probes run as AVX-512 code: f was made on a CPU that
 * has it, by a build that has the code, and the environment did not say
 * KV_BLOOM_SIMD=0; else 0 (and for NULL). For tests and benchmarks, which
 * report which code they timed. Cannot fail. */
KV_API int kv_bloom_uses_avx512(const kv_bloom *f);

/* The expected false-positive rate of a filter of `m_bits` bits with `k`
 * probes holding `n_keys` keys.
 * classic: (1 - e^(-kn/m))^k.
 * blocked: m/512 blocks of 512 bits; the keys per block follow a Poisson law
 *   of mean lambda = 512 n / m, so FPR = sum_j Pois(j; lambda) *
 *   (1 - (1 - 1/512)^(k j))^k (Putze, Sanders, Singler 2007).
 * Returns 1.0 when m_bits or k is 0 (such a filter cannot reject anything)
 * and 0.0 when n_keys is 0. Cannot fail, and takes bounded time whatever the
 * arguments (a decoded filter may claim any count): classic is a closed
 * form; the blocked sum stops once its remaining terms are below 1e-17 of
 * it (about 10 sqrt(lambda) terms each side of the mode, at most ~4,000),
 * and is exactly 1.0 (to double precision) above 30,000 keys per block. */
KV_API double kv_bloom_expected_fpr(kv_bloom_layout layout, uint64_t m_bits,
                                    uint64_t n_keys, unsigned k);

/* ---- sharing filter memory among runs (Monkey) ------------------------------ */

/* The expected FPR of a filter kv_bloom_new builds at `bits_per_key` for
 * many keys (so that rounding m up is negligible), with the k it chooses:
 * the layout's FPR as a function of bits per key alone. 1.0 at 0 bits per
 * key or below, and for a bad layout; densities above 1000 count as 1000.
 * Cannot fail. (10 bits per key: 0.0082 classic, 0.0091 blocked.) */
KV_API double kv_bloom_fpr_at(kv_bloom_layout layout, double bits_per_key);

/* Monkey's allocation (Dayan, Athanassoulis, Idreos, SIGMOD 2017): shares
 * the memory of `bits_per_key` bits for every key among `nruns` runs of
 * run_keys[i] keys each (sorted runs, each of which a missing key probes
 * once: a level, or a level-0 table), so that the expected false positives
 * of a missing key, the sum of the runs' FPRs, is smallest. Writes each
 * run's bits per key to run_bits[i]; sum(run_keys[i] * run_bits[i]) equals
 * bits_per_key * sum(run_keys[i]), and sum(kv_bloom_fpr_at(run_bits[i])) is
 * never above the uniform allocation's (every run at bits_per_key). 0 bits
 * for a run means it should get no filter: large runs lose theirs when the
 * memory is too small to make them worth it. A run of 0 keys costs nothing
 * and gets bits_per_key.
 *
 * For the ideal filter, FPR e^(-b (ln 2)^2), the optimum has each run's
 * FPR proportional to its keys; this function optimises the layout's own
 * FPR curve (kv_bloom_fpr_at, on a grid of 1/16 bit per key up to 64), whose
 * lower convex hull makes a greedy allocation exact, and then spreads what
 * is left of the budget (less than one grid step of one run) evenly over
 * the runs that have a filter. At 32 bits per key or more every run gets
 * bits_per_key (false positives are below 1e-8 either way). doc/
 * filter_science.md derives it and shows it on a real tree.
 *
 * KV_EINVAL: bad layout, bits_per_key outside 0 .. 1000, nruns > 0 with a
 * NULL array. Thread-safe: the curve is computed by the first call for
 * its layout in the process (a few milliseconds) and kept. */
KV_API int kv_bloom_allocate(kv_bloom_layout layout, const uint64_t *run_keys, size_t nruns,
                             double bits_per_key, double *run_bits);

#ifdef __cplusplus
}
#endif

#endif /* KV_BLOOM_H */
