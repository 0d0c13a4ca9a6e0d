"""test_persistence.py - filters survive every way Redis keeps or moves a
value: DEBUG RELOAD, a restart from RDB, a restart from AOF with and
without the RDB preamble (with and without a rewrite), DUMP/RESTORE to
another server, COPY; MEMORY USAGE counts them; a value of an unknown
encoding version, or damaged, is refused with an error and a log line.

Run: python3 test_persistence.py path/to/module.so (or KV_REDIS_MODULE=...).
Against RedisBloom's .so the DUMP payload tests (which know our type's
encoding) and the half-loaded filter are skipped.
"""

import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import unittest  # noqa: E402

import redis  # noqa: E402

ResponseError = redis.exceptions.ResponseError
ABSENT = [b"absent:%d" % i for i in range(3000)]
BIG = bytes(range(256)) * 800  # a 200 kB item


def items(prefix, n):
    return [b"%s:%d" % (prefix.encode(), i) for i in range(n)]


# Redis's CRC-64 (Jones polynomial, reflected), which ends a DUMP payload.
_POLY = 0x95AC9329AC4BC9B5
_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ _POLY if _c & 1 else _c >> 1
    _TABLE.append(_c)


def crc64(data):
    crc = 0
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


assert crc64(b"123456789") == 0xE9C6D914C4B8D9CA


def reseal(body):
    """A DUMP payload for body (type byte, value, RDB version): the CRC-64
    appended."""
    return body + struct.pack("<Q", crc64(body))


def populate(c, kv):
    """Filters of every shape; returns {key: items added}."""
    added = {}
    k = "plain"  # default filter grown to several sub-filters
    added[k] = items(k, 700)
    c.execute_command("BF.ADD", k, added[k][0])
    c.execute_command("BF.MADD", k, *added[k][1:])
    k = "ns"  # non-scaling, full
    c.execute_command("BF.RESERVE", k, "0.01", 300, "NONSCALING")
    added[k] = items(k, 300)
    c.execute_command("BF.MADD", k, *added[k])
    k = "ins"
    added[k] = items(k, 400)
    c.execute_command("BF.INSERT", k, "CAPACITY", 50, "ERROR", "0.001", "EXPANSION", 3,
                      "ITEMS", *added[k])
    k = "bin"
    added[k] = [b"", b"\x00", b"a\x00b", BIG]
    c.execute_command("BF.MADD", k, *added[k])
    k = "empty"
    c.execute_command("BF.RESERVE", k, "0.05", 1000, "EXPANSION", 4)
    added[k] = []
    return added


def snapshot(server, keys, added):
    """What clients see of each filter, and its digest."""
    c = server.client()
    out = {}
    for k in keys:
        probe = added.get(k, []) + ABSENT
        out[k] = (c.execute_command("BF.INFO", k), c.execute_command("BF.CARD", k),
                  c.execute_command("BF.MEXISTS", k, *probe),
                  c.execute_command("DEBUG", "DIGEST-VALUE", k))
        # Every item added is still found.
        n = len(added.get(k, []))
        assert out[k][2][:n] == [1] * n, "false negative in %s" % k
    return out


