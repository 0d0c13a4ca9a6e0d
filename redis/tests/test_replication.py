"""test_replication.py - BF.* writes reach replicas, and a full resync
carries the filters.

Run: python3 test_replication.py path/to/module.so (or KV_REDIS_MODULE=...).
Runs against RedisBloom's .so as well: the replies compared here are the
master's own, so the test only asks that a replica answer exactly as its
master does, whatever the module.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import unittest  # noqa: E402

ABSENT = [b"absent:%d" % i for i in range(3000)]  # never added anywhere
BIG = bytes(range(256)) * 800                      # a 200 kB item


def items(prefix, n):
    return [b"%s:%d" % (prefix.encode(), i) for i in range(n)]


def wait_acked(c, timeout_ms=10000):
    """WAIT, on the connection c that wrote, for the one replica; fails the
    test unless it acknowledged every write c made."""
    n = c.execute_command("WAIT", 1, timeout_ms)
    if n != 1:
        raise AssertionError("WAIT 1 %d answered %r" % (timeout_ms, n))


def client(server):
    """A client on one connection of its own: WAIT covers only the writes
    made on its own connection."""
    return harness.redis.Redis(host="127.0.0.1", port=server.port,
                               single_connection_client=True, socket_timeout=30)


def fill(master, tag=""):
    """Writes of every kind on master; returns {key: items added} and
    {key: BF.CARD expected}, the count of 1 replies (an item that is a false
    positive when added is not counted, as in RedisBloom).  Writes on
    master.writer, the connection the test WAITs on."""
    c = master.writer
    added, card = {}, {}
    # Scaling filter created by BF.ADD with the defaults (100, 0.01, x2),
    # grown well past its first sub-filter.
    k = "plain" + tag
    added[k] = items(k, 700)
    card[k] = sum(c.execute_command("BF.ADD", k, it) for it in added[k][:50])
    card[k] += sum(c.execute_command("BF.MADD", k, *added[k][50:]))
    # Reserved, non-scaling, overfilled: the MADD ends in an error element.
    k = "ns" + tag
    c.execute_command("BF.RESERVE", k, "0.01", 300, "NONSCALING")
    reply = c.execute_command("BF.MADD", k, *items(k, 350))
    assert isinstance(reply[-1], Exception), "a full non-scaling MADD ends in an error"
    full = next(i for i, r in enumerate(reply) if isinstance(r, Exception))
    assert all(not isinstance(r, Exception) for r in reply[:full])
    added[k] = items(k, full)
    card[k] = sum(reply[:full])
    assert card[k] == 300, "a non-scaling filter takes exactly its capacity"
    # BF.INSERT with every option, expansion 3, tighter error rate.
    k = "ins" + tag
    added[k] = items(k, 400)
    card[k] = sum(c.execute_command("BF.INSERT", k, "CAPACITY", 50, "ERROR", "0.001",
                                    "EXPANSION", 3, "ITEMS", *added[k]))
    # Binary-safe items: NUL bytes, the empty item, a 200 kB item.
    k = "bin" + tag
    added[k] = [b"", b"\x00", b"a\x00b", b"\xff" * 33, BIG]
    c.execute_command("BF.RESERVE", k, "0.001", 1000, "EXPANSION", 4)
    card[k] = sum(c.execute_command("BF.MADD", k, *added[k]))
    # A copy made with SCANDUMP/LOADCHUNK: LOADCHUNK is a write and must
    # replicate as one.
    src, k = "plain" + tag, "chunked" + tag
    it = 0
    while True:
        it, data = c.execute_command("BF.SCANDUMP", src, it)
        if it == 0:
            break
        c.execute_command("BF.LOADCHUNK", k, it, data)
    added[k] = list(added[src])
    card[k] = card[src]
    return added, card


def state(server, keys, added):
    """Everything a client can read about the filters: per key BF.INFO,
    BF.CARD, BF.MEXISTS over its items plus never-added ones, BF.EXISTS on a
    few; and the key space (types, count)."""
    c = server.client()
    out = {"dbsize": c.dbsize()}
    for k in keys:
        probe = list(added.get(k, [])) + ABSENT
        out[k] = {
            "type": c.type(k),
            "info": c.execute_command("BF.INFO", k),
            "card": c.execute_command("BF.CARD", k),
            "mexists": c.execute_command("BF.MEXISTS", k, *probe),
            "exists": [c.execute_command("BF.EXISTS", k, p) for p in probe[:5] + ABSENT[:5]],
        }
    return out


class Replication(unittest.TestCase):

    def setUp(self):
        self.master = harness.Server(name="master").start()
        self.master.writer = client(self.master)
        self.replica = harness.make_replica(self.master)

    def tearDown(self):
        self.master.writer.close()
        self.replica.stop()
        self.master.stop()

    def assertSameState(self, added, card, servers):
        keys = sorted(added)
        want = state(servers[0], keys, added)
        for k in keys:
            # The master itself: no false negatives, the card it was given.
            self.assertTrue(all(want[k]["mexists"][:len(added[k])]), k)
            self.assertEqual(want[k]["card"], card[k], k)
        for s in servers[1:]:
            got = state(s, keys, added)
            for k in keys:
                self.assertEqual(got[k], want[k], "%s differs on %r" % (k, s))
            self.assertEqual(got["dbsize"], want["dbsize"])

    def test_writes_propagate(self):
        added, card = fill(self.master)
        wait_acked(self.master.writer)
        self.assertSameState(added, card, [self.master, self.replica])

    def test_later_writes_to_existing_filters_propagate(self):
        added, card = fill(self.master)
        wait_acked(self.master.writer)
        c = self.master.writer
        more = items("more", 500)
        card["plain"] += sum(c.execute_command("BF.MADD", "plain", *more))
        added["plain"] += more
        card["ins"] += sum(c.execute_command("BF.INSERT", "ins", "NOCREATE", "ITEMS",
                                             *items("ins2", 10)))
        added["ins"] += items("ins2", 10)
        wait_acked(self.master.writer)
        self.assertSameState(added, card, [self.master, self.replica])

    def test_rejected_commands_change_nothing_on_the_replica(self):
        added, card = fill(self.master)
        c = self.master.writer
        c.set("str", "v")
        bad = [
            ("BF.RESERVE", "plain", "0.01", 10),            # item exists
            ("BF.RESERVE", "r1", "1.5", 10),                # error rate
            ("BF.RESERVE", "r2", "0.01", 0),                # capacity
            ("BF.RESERVE", "r3", "0.01", 10, "EXPANSION", 2, "NONSCALING"),
            ("BF.INSERT", "r4", "NOCREATE", "ITEMS", "a"),  # not found
            ("BF.ADD", "str", "a"),                         # WRONGTYPE
            ("BF.MADD", "str", "a", "b"),
            ("BF.ADD", "r5"),                               # arity
        ]
        for cmd in bad:
            with self.assertRaises(harness.redis.ResponseError, msg=repr(cmd)):
                c.execute_command(*cmd)
        wait_acked(self.master.writer)
        self.assertSameState(added, card, [self.master, self.replica])
        for k in ("r1", "r2", "r3", "r4", "r5"):
            self.assertEqual(self.replica.cmd("EXISTS", k), 0, k)
        self.assertEqual(self.replica.cmd("GET", "str"), b"v")

    def test_replica_refuses_writes_and_answers_reads(self):
        added, card = fill(self.master)
        wait_acked(self.master.writer)
        r = self.replica.client()
        # The module's write commands are flagged `write`: a read-only
        # replica refuses them; reads are `readonly` and allowed.
        for cmd in (("BF.ADD", "plain", "x"), ("BF.MADD", "new", "x"),
                    ("BF.RESERVE", "new", "0.01", 10),
                    ("BF.INSERT", "new", "ITEMS", "x")):
            with self.assertRaises(harness.redis.ResponseError, msg=repr(cmd)) as cm:
                r.execute_command(*cmd)
            # redis-py turns the READONLY error into ReadOnlyError.
            self.assertIsInstance(cm.exception, harness.redis.ReadOnlyError)
        self.assertEqual(r.execute_command("BF.EXISTS", "plain", added["plain"][0]), 1)
        self.assertEqual(r.exists("new"), 0)

    def test_full_resync_carries_the_filters(self):
        # Data written before a second replica exists: it gets the filters
        # only through the full sync's RDB transfer (disk-based and diskless).
        added, card = fill(self.master)
        big = items("big", 20000)
        c = self.master.writer
        c.execute_command("BF.RESERVE", "large", "0.001", 1000000, "NONSCALING")
        card["large"] = 0
        for i in range(0, len(big), 1000):
            card["large"] += sum(c.execute_command("BF.MADD", "large", *big[i:i + 1000]))
        added["large"] = big
        for diskless in ("no", "yes"):
            self.master.cmd("CONFIG", "SET", "repl-diskless-sync", diskless)
            late = harness.make_replica(self.master, name="late-" + diskless)
            self.assertEqual(late.info("replication")["master_link_status"], "up")
            self.assertSameState(added, card, [self.master, late])
            late.stop()

    def test_resync_after_replica_restart(self):
        added, card = fill(self.master)
        wait_acked(self.master.writer)
        # The replica loses its data (no persistence) and restarts while the
        # master keeps writing; REPLICAOF again brings everything back.
        self.replica.stop()
        c = self.master.writer
        more = items("while-down", 300)
        card["plain"] += sum(c.execute_command("BF.MADD", "plain", *more))
        added["plain"] += more
        self.replica.start()
        self.assertEqual(self.replica.client().dbsize(), 0)
        harness.attach_replica(self.replica, self.master)
        wait_acked(self.master.writer)
        self.assertSameState(added, card, [self.master, self.replica])

    def test_chained_replica(self):
        # master -> replica -> sub-replica: the stream is passed on verbatim.
        sub = harness.make_replica(self.replica, name="sub-replica")
        added, card = fill(self.master)
        wait_acked(self.master.writer)
        harness.wait_for(lambda: harness.replica_in_sync(sub, self.replica), 30,
                         what="the sub-replica to catch up")
        self.assertSameState(added, card, [self.master, self.replica, sub])
        sub.stop()


if __name__ == "__main__":
    harness.main()
