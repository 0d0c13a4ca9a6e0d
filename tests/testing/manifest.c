/* manifest.c - kv_manifest_inject and kv_manifest_commits (testing.h) on
 * the manifest's commit hook (kv/manifest.h). */
#include "testing.h"

#include <stdatomic.h>

#include "../../kv/manifest.h"

static _Atomic uint64_t commit_calls, fault_commit;
static _Atomic int fault_err, persist_err;

/* The hook: counts the attempt; the armed error if this is its attempt. */
static int commit_fault(void)
{
    uint64_t n = atomic_fetch_add(&commit_calls, 1) + 1;
    int persist = atomic_load(&persist_err);
    if (persist)
        return persist;
    int err = atomic_load(&fault_err);
    if (err && n == atomic_load(&fault_commit) &&
        atomic_compare_exchange_strong(&fault_err, &err, 0))
        return err;
    return 0;
}

void kv_manifest_inject(uint64_t nth, int mdb_err)
{
    kv_manifest_set_commit_hook(commit_fault);
    atomic_store(&fault_err, 0);
    if (nth == 0 || mdb_err == 0)
        return;
    atomic_store(&fault_commit, atomic_load(&commit_calls) + nth);
    atomic_store(&fault_err, mdb_err);
}

void kv_manifest_fault_persist(int mdb_err)
{
    kv_manifest_set_commit_hook(commit_fault);
    atomic_store(&persist_err, mdb_err);
}

uint64_t kv_manifest_commits(void)
{
    return atomic_load(&commit_calls);
}

/* Before main, so that every commit is counted. */
__attribute__((constructor)) static void install_at_start(void)
{
    kv_manifest_set_commit_hook(commit_fault);
}