class Persistence(unittest.TestCase):
    def setUp(self):
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.stop()

    def server(self, **kw):
        s = harness.Server(**kw)
        s.start()
        self.servers.append(s)
        return s

    def is_kv(self, s):
        return any(n.startswith("kv") for n in harness.module_name(s))

    def test_debug_reload(self):
        s = self.server()
        added = populate(s.client(), self.is_kv(s))
        before = snapshot(s, added, added)
        self.assertEqual(s.cmd("DEBUG", "RELOAD"), b"OK")
        self.assertEqual(snapshot(s, added, added), before)

    def test_restart_from_rdb(self):
        s = self.server()
        added = populate(s.client(), self.is_kv(s))
        before = snapshot(s, added, added)
        s.cmd("SAVE")
        s.restart()
        self.assertEqual(s.client().dbsize(), len(added))
        self.assertEqual(snapshot(s, added, added), before)
        # The restored filters take more items as the originals did.
        self.assertEqual(s.cmd("BF.ADD", "plain", "after restart"), 1)

    def aof_case(self, preamble, rewrite):
        s = self.server(appendonly=True, aof_preamble=preamble)
        c = s.client()
        added = populate(c, self.is_kv(s))
        if rewrite:
            # The rewrite turns each filter into the module's own commands
            # (or, with the preamble, into RDB); writes after it go on as
            # commands.
            c.bgrewriteaof()
            harness.wait_for(lambda: s.info("persistence")["aof_rewrite_in_progress"] == 0 and
                             s.info("persistence")["aof_rewrite_scheduled"] == 0,
                             60, what="the AOF rewrite")
            more = items("after-rewrite", 200)
            c.execute_command("BF.MADD", "plain", *more)
            added["plain"] += more
        before = snapshot(s, added, added)
        s.restart()
        self.assertEqual(s.client().dbsize(), len(added))
        self.assertEqual(snapshot(s, added, added), before)

    def test_aof_commands_only(self):
        self.aof_case(preamble=False, rewrite=False)

    def test_aof_rewrite_without_preamble(self):
        self.aof_case(preamble=False, rewrite=True)

    def test_aof_rewrite_with_preamble(self):
        self.aof_case(preamble=True, rewrite=True)

    def test_dump_restore_to_another_server(self):
        a, b = self.server(), self.server()
        added = populate(a.client(), self.is_kv(a))
        before = snapshot(a, added, added)
        ca, cb = a.client(), b.client()
        for k in added:
            self.assertTrue(cb.restore(k, 0, ca.dump(k)))
        self.assertEqual(snapshot(b, added, added), before)
        with self.assertRaises(ResponseError):  # BUSYKEY
            cb.restore("plain", 0, ca.dump("plain"))

    def test_copy(self):
        s = self.server()
        if not self.is_kv(s):
            self.skipTest("RedisBloom 2.6 has no copy callback (COPY: not supported)")
        c = s.client()
        added = populate(c, self.is_kv(s))
        before = snapshot(s, added, added)
        for k in added:
            self.assertTrue(c.copy(k, k + ".copy"))
        copies = {k + ".copy": v for k, v in added.items()}
        got = snapshot(s, copies, copies)
        self.assertEqual(list(got.values()), list(before.values()))
        # The copy is its own value: adds to the original leave it alone.
        c.execute_command("BF.MADD", "plain", *items("later", 500))
        self.assertEqual(snapshot(s, ["plain.copy"], copies)["plain.copy"],
                         before["plain"])

    def test_memory_usage(self):
        s = self.server()
        c = s.client()
        c.execute_command("BF.RESERVE", "small", "0.01", 1000, "NONSCALING")
        c.execute_command("BF.RESERVE", "large", "0.01", 100000, "NONSCALING")
        small = c.memory_usage("small", samples=0)
        large = c.memory_usage("large", samples=0)
        # The bits of 100,000 items at 1%: about 9.6 bits each (RedisBloom
        # 9.59), within 1.1 times that.
        self.assertGreater(large, 100000 * 9.0 / 8)
        self.assertLess(large, 100000 * 9.59 * 1.1 / 8 + 4096)
        self.assertLess(small * 20, large)
        self.assertEqual(c.execute_command("BF.INFO", "large", "SIZE")[0] <= large, True)
        # A growing filter's memory grows with it.
        c.execute_command("BF.RESERVE", "grow", "0.01", 100)
        m0 = c.memory_usage("grow", samples=0)
        c.execute_command("BF.MADD", "grow", *items("g", 1000))
        self.assertGreater(c.memory_usage("grow", samples=0), m0 * 5)

    # -- kv_redis's own encoding --------------------------------------------------

    def test_unknown_encoding_version_is_refused(self):
        s = self.server()
        if not self.is_kv(s):
            self.skipTest("knows kv_redis's DUMP payload")
        c = s.client()
        c.execute_command("BF.MADD", "k", *items("k", 50))
        payload = c.dump("k")
        body = payload[:-8]
        # Type 7 (a module value), then the 64-bit module id as 0x81 and 8
        # bytes big-endian: the type name in 54 bits, the encoding version
        # in the low 10.
        self.assertEqual(body[0], 7)
        self.assertEqual(body[1], 0x81)
        mid = struct.unpack(">Q", body[2:10])[0]
        self.assertEqual(mid & 1023, 1)
        bumped = body[:2] + struct.pack(">Q", (mid & ~1023) | 2) + body[10:]
        with self.assertRaises(ResponseError) as cm:
            c.restore("k2", 0, reseal(bumped))
        self.assertIn("Bad data format", str(cm.exception))
        self.assertEqual(c.exists("k2"), 0)
        self.assertIn("encoding version 2", s.log_tail(200))
        # Damaged bits (the CRC made right again): our own checksum refuses.
        mid_byte = len(body) // 2
        damaged = body[:mid_byte] + bytes([body[mid_byte] ^ 0x10]) + body[mid_byte + 1:]
        with self.assertRaises(ResponseError):
            c.restore("k3", 0, reseal(damaged))
        self.assertEqual(c.exists("k3"), 0)
        self.assertTrue(c.ping())
        # The intact payload still restores.
        self.assertTrue(c.restore("k4", 0, payload))
        self.assertEqual(c.execute_command("BF.MEXISTS", "k4", *items("k", 50)), [1] * 50)

    def test_half_loaded_filter_survives_and_completes(self):
        s = self.server(appendonly=True, aof_preamble=False)
        if not self.is_kv(s):
            self.skipTest("RedisBloom has no half-loaded state")
        c = s.client()
        c.execute_command("BF.RESERVE", "src", "0.01", 200)
        c.execute_command("BF.MADD", "src", *items("d", 1000))
        chunks, it = [], 0
        while True:
            it, data = c.execute_command("BF.SCANDUMP", "src", it)
            if it == 0:
                break
            chunks.append((it, data))
        self.assertGreaterEqual(len(chunks), 3)
        for it, data in chunks[:2]:
            c.execute_command("BF.LOADCHUNK", "dst", it, data)
        # Through an AOF rewrite, a restart from it, and DEBUG RELOAD (RDB):
        # the load goes on where it stopped.
        c.bgrewriteaof()
        harness.wait_for(lambda: s.info("persistence")["aof_rewrite_in_progress"] == 0 and
                         s.info("persistence")["aof_rewrite_scheduled"] == 0, 60,
                         what="the AOF rewrite")
        s.restart()
        s.cmd("DEBUG", "RELOAD")
        c = s.client()
        for it, data in chunks[2:]:
            self.assertEqual(c.execute_command("BF.LOADCHUNK", "dst", it, data), b"OK")
        probe = items("d", 1000) + ABSENT
        self.assertEqual(c.execute_command("BF.MEXISTS", "dst", *probe),
                         c.execute_command("BF.MEXISTS", "src", *probe))
        self.assertEqual(c.execute_command("DEBUG", "DIGEST-VALUE", "dst"),
                         c.execute_command("DEBUG", "DIGEST-VALUE", "src"))


if __name__ == "__main__":
    harness.main()
