/* chain.h - the Redis module's filter: a chain of blocked Bloom filters
 * (<kv/bloom.h>) that grows the way RedisBloom's scalable filters do, its
 * dump format (SCANDUMP chunks, also the RDB value) and its loader.
 *
 * A chain starts with one link that takes `capacity` items at the
 * requested error rate e. A non-scaling chain keeps that one link (at e)
 * and refuses new items once it holds `capacity` of them. A scaling chain
 * gives its first link e / 2, and when the newest link is full adds one
 * `expansion` times larger at half the error rate of the one before, so the
 * links' rates sum to less than e however far it grows (RedisBloom's rule:
 * tightening ratio 1/2). Each link is sized by the blocked layout's own
 * expected false-positive rate (kv_bloom_new_fpr).
 *
 * Items are hashed once (XXH3-64, seed 0: the hash kv_bloom_hash gives an
 * unkeyed filter of seed 0); link i > 0 is probed with a remix of that hash
 * (bf_link_hash) so that the links' answers are independent.
 *
 * An item counts as new (reply 1) when no link may hold it; only new items
 * count toward a link's capacity and the chain's item count, as in
 * RedisBloom. This file knows nothing of Redis: it is plain C on
 * <kv/bloom.h>, so its rules can be read and tested apart from the glue
 * (module.c). The byte formats are in doc/redis.md. */
#ifndef KV_REDIS_CHAIN_H
#define KV_REDIS_CHAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kv/bloom.h>

/* Most links a chain may have. Each link's error rate is half the one
 * before, so <kv/bloom.h> refuses to size a link (rates below about 1e-209)
 * before a chain gets here; with expansion 2 the memory limit comes first. */
#define BF_MAX_LINKS 1024u
/* Items a command handles per batch: hashes and answers for this many live
 * on the stack, so the command path allocates nothing per item. */
#define BF_BATCH 256u
/* Largest data chunk BF.SCANDUMP returns (payload bytes). */
#define BF_CHUNK_MAX ((size_t)16 << 20)

/* Results of bf_chain_add beside the KV_ codes. */
#define BF_FULL 1 /* a non-scaling chain holds `capacity` items */

typedef struct bf_link {
    kv_bloom *f;
    uint64_t capacity; /* items this link takes */
    uint64_t items;    /* new items added to it */
    double error;      /* the error rate it was sized for */
    /* The checksum that ends the link's kv_bloom encoding, when check_ok:
     * computed once by a dump (kv_bloom_encode_check) and kept while the
     * link is not added to. Only the newest link is ever added to, so a
     * dump rehashes at most that one. */
    uint64_t check;
    bool check_ok;
} bf_link;

struct bf_load;

typedef struct bf_chain {
    uint64_t capacity;  /* of the first link */
    double error;       /* requested rate for the whole chain */
    uint64_t expansion; /* growth factor, >= 1 (kept for non-scaling ones too) */
    bool nonscaling;
    uint64_t items;     /* sum of the links' items */
    uint32_t nlinks;
    uint32_t cap_links; /* links allocated */
    bf_link *links;     /* nlinks of them, oldest first */
    /* Non-NULL while BF.LOADCHUNK fills the chain: then links holds the
     * links decoded so far and the chain answers no command. */
    struct bf_load *load;
    /* Changes (bf_chain_add calls) so far; and the dump begun at change
     * dump_gen, whose header checksum, dump_seed, seeds every data chunk
     * (valid when dump_ok). A data chunk is served from the links' memory
     * in O(its bytes) while no change came after that header. */
    uint64_t gen;
    uint64_t dump_gen;
    uint64_t dump_seed;
    bool dump_ok;
} bf_chain;

/* The most bytes of bit arrays one chain may hold; set once when the module
 * loads (the machine's memory). A link that would take the chain past it
 * is refused before anything is allocated. */
extern uint64_t bf_max_bytes;

/* Bytes of every chain's bit arrays in this process (INFO kv-bloom). */
extern uint64_t bf_filter_bytes;
/* Set by the module: KV_OK when `bytes` more of bit arrays fit under the
 * server's memory limit (maxmemory), else an error (KV_ENOSPC) that stops
 * the link before anything is allocated. NULL: no limit. */
extern int (*bf_mem_room)(uint64_t bytes);

/* Bytes of filter memory the last dump call (bf_dump_header, bf_dump_chunk)
 * read, copied or hashed: BF.SCANDUMP's work, which INFO kv-bloom shows so
 * that a test can check it is bounded by the call's own chunk. */
extern uint64_t bf_dump_work;

/* The item's hash (XXH3-64, seed 0). Cannot fail. */
uint64_t bf_hash(const void *item, size_t len);

/* Makes a chain with its first link. KV_EINVAL: a parameter out of range
 * (capacity 0, error not in (0, 1), expansion 0) or a link too large
 * (above bf_max_bytes or what <kv/bloom.h> can size); KV_ENOMEM. On error
 * *out is NULL. */
