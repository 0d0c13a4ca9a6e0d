/* tally.c - the stripes of tally.h: which thread owns which. */
#define _POSIX_C_SOURCE 200809L
#include "tally.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

KV_TALLY_TLS int kv_tally_my_slot = -1;

static _Atomic unsigned char taken[KV_TALLY_STRIPES];
static pthread_key_t exit_key; /* its destructor frees a thread's stripe */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int have_key;

/* At thread exit: the stripe goes back (its counts stay in it). The
 * release store hands the thread's last counts to the next owner. */
static void give_back(void *p)
{
    unsigned s = (unsigned)((uintptr_t)p - 1);
    kv_tally_my_slot = KV_TALLY_STRIPES; /* any later count is shared */
    if (s < KV_TALLY_STRIPES)
        atomic_store_explicit(&taken[s], 0, memory_order_release);
}

static void make_key(void)
{
    have_key = pthread_key_create(&exit_key, give_back) == 0;
}

unsigned kv_tally_claim(void)
{
    unsigned slot = KV_TALLY_STRIPES;
    pthread_once(&once, make_key);
    /* Without a key a stripe could not be given back: share instead. */
    for (unsigned i = 0; have_key && i < KV_TALLY_STRIPES; i++) {
        unsigned char free_slot = 0;
        if (atomic_compare_exchange_strong_explicit(&taken[i], &free_slot, 1,
                                                    memory_order_acquire, memory_order_relaxed)) {
            if (pthread_setspecific(exit_key, (void *)(uintptr_t)(i + 1)) == 0)
                slot = i;
            else
                atomic_store_explicit(&taken[i], 0, memory_order_release);
            break;
        }
    }
    kv_tally_my_slot = (int)slot;
    return slot;
}

void *kv_tally_new(size_t size)
{
    size_t n = (KV_TALLY_STRIPES + 1) * size;
    void *p = aligned_alloc(64, n);
    if (p)
        memset(p, 0, n);
    return p;
}
