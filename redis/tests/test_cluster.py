"""test_cluster.py - the BF.* commands in a 3-master, 3-replica Redis Cluster
on loopback: routing by hash slot, automatic failover after a master is
killed with SIGKILL (every WAIT-acknowledged item still found), and a slot
migrated with CLUSTER SETSLOT IMPORTING/MIGRATING, MIGRATE and SETSLOT NODE
moving its filters intact.

Run: python3 test_cluster.py path/to/module.so (or KV_REDIS_MODULE=...).
Passes against RedisBloom's .so too.  A minute or so: each test builds its
own cluster (cluster-node-timeout 1000 ms, so a failover takes seconds).
"""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import unittest  # noqa: E402

redis = harness.redis
ABSENT = [b"absent:%d" % i for i in range(2000)]
WRITES = ("BF.RESERVE", "BF.ADD", "BF.MADD", "BF.INSERT", "BF.LOADCHUNK")
READS = ("BF.EXISTS", "BF.MEXISTS", "BF.INFO", "BF.CARD", "BF.SCANDUMP")


def items(prefix, n, start=0):
    return [b"%s:%d" % (prefix.encode(), i) for i in range(start, start + n)]


def conn(server, readonly=False):
    """One connection of its own (ASKING and READONLY hold per connection)."""
    c = redis.Redis(host="127.0.0.1", port=server.port, single_connection_client=True,
                    socket_timeout=30)
    if readonly:
        c.execute_command("READONLY")  # cluster replica reads
    return c


def redirect(c, *cmd):
    """The MOVED/ASK error text a command gets, or None when it is served."""
    try:
        c.execute_command(*cmd)
    except redis.ResponseError as e:
        s = str(e)
        if s.startswith("MOVED") or s.startswith("ASK"):
            return s
        raise
    return None


def snapshot(c, keys, added):
    """What a client can read about each filter."""
    return {k: (c.execute_command("BF.INFO", k), c.execute_command("BF.CARD", k),
                c.execute_command("BF.MEXISTS", k, *(added[k] + ABSENT)))
            for k in keys}


def fill_slot(c, tag):
    """Filters of several shapes under one hash tag; {key: items added}."""
    added = {}
    k = "{%s}:scaling" % tag            # default-created, grown to several sub-filters
    added[k] = items(k, 900)
    c.execute_command("BF.MADD", k, *added[k])
    k = "{%s}:nonscaling" % tag
    c.execute_command("BF.RESERVE", k, "0.001", 2000, "NONSCALING")
    added[k] = items(k, 1500)
    c.execute_command("BF.MADD", k, *added[k])
    k = "{%s}:large" % tag              # a 1M reservation: ~1-2 MB in one RESTORE
    c.execute_command("BF.RESERVE", k, "0.01", 1000000)
    added[k] = items(k, 5000)
    c.execute_command("BF.MADD", k, *added[k])
    k = "{%s}:insert" % tag
    added[k] = [b"", b"\x00\x01", b"x" * 70000] + items(k, 100)
    c.execute_command("BF.INSERT", k, "CAPACITY", 20, "ERROR", "0.001", "EXPANSION", 3,
                      "ITEMS", *added[k])
    return added