int bf_chain_new(uint64_t capacity, double error, uint64_t expansion, bool nonscaling,
                 bf_chain **out);
void bf_chain_free(bf_chain *c);

/* Sum of the links' capacities (BF.INFO "Capacity"). */
uint64_t bf_chain_capacity(const bf_chain *c);
/* Bytes the chain holds: its struct and the links' bit arrays (MEMORY
 * USAGE, BF.INFO "Size"). */
size_t bf_chain_mem(const bf_chain *c);

/* out[i] = 1 when item i (hash h[i]) may be in the chain, else 0; n <=
 * BF_BATCH. Cannot fail. */
void bf_chain_exists(const bf_chain *c, const uint64_t *h, size_t n, uint8_t *out);

/* Adds the items in order: out[i] = 1 when item i was new (and is now
 * added), 0 when the chain may hold it already; n <= BF_BATCH. Stops at the
 * first item it cannot add: returns BF_FULL (a full non-scaling chain) or
 * KV_ENOMEM / KV_EINVAL (a new link could not be made) with *done the
 * items answered before it; KV_OK with *done = n otherwise. */
int bf_chain_add(bf_chain *c, const uint64_t *h, size_t n, uint8_t *out, size_t *done);

/* A copy (COPY): KV_OK or KV_ENOMEM. */
int bf_chain_copy(const bf_chain *c, bf_chain **out);

/* ---- dump and load (doc/redis.md) ------------------------------------------ */

/* The header chunk: a new buffer (free with free()). It names each link's
 * encoding checksum: links whose checksum is not kept (the newest, after
 * adds) are hashed, with no copy. It begins a dump: the data chunks that
 * follow are framed with its checksum. KV_ENOMEM. */
int bf_dump_header(bf_chain *c, uint8_t **buf, size_t *len);
/* Bytes of the data stream: the links' encodings one after another (for a
 * chain being loaded: the bytes received so far). */
uint64_t bf_dump_data_len(const bf_chain *c);
/* The data chunk that starts at `offset` in the data stream, framed with
 * its checksum: a new buffer (free()); *next gets the iterator that follows
 * it (1 + offset + payload). Its bytes are copied from the one link they
 * lie in (offset maps to a link and a place in its encoding), nothing else
 * is encoded: O(payload) after the header (with no header since the chain
 * was made or loaded, one is computed first). KV_NOTFOUND: offset at or
 * past the end; KV_EBUSY: the chain changed since the header of this dump
 * (start again at iterator 0); KV_ENOMEM. `max` bounds the payload
 * (BF_CHUNK_MAX). */
int bf_dump_chunk(bf_chain *c, uint64_t offset, size_t max, uint8_t **buf, size_t *len,
                  long long *next);
/* Frames `plen` bytes of the data stream that start at `offset` as a data
 * chunk (AOF rewrite, which replays a chain's data, also one being
 * loaded): a new buffer (free()); *next as for bf_dump_chunk. KV_ENOMEM. */
int bf_dump_frame(bf_chain *c, uint64_t offset, const uint8_t *payload, size_t plen, uint8_t **buf,
                  size_t *len, long long *next);
/* The data stream in pieces, for the RDB value: piece i < bf_dump_npieces
 * is link i's encoding, and for a chain being loaded the last piece is the
 * part of the next link's encoding received so far. A new buffer (free());
 * KV_ENOMEM. */
uint32_t bf_dump_npieces(const bf_chain *c);
int bf_dump_piece(const bf_chain *c, uint32_t i, uint8_t **buf, size_t *len);

/* Starts a chain from a header chunk. The chain answers nothing until
 * bf_load_feed has given it every byte of its data stream (bf_load_done).
 * KV_ECORRUPT: not a valid header (*why says what); KV_EINVAL: too large;
 * KV_ENOMEM. */
int bf_load_begin(const uint8_t *hdr, size_t len, bf_chain **out, const char **why);
/* Appends bytes of the data stream that start at `offset`, which must be
 * where the last ones ended. KV_ECORRUPT with *why on bad data (a link's
 * encoding that does not decode or does not match the header); KV_ENOMEM.
 * After an error the chain is unusable: free it. */
int bf_load_feed(bf_chain *c, uint64_t offset, const uint8_t *data, size_t len, const char **why);
/* A data chunk as bf_dump_chunk framed it, with the iterator it came with:
 * its frame and checksum are checked, then its payload fed. */
int bf_load_chunk(bf_chain *c, long long iter, const uint8_t *chunk, size_t len,
                  const char **why);
/* 1 when the chain is complete (never loaded, or every byte fed). */
int bf_load_done(const bf_chain *c);

#endif /* KV_REDIS_CHAIN_H */
