#!/usr/bin/env python3
"""bench.py - kv's Python binding beside plyvel (LevelDB) on the same keys.

Standard library only (plus the two bindings being measured). Both stores
get the same 16-byte keys and 100-byte values, each with its own defaults
(kv: a 10 bits/key filter per table; plyvel: none unless --plyvel-bloom):

  fill          put() of every key, one call each, in random order
  random gets   get() of present keys in random order
  missing gets  get() of absent keys that sort between present ones, so
                every lookup lands inside the tables' key ranges
  scan          a full forward iteration (for k, v in db)
  per-call      get() of one key in the memtable of a one-key database:
                the cost of crossing the binding, in ns per call
  threads       random gets from 4 Python threads against 1 thread (kv, and
                plyvel for reference): how far releasing the GIL scales

Reads are repeated --rounds times, the two stores alternating, and the best
round is kept (the machine is shared: the best round is the least
disturbed). Before the reads each database is compacted (compact_range())
so that both are read in a settled shape. The printed ratios are kv over
plyvel in ops/s (per-call: kv's ns over plyvel's, lower is better), next to
the targets of issue 51.

    python3 python/bench.py                 # 1M keys (about 2 minutes)
    python3 python/bench.py --num 100000    # quicker

The kv package is imported from the installed one, else from build/python
(cmake -DKV_PYTHON=ON), else from --kv-path.
"""

import argparse
import os
import random
import shutil
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def import_bindings(kv_path):
    if kv_path:
        sys.path.insert(0, kv_path)
    try:
        import kv
    except ImportError:
        sys.path.insert(0, os.path.join(HERE, "..", "build", "python"))
        import kv
    try:
        import plyvel
    except ImportError:
        sys.exit("bench.py: plyvel is missing (Debian: apt-get install python3-plyvel)")
    return kv, plyvel


def make_keys(num, seed):
    """Present keys end in '0', missing ones in '1': a missing key sorts
    between two present ones, inside every table's range."""
    present = [b"%015d0" % i for i in range(num)]
    missing = [b"%015d1" % i for i in range(num)]
    rnd = random.Random(seed)
    fill_order = present[:]
    rnd.shuffle(fill_order)
    get_order = present[:]
    rnd.shuffle(get_order)
    rnd.shuffle(missing)
    pool = [rnd.randbytes(100) for _ in range(1024)]
    return fill_order, get_order, missing, pool


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def fill(db, keys, pool):
    put = db.put
    mask = len(pool) - 1
    for i, k in enumerate(keys):
        put(k, pool[i & mask])


def gets(db, keys, expect_found):
    get = db.get
    found = 0
    for k in keys:
        if get(k) is not None:
            found += 1
    want = len(keys) if expect_found else 0
    if found != want:
        raise SystemExit("bench.py: %d of %d keys found, expected %d" % (found, len(keys), want))


def scan(db, num):
    n = 0
    for _k, _v in db:
        n += 1
    if n != num:
        raise SystemExit("bench.py: scan saw %d keys, expected %d" % (n, num))


def per_call_ns(db, calls):
    key = b"k" * 16
    db.put(key, b"v" * 100)
    get = db.get
    best = None
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(calls):
            get(key)
        ns = (time.perf_counter() - t) * 1e9 / calls
        best = ns if best is None else min(best, ns)
    return best


