/* merge_ops.c - the merge operators kv ships (kv.h): kv_merge_uint64_add.
 *
 * uint64 add: a value and every operand are exactly 8 bytes, an unsigned
 * integer little-endian; the result is their sum modulo 2^64, 8 bytes the
 * same way. A key without a value counts 0. Any other length fails the
 * merge (KV_ECORRUPT, which the store passes on), so that a stray value is
 * reported rather than read as a number. Addition is associative, so a
 * partial merge of adjacent operands is their sum, and a full merge over it
 * gives what the operands one by one would. */
#include <kv/kv.h>

#include <stdint.h>
#include <stdlib.h>

#include "util/coding.h"

/* Adds the n 8-byte operands to *sum; KV_ECORRUPT at the first of another
 * length. */
static int add_operands(const void *const *operands, const size_t *operand_lens, size_t n,
                        uint64_t *sum)
{
    uint64_t s = *sum;
    for (size_t i = 0; i < n; i++) {
        if (operand_lens[i] != 8)
            return KV_ECORRUPT;
        s += kv_get64(operands[i]); /* unsigned: wraps modulo 2^64 */
    }
    *sum = s;
    return KV_OK;
}

/* The sum as a malloc'd 8-byte value. */
static int emit(uint64_t sum, void **result, size_t *result_len)
{
    uint8_t *out = malloc(8);
    if (!out)
        return KV_ENOMEM;
    kv_put64(out, sum);
    *result = out;
    *result_len = 8;
    return KV_OK;
}

static int uint64_add_full(void *state, const void *key, size_t klen, const void *existing,
                           size_t existing_len, const void *const *operands,
                           const size_t *operand_lens, size_t n, void **result, size_t *result_len)
{
    (void)state;
    (void)key;
    (void)klen;
    uint64_t sum = 0;
    if (existing) {
        if (existing_len != 8)
            return KV_ECORRUPT;
        sum = kv_get64(existing);
    }
    int rc = add_operands(operands, operand_lens, n, &sum);
    return rc == KV_OK ? emit(sum, result, result_len) : rc;
}

static int uint64_add_partial(void *state, const void *key, size_t klen,
                              const void *const *operands, const size_t *operand_lens, size_t n,
                              void **result, size_t *result_len)
{
    (void)state;
    (void)key;
    (void)klen;
    uint64_t sum = 0;
    int rc = add_operands(operands, operand_lens, n, &sum);
    return rc == KV_OK ? emit(sum, result, result_len) : rc;
}

/* Stateless and read-only: one instance serves every database and thread. */
static const kv_merge_operator uint64_add = {
    .name = "kv.uint64add",
    .state = NULL,
    .full_merge = uint64_add_full,
    .partial_merge = uint64_add_partial,
};

const kv_merge_operator *kv_merge_uint64_add(void)
{
    return &uint64_add;
}