class ClusterCase(unittest.TestCase):

    def setUp(self):
        self.cl = harness.Cluster(node_timeout=1000).start()

    def tearDown(self):
        self.cl.stop()

    def test_keys_spread_by_slot_and_routed(self):
        cl = self.cl
        # Key positions and flags as the cluster and ACLs read them.
        # (redis-py parses COMMAND INFO into a dict per command name.)
        info = conn(cl.masters[0]).execute_command("COMMAND", "INFO", *(WRITES + READS))
        for name in WRITES + READS:
            entry = info.get(name.lower())
            self.assertIsNotNone(entry, name)
            flags = {harness._text(f) for f in entry["flags"]}
            self.assertEqual((entry["first_key_pos"], entry["last_key_pos"], entry["step_count"]),
                             (1, 1, 1), name)
            if name in WRITES:
                self.assertTrue({"write", "denyoom"} <= flags, (name, flags))
            else:
                self.assertTrue({"readonly", "fast"} <= flags, (name, flags))
        # A tag per master: each master holds exactly its tag's filters.
        tags = [harness.tag_for_slot_range(lo, hi) for lo, hi in cl.ranges]
        added = {}
        for m, tag in zip(cl.masters, tags):
            added[tag] = fill_slot(conn(m), tag)
        for i, (m, tag) in enumerate(zip(cl.masters, tags)):
            c = conn(m)
            self.assertEqual(c.dbsize(), len(added[tag]))
            for k in added[tag]:
                self.assertIs(cl.owner(k), m)
                self.assertTrue(all(c.execute_command("BF.MEXISTS", k, *added[tag][k])))
            # Another master redirects every BF command on these keys.
            other = conn(cl.masters[(i + 1) % 3])
            k = next(iter(added[tag]))
            for cmd in (("BF.ADD", k, "x"), ("BF.EXISTS", k, "x"), ("BF.CARD", k),
                        ("BF.INFO", k), ("BF.RESERVE", k, "0.1", 10),
                        ("BF.MEXISTS", k, "a", "b"), ("BF.INSERT", k, "ITEMS", "a")):
                r = redirect(other, *cmd)
                self.assertTrue(r and r.startswith("MOVED %d " % harness.key_slot(k)),
                                (cmd, r))
        # A cluster-aware client (redis-py's RedisCluster, which routes by
        # the key positions in COMMAND) reaches every filter with r.bf().
        rc = redis.cluster.RedisCluster(host="127.0.0.1", port=cl.masters[0].port)
        try:
            for tag in tags:
                for k, its in added[tag].items():
                    self.assertEqual(rc.bf().mexists(k, *its[:50]), [1] * min(50, len(its)))
                    self.assertEqual(rc.bf().add(k, b"new-item"), 1)
            for i in range(30):
                self.assertEqual(rc.bf().add("spread:%d" % i, "v"), 1)
            # The 30 untagged keys landed on the masters their slots name.
            for i in range(30):
                k = "spread:%d" % i
                self.assertEqual(conn(cl.owner(k)).exists(k), 1)
        finally:
            rc.close()

    def test_failover_keeps_acknowledged_items(self):
        cl = self.cl
        victim, heir = cl.masters[0], cl.replicas[0]
        tag = harness.tag_for_slot_range(*cl.ranges[0])
        keys = ["{%s}:f%d" % (tag, j) for j in range(3)]
        c = conn(victim)
        c.execute_command("BF.RESERVE", keys[0], "0.01", 100000, "NONSCALING")
        c.execute_command("BF.RESERVE", keys[1], "0.001", 100, "EXPANSION", 2)
        # keys[2] is created by its first BF.MADD (defaults).

        # A writer adds batches and keeps a batch once WAIT 1 says the replica
        # has it; the master is killed while it writes.
        acked = {k: [] for k in keys}
        acked_card = {k: 0 for k in keys}
        stop = threading.Event()
        errors = []

        def writer():
            w = conn(victim)
            n = 0
            try:
                while not stop.is_set():
                    k = keys[n % 3]
                    batch = items("w%d" % n, 50)
                    reply = w.execute_command("BF.MADD", k, *batch)
                    if w.execute_command("WAIT", 1, 2000) == 1:
                        acked[k] += batch
                        acked_card[k] += sum(reply)
                    n += 1
            except (redis.ConnectionError, redis.TimeoutError):
                pass  # the master died under us: expected
            except Exception as e:  # anything else fails the test
                errors.append(e)

        t = threading.Thread(target=writer)
        t.start()
        harness.wait_for(lambda: sum(map(len, acked.values())) >= 3000, 60,
                         what="3000 acknowledged items")
        victim.kill()
        stop.set()
        t.join(30)
        self.assertFalse(errors, errors)
        self.assertGreaterEqual(sum(map(len, acked.values())), 3000)
        print("\n  %d items acknowledged by WAIT 1 before the SIGKILL"
              % sum(map(len, acked.values())), flush=True)

        # Automatic failover: the replica is promoted, the cluster is whole.
        harness.wait_for(lambda: cl.role(heir) == "master", 60, what="the replica's promotion")
        cl.wait_ok(60)
        for s in cl.nodes:
            if s.alive():
                harness.wait_for(lambda: cl.owner(keys[0], via=s) is heir, 30,
                                 what="%r to route the slot to the new master" % s)
        h = conn(heir)
        for k in keys:
            self.assertEqual(h.execute_command("BF.MEXISTS", k, *acked[k]), [1] * len(acked[k]),
                             "an acknowledged item of %s was lost" % k)
            self.assertGreaterEqual(h.execute_command("BF.CARD", k), acked_card[k], k)
            self.assertLess(sum(h.execute_command("BF.MEXISTS", k, *ABSENT)), len(ABSENT) * 0.05)
        # The new master takes writes, and the other masters were untouched.
        self.assertEqual(h.execute_command("BF.ADD", keys[2], "after-failover"), 1)
        for m in cl.masters[1:]:
            self.assertEqual(cl.role(m), "master")

        # The old master comes back (empty: no persistence) as the new
        # master's replica and gets the filters by a full resync.
        victim.start()
        harness.wait_for(lambda: cl.role(victim) == "slave", 60, what="old master to rejoin as replica")
        self.assertEqual(h.execute_command("WAIT", 1, 30000), 1)
        harness.wait_for(lambda: harness.replica_in_sync(victim, heir), 60,
                         what="the old master to resync")
        v = conn(victim, readonly=True)
        for k in keys:
            self.assertEqual(v.execute_command("BF.MEXISTS", k, *acked[k]), [1] * len(acked[k]))
            self.assertEqual(v.execute_command("BF.INFO", k), h.execute_command("BF.INFO", k))
        self.assertEqual(v.execute_command("BF.EXISTS", keys[2], "after-failover"), 1)

    def test_slot_migration_moves_filters_intact(self):
        cl = self.cl
        src, dst = cl.masters[0], cl.masters[1]
        tag = harness.tag_for_slot_range(*cl.ranges[0])
        slot = harness.key_slot(tag)
        stay = harness.tag_for_slot_range(*cl.ranges[0], prefix="stay")
        self.assertNotEqual(harness.key_slot(stay), slot)
        a = conn(src)
        added = fill_slot(a, tag)
        staying = fill_slot(a, stay)          # same master, another slot
        keys = sorted(added)
        before = snapshot(a, keys, added)
        staying_before = snapshot(a, sorted(staying), staying)
        src_id, dst_id = cl.node_id(src), cl.node_id(dst)

        dst.cmd("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
        src.cmd("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
        in_slot = sorted(a.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100))
        self.assertEqual([harness._text(k) for k in in_slot], keys)

        # Move one key first: mid-migration the source redirects it with ASK,
        # still serves the others, and sends new keys of the slot away too.
        first = keys[0]
        self.assertEqual(a.execute_command("MIGRATE", "127.0.0.1", dst.port, "", 0, 10000,
                                           "KEYS", first), b"OK")
        r = redirect(a, "BF.EXISTS", first, "x")
        self.assertTrue(r and r.startswith("ASK %d " % slot), r)
        self.assertIsNone(redirect(a, "BF.CARD", keys[1]))
        r = redirect(a, "BF.ADD", "{%s}:brand-new" % tag, "x")
        self.assertTrue(r and r.startswith("ASK"), r)
        b = conn(dst)
        r = redirect(b, "BF.CARD", first)     # without ASKING: not yet its slot
        self.assertTrue(r and r.startswith("MOVED"), r)
        b.execute_command("ASKING")
        self.assertEqual(b.execute_command("BF.INFO", first), before[first][0])

        self.assertEqual(a.execute_command("MIGRATE", "127.0.0.1", dst.port, "", 0, 10000,
                                           "KEYS", *keys[1:]), b"OK")
        self.assertEqual(a.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot), 0)
        for s in (dst, src) + tuple(m for m in cl.masters if m not in (src, dst)):
            s.cmd("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
        for s in cl.nodes:
            harness.wait_for(lambda: cl.owner(slot, via=s) is dst, 30,
                             what="%r to route slot %d to its new master" % (s, slot))
        cl.wait_ok(60)

        # Intact on the new master and on its replica; gone from the old one.
        self.assertEqual(snapshot(b, keys, added), before)
        # (MIGRATE's RESTOREs came on the source's connection, so a WAIT on b
        # would cover nothing: wait for the replica's offset instead.)
        harness.wait_for(lambda: harness.replica_in_sync(cl.replica_of(dst), dst), 30,
                         what="the new master's replica to catch up")
        self.assertEqual(snapshot(conn(cl.replica_of(dst), readonly=True), keys, added), before)
        for k in keys:
            r = redirect(a, "BF.EXISTS", k, added[k][0])
            self.assertTrue(r and r.startswith("MOVED %d 127.0.0.1:%d" % (slot, dst.port)), r)
        self.assertEqual(snapshot(a, sorted(staying), staying), staying_before)
        # The moved filters keep working: new items, the same expansion.
        k = "{%s}:scaling" % tag
        card = b.execute_command("BF.CARD", k)
        more = items("more", 500)
        new = sum(b.execute_command("BF.MADD", k, *more))
        self.assertGreater(new, 450)  # a few may be false positives, not many
        self.assertEqual(b.execute_command("BF.CARD", k), card + new)
        self.assertEqual(b.execute_command("BF.MEXISTS", k, *more), [1] * len(more))


if __name__ == "__main__":
    harness.main()