def threaded_gets(db, keys, nthreads):
    """gets/s of nthreads threads, each getting its own slice of keys."""
    parts = [keys[i::nthreads] for i in range(nthreads)]
    barrier = threading.Barrier(nthreads + 1)

    def work(part):
        barrier.wait()
        get = db.get
        for k in part:
            get(k)

    threads = [threading.Thread(target=work, args=(p,)) for p in parts]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return len(keys) / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--num", type=int, default=1000000, help="keys (default 1000000)")
    ap.add_argument("--reads", type=int, default=0,
                    help="gets per read round (default: min(num, 200000))")
    ap.add_argument("--rounds", type=int, default=3, help="read rounds, best kept (default 3)")
    ap.add_argument("--calls", type=int, default=500000, help="per-call gets (default 500000)")
    ap.add_argument("--plyvel-bloom", type=int, default=0,
                    help="plyvel's bloom_filter_bits (default 0, its default: no filter)")
    ap.add_argument("--dir", default=None, help="where the databases go (default: a temp dir)")
    ap.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    ap.add_argument("--kv-path", default=None, help="directory holding the kv package")
    ap.add_argument("--skip-threads", action="store_true", help="no thread-scaling measure")
    args = ap.parse_args()
    kv, plyvel = import_bindings(args.kv_path)
    reads = args.reads or min(args.num, 200000)

    base = tempfile.mkdtemp(prefix="kvbench-py-", dir=args.dir)
    try:
        run(kv, plyvel, args, reads, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run(kv, plyvel, args, reads, base):
    print("bench.py: %d keys of 16 bytes, 100-byte values; %d gets per round, best of %d"
          % (args.num, reads, args.rounds))
    print("kv %s from %s; plyvel %s (LevelDB %s, bloom_filter_bits=%d)"
          % (getattr(kv, "__version__", "?"), os.path.dirname(kv.__file__), plyvel.__version__,
             plyvel.__leveldb_version__, args.plyvel_bloom))
    fill_order, get_order, missing, pool = make_keys(args.num, args.seed)
    dbs = {
        "kv": kv.DB(os.path.join(base, "kv"), create_if_missing=True),
        "plyvel": plyvel.DB(os.path.join(base, "plyvel"), create_if_missing=True,
                            bloom_filter_bits=args.plyvel_bloom),
    }
    rows = []  # (name, kv figure, plyvel figure, unit, ratio, target)
    try:
        fill_s = {}
        for name in ("plyvel", "kv"):
            fill_s[name] = timed(lambda: fill(dbs[name], fill_order, pool))
        for db in dbs.values():
            db.compact_range()

        def best_rate(fn, n):
            best = {"kv": 0.0, "plyvel": 0.0}
            for _ in range(args.rounds):
                for name in ("plyvel", "kv"):
                    best[name] = max(best[name], n / timed(lambda: fn(dbs[name])))
            return best

        rate = {"fill": {n: args.num / s for n, s in fill_s.items()}}
        rate["random gets"] = best_rate(lambda db: gets(db, get_order[:reads], True), reads)
        rate["missing gets"] = best_rate(lambda db: gets(db, missing[:reads], False), reads)
        rate["scan"] = best_rate(lambda db: scan(db, args.num), args.num)
        targets = {"fill": 1.2, "random gets": 1.5, "missing gets": 3.0, "scan": None}
        for name, r in rate.items():
            rows.append((name, r["kv"], r["plyvel"], "ops/s", r["kv"] / r["plyvel"],
                         targets[name]))

        thr = {}
        if not args.skip_threads:
            tkeys = get_order[: reads * 2]
            for name in ("plyvel", "kv"):
                one = max(threaded_gets(dbs[name], tkeys, 1) for _ in range(args.rounds))
                four = max(threaded_gets(dbs[name], tkeys, 4) for _ in range(args.rounds))
                thr[name] = (one, four)
    finally:
        for db in dbs.values():
            db.close()

    pc = {}
    for name, opener in (("plyvel", plyvel.DB), ("kv", kv.DB)):
        db = opener(os.path.join(base, name + "-one"), create_if_missing=True)
        try:
            pc[name] = per_call_ns(db, args.calls)
        finally:
            db.close()

    print()
    print("%-14s %14s %14s %10s %8s" % ("", "kv", "plyvel", "kv/plyvel", "target"))
    for name, k, p, unit, ratio, target in rows:
        print("%-14s %10.0f %-3s %10.0f %-3s %9.2fx %8s"
              % (name, k, "/s", p, "/s", ratio, ">= %.1fx" % target if target else "-"))
    print("%-14s %10.0f %-3s %10.0f %-3s %9.2fx %8s"
          % ("per-call get", pc["kv"], "ns", pc["plyvel"], "ns", pc["kv"] / pc["plyvel"],
             "<= 1.3x"))
    if thr:
        print()
        print("random gets from Python threads (gets/s; %d cores)" % os.cpu_count())
        print("%-8s %12s %12s %8s" % ("", "1 thread", "4 threads", "scaling"))
        for name in ("kv", "plyvel"):
            one, four = thr[name]
            print("%-8s %12.0f %12.0f %7.2fx%s" % (name, one, four, four / one,
                                                    "  (target >= 1.6x)" if name == "kv" else ""))


if __name__ == "__main__":
    main()
