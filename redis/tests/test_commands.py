"""test_commands.py - every BF.* command's replies and errors, as RedisBloom
2.6 gives them, and no key created or changed by a rejected command.

Run: python3 test_commands.py path/to/module.so (or KV_REDIS_MODULE=...).
The same file runs against RedisBloom's .so: that is how its expectations
were checked. The few rules RedisBloom does not have (LOADCHUNK refusing
garbage, out-of-order or foreign chunks and leaving no half-made key) are
tested only on our module (skipped, with the reason, on another).
"""

import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import unittest  # noqa: E402

import redis  # noqa: E402

ResponseError = redis.exceptions.ResponseError


def items(prefix, n):
    return [b"%s:%d" % (prefix.encode(), i) for i in range(n)]


class Base(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = harness.Server()
        cls.server.start()
        cls.kv = any(n.startswith("kv") for n in harness.module_name(cls.server))

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def setUp(self):
        self.r = self.server.client()
        self.r.flushall()

    def call(self, *args):
        return self.r.execute_command(*args)

    def assertError(self, text, *args):
        """The command fails with exactly this message (redis-py drops a
        leading "ERR " and keeps any other error code)."""
        with self.assertRaises(ResponseError) as cm:
            self.call(*args)
        self.assertEqual(str(cm.exception), text, "reply to %r" % (args,))

    def assertWrongArity(self, *args):
        with self.assertRaises(ResponseError) as cm:
            self.call(*args)
        self.assertIn("wrong number of arguments", str(cm.exception))

    def assertWrongType(self, *args):
        with self.assertRaises(ResponseError) as cm:
            self.call(*args)
        self.assertTrue(str(cm.exception).startswith("WRONGTYPE"), str(cm.exception))

    def state(self, key):
        """Everything a client can see of a key: type, and for a filter its
        BF.INFO and the digest of its value."""
        t = self.r.type(key)
        if t == b"none":
            return None
        info = self.call("BF.INFO", key) if t != b"string" else self.r.get(key)
        return (t, info, self.call("DEBUG", "DIGEST-VALUE", key))

    def info(self, key):
        reply = self.call("BF.INFO", key)
        return dict(zip([x.decode() for x in reply[0::2]], reply[1::2]))


class Reserve(Base):
    def test_reserve_makes_an_empty_filter(self):
        self.assertEqual(self.call("BF.RESERVE", "k", "0.01", 1000), b"OK")
        info = self.info("k")
        self.assertEqual(info["Capacity"], 1000)
        self.assertEqual(info["Number of filters"], 1)
        self.assertEqual(info["Number of items inserted"], 0)
        self.assertEqual(info["Expansion rate"], 2)
        self.assertEqual(self.call("BF.CARD", "k"), 0)
        self.assertEqual(self.call("BF.EXISTS", "k", "a"), 0)

    def test_reserve_options(self):
        self.assertEqual(self.call("BF.RESERVE", "a", "0.001", 50, "EXPANSION", 4), b"OK")
        self.assertEqual(self.info("a")["Expansion rate"], 4)
        self.assertEqual(self.call("BF.RESERVE", "b", "0.1", 50, "nonscaling"), b"OK")
        self.assertIsNone(self.info("b")["Expansion rate"])
        self.assertEqual(self.call("BF.RESERVE", "c", "0.1", 50, "expansion", "1"), b"OK")
        self.assertEqual(self.info("c")["Expansion rate"], 1)

    def test_reserve_errors_create_nothing(self):
        cases = [
            ("bad error rate", "x", "abc", 100),
            ("(0 < error rate range < 1) ", "x", "0", 100),
            ("(0 < error rate range < 1) ", "x", "1", 100),
            ("(0 < error rate range < 1) ", "x", "-0.5", 100),
            ("(0 < error rate range < 1) ", "x", "1.5", 100),
            ("bad capacity", "x", "0.01", "many"),
            ("bad capacity", "x", "0.01", "1.5"),
            ("(capacity should be larger than 0)", "x", "0.01", 0),
            ("(capacity should be larger than 0)", "x", "0.01", -3),
            ("no expansion", "x", "0.01", 100, "EXPANSION"),
            ("Nonscaling filters cannot expand", "x", "0.01", 100, "NONSCALING", "EXPANSION", 2),
            ("Nonscaling filters cannot expand", "x", "0.01", 100, "EXPANSION", 2, "NONSCALING"),
            ("bad expansion", "x", "0.01", 100, "EXPANSION", "two"),
            ("expansion should be greater or equal to 1", "x", "0.01", 100, "EXPANSION", 0),
            ("expansion should be greater or equal to 1", "x", "0.01", 100, "EXPANSION", -1),
        ]
        for msg, *args in cases:
            self.assertError(msg, "BF.RESERVE", *args)
            self.assertEqual(self.r.exists("x"), 0, "after %r" % (args,))
        self.assertWrongArity("BF.RESERVE", "x", "0.01")
        self.assertWrongArity("BF.RESERVE", "x", "0.01", 100, "a", "b", "c", "d")
        self.assertEqual(self.r.dbsize(), 0)

    def test_reserve_on_an_existing_key_changes_nothing(self):
        self.call("BF.RESERVE", "k", "0.01", 100)
        self.call("BF.MADD", "k", *items("a", 10))
        before = self.state("k")
        self.assertError("item exists", "BF.RESERVE", "k", "0.001", 5000)
        self.assertEqual(self.state("k"), before)
        self.r.set("s", "v")
        self.assertWrongType("BF.RESERVE", "s", "0.01", 100)
        self.assertEqual(self.r.get("s"), b"v")

    def test_reservation_too_large_is_refused(self):
        # 2^50 items at 1%: about 1.4 PB, more than any machine has.
        self.assertError("could not create filter", "BF.RESERVE", "huge", "0.01", 1 << 50)
        self.assertEqual(self.r.exists("huge"), 0)
        if self.kv:
            # RedisBloom's size arithmetic wraps here and it makes a small
            # filter; ours refuses.
            self.assertError("could not create filter", "BF.RESERVE", "huge", "0.000001",
                             (1 << 62))
            self.assertEqual(self.r.exists("huge"), 0)
        self.assertEqual(self.r.ping(), True)


class AddExists(Base):
    def test_add_then_exists(self):
        self.assertEqual(self.call("BF.ADD", "k", "a"), 1)
        self.assertEqual(self.call("BF.ADD", "k", "a"), 0)
        self.assertEqual(self.call("BF.EXISTS", "k", "a"), 1)
        self.assertEqual(self.call("BF.EXISTS", "k", "b"), 0)
        self.assertEqual(self.call("BF.MADD", "k", "a", "b", "c", "b"), [0, 1, 1, 0])
        self.assertEqual(self.call("BF.MEXISTS", "k", "a", "b", "c", "nope"), [1, 1, 1, 0])
        self.assertEqual(self.call("BF.CARD", "k"), 3)

    def test_default_filter(self):
        # Created by BF.ADD without a reservation: 100 items at 1%, x2.
        self.call("BF.ADD", "k", "x")
        info = self.info("k")
        self.assertEqual(info["Capacity"], 100)
        self.assertEqual(info["Number of filters"], 1)
        self.assertEqual(info["Number of items inserted"], 1)
        self.assertEqual(info["Expansion rate"], 2)
        self.call("BF.MADD", "m", "x")
        self.assertEqual(self.info("m")["Capacity"], 100)

    def test_missing_key_holds_nothing(self):
        self.assertEqual(self.call("BF.EXISTS", "none", "a"), 0)
        self.assertEqual(self.call("BF.MEXISTS", "none", "a", "b"), [0, 0])
        self.assertEqual(self.call("BF.CARD", "none"), 0)
        self.assertEqual(self.r.exists("none"), 0)

    def test_other_type(self):
        self.r.set("s", "v")
        self.r.rpush("l", "v")
        for k in ("s", "l"):
            # Reads answer "absent", as RedisBloom does; writes are WRONGTYPE.
            self.assertEqual(self.call("BF.EXISTS", k, "a"), 0)
            self.assertEqual(self.call("BF.MEXISTS", k, "a", "b"), [0, 0])
            self.assertWrongType("BF.ADD", k, "a")
            self.assertWrongType("BF.MADD", k, "a", "b")
            self.assertWrongType("BF.INSERT", k, "ITEMS", "a")
            self.assertWrongType("BF.INFO", k)
            self.assertWrongType("BF.CARD", k)
            self.assertWrongType("BF.SCANDUMP", k, 0)
            self.assertWrongType("BF.LOADCHUNK", k, 1, "x")
        self.assertEqual(self.r.get("s"), b"v")
        self.assertEqual(self.r.lrange("l", 0, -1), [b"v"])

    def test_arity(self):
        self.assertWrongArity("BF.ADD", "k")
        self.assertWrongArity("BF.ADD", "k", "a", "b")
        self.assertWrongArity("BF.MADD", "k")
        self.assertWrongArity("BF.EXISTS", "k")
        self.assertWrongArity("BF.EXISTS", "k", "a", "b")
        self.assertWrongArity("BF.MEXISTS", "k")
        self.assertWrongArity("BF.CARD")
        self.assertWrongArity("BF.CARD", "k", "x")
        self.assertWrongArity("BF.INFO")
        self.assertWrongArity("BF.INFO", "k", "a", "b")
        self.assertWrongArity("BF.SCANDUMP", "k")
        self.assertWrongArity("BF.LOADCHUNK", "k", 1)
        self.assertEqual(self.r.dbsize(), 0)

    def test_binary_safe_items(self):
        big = bytes(range(256)) * 800  # 200 kB
        odd = [b"", b"\x00", b"\x00\x00", b"a\x00b", b"\xff" * 3, big]
        self.assertEqual(self.call("BF.MADD", "k", *odd), [1] * len(odd))
        self.assertEqual(self.call("BF.MEXISTS", "k", *odd), [1] * len(odd))
        self.assertEqual(self.call("BF.EXISTS", "k", big), 1)
        self.assertEqual(self.call("BF.EXISTS", "k", b""), 1)
        # Near misses of the NUL and 200 kB items are other items.
        others = [b"a\x00c", b"\x00\x00\x00", big[:-1], big + b"\x00", b"b\x00a"]
        self.assertLessEqual(sum(self.call("BF.MEXISTS", "k", *others)), 1)
        self.assertEqual(self.call("BF.ADD", "e", b""), 1)
        self.assertEqual(self.call("BF.ADD", "e", b""), 0)
        self.assertEqual(self.call("BF.EXISTS", "e", b"\x00"), 0)

    def test_many_items_in_one_command(self):
        # More than one batch of the module's command path (256 items).
        its = items("many", 1000)
        self.call("BF.RESERVE", "k", "0.001", 5000)
        reply = self.call("BF.MADD", "k", *its)
        self.assertEqual(len(reply), 1000)
        self.assertGreaterEqual(sum(reply), 995)
        self.assertEqual(self.call("BF.MEXISTS", "k", *its), [1] * 1000)
        self.assertEqual(self.call("BF.MADD", "k", *its), [0] * 1000)
        self.assertEqual(self.call("BF.CARD", "k"), sum(reply))


class NonScaling(Base):
    def test_takes_exactly_capacity_then_full(self):
        self.call("BF.RESERVE", "k", "0.01", 100, "NONSCALING")
        reply = self.call("BF.MADD", "k", *items("a", 150))
        self.assertIsInstance(reply[-1], ResponseError)
        self.assertEqual(str(reply[-1]), "non scaling filter is full")
        head = reply[:-1]
        self.assertTrue(all(r in (0, 1) for r in head))
        self.assertEqual(sum(head), 100, "exactly capacity new items")
        self.assertEqual(head[-1], 1, "the item before the error was the 100th new one")
        self.assertEqual(self.call("BF.CARD", "k"), 100)
        info = self.info("k")
        self.assertEqual(info["Number of filters"], 1)
        self.assertIsNone(info["Expansion rate"])
        before = self.state("k")
        # A new item: an error, nothing changes. A present one still answers 0.
        self.assertError("non scaling filter is full", "BF.ADD", "k", "new item")
        self.assertEqual(self.call("BF.ADD", "k", items("a", 1)[0]), 0)
        reply = self.call("BF.INSERT", "k", "ITEMS", "zz-new", "a:1")
        self.assertEqual(len(reply), 1)
        self.assertIsInstance(reply[0], ResponseError)
        self.assertEqual(self.state("k"), before)

    def test_insert_nonscaling(self):
        reply = self.call("BF.INSERT", "k", "CAPACITY", 3, "NONSCALING", "ITEMS",
                          "a", "b", "c", "d", "e")
        self.assertEqual(reply[:3], [1, 1, 1])
        self.assertEqual(len(reply), 4)
        self.assertEqual(str(reply[3]), "non scaling filter is full")
        self.assertEqual(self.call("BF.CARD", "k"), 3)


class Scaling(Base):
    def test_growth_as_redisbloom(self):
        self.call("BF.RESERVE", "k", "0.01", 100)
        added = sum(self.call("BF.MADD", "k", *items("g", 700)))
        info = self.info("k")
        # 100 + 200 + 400 = 700 new items fill three sub-filters exactly; a
        # false positive or two leaves the third one not quite full.
        self.assertEqual(info["Number of filters"], 3)
        self.assertEqual(info["Capacity"], 700)
        self.assertEqual(info["Number of items inserted"], added)
        self.call("BF.MADD", "k", *items("h", 10))
        self.assertEqual(self.info("k")["Number of filters"], 4)
        self.assertEqual(self.info("k")["Capacity"], 1500)
        self.assertEqual(self.call("BF.MEXISTS", "k", *items("g", 700)), [1] * 700)

    def test_expansion_three_and_one(self):
        self.call("BF.RESERVE", "e3", "0.01", 10, "EXPANSION", 3)
        self.call("BF.MADD", "e3", *items("x", 45))
        self.assertEqual(self.info("e3")["Capacity"], 10 + 30 + 90)
        self.call("BF.RESERVE", "e1", "0.01", 10, "EXPANSION", 1)
        self.call("BF.MADD", "e1", *items("x", 35))
        self.assertEqual(self.info("e1")["Capacity"], 40)
        self.assertEqual(self.info("e1")["Number of filters"], 4)


    def test_long_chains_keep_growing(self):
        # Capacity 1, expansion 1: each new sub-filter holds one item at half
        # the error rate of the last, 1e-90 by the 300th. The blocked
        # layout's floor (about 1e-20) is passed on the way: the chain goes
        # on, in memory that grows with the bits per item, never a huge
        # allocation.
        self.call("BF.RESERVE", "k", "0.01", 1, "EXPANSION", 1)
        reply = self.call("BF.MADD", "k", *items("t", 300))
        # A false positive answers 0 and adds nothing.
        self.assertTrue(set(reply) <= {0, 1})
        self.assertEqual(self.info("k")["Number of filters"], sum(reply))
        self.assertEqual(self.call("BF.MEXISTS", "k", *items("t", 300)), [1] * 300)
        if self.kv:
            # Ours keeps the chain under 1% false positives; RedisBloom's
            # one-item sub-filters (a few bits each) find 40% of new items
            # "present" here.
            self.assertGreaterEqual(sum(reply), 290)
            self.assertLessEqual(sum(self.call("BF.MEXISTS", "k", *items("u", 1000))), 25)
        self.assertLess(self.r.memory_usage("k", samples=0), 1 << 20)


class Insert(Base):
    def test_insert_options(self):
        reply = self.call("BF.INSERT", "k", "capacity", 50, "error", "0.001", "expansion", 3,
                          "items", "a", "b", "a")
        self.assertEqual(reply, [1, 1, 0])
        info = self.info("k")
        self.assertEqual(info["Capacity"], 50)
        self.assertEqual(info["Expansion rate"], 3)
        # Options of an existing filter are ignored.
        self.assertEqual(self.call("BF.INSERT", "k", "CAPACITY", 9999, "ITEMS", "c"), [1])
        self.assertEqual(self.info("k")["Capacity"], 50)
        self.assertEqual(self.call("BF.INSERT", "d", "ITEMS", "x"), [1])
        self.assertEqual(self.info("d")["Capacity"], 100)

    def test_nocreate(self):
        self.assertError("not found", "BF.INSERT", "k", "NOCREATE", "ITEMS", "a")
        self.assertEqual(self.r.exists("k"), 0)
        self.call("BF.ADD", "k", "a")
        self.assertEqual(self.call("BF.INSERT", "k", "NOCREATE", "ITEMS", "a", "b"), [0, 1])

    def test_insert_errors_create_nothing(self):
        cases = [
            ("Bad error rate", "ERROR", "x", "ITEMS", "a"),
            ("Bad capacity", "CAPACITY", "x", "ITEMS", "a"),
            ("Bad expansion", "EXPANSION", "x", "ITEMS", "a"),
            ("Unknown argument received", "BOGUS", "ITEMS", "a"),
            ("Bad argument received", "ERROR", "0", "ITEMS", "a"),
            ("Bad argument received", "ERROR", "1", "ITEMS", "a"),
            ("Bad argument received", "CAPACITY", "0", "ITEMS", "a"),
            ("Bad argument received", "EXPANSION", "0", "ITEMS", "a"),
        ]
        for msg, *args in cases:
            self.assertError(msg, "BF.INSERT", "k", *args)
            self.assertEqual(self.r.exists("k"), 0, "after %r" % (args,))
        self.assertWrongArity("BF.INSERT", "k", "ITEMS")
        self.assertWrongArity("BF.INSERT", "k", "CAPACITY", 10)
        self.assertWrongArity("BF.INSERT", "k", "CAPACITY")
        self.assertWrongArity("BF.INSERT", "k", "NOCREATE", "NONSCALING")
        self.assertEqual(self.r.dbsize(), 0)


class Info(Base):
    def test_info_fields(self):
        self.call("BF.RESERVE", "k", "0.01", 500)
        self.call("BF.MADD", "k", "a", "b", "c")
        reply = self.call("BF.INFO", "k")
        self.assertEqual(reply[0::2], [b"Capacity", b"Size", b"Number of filters",
                                       b"Number of items inserted", b"Expansion rate"])
        self.assertEqual(reply[1], 500)
        self.assertEqual(reply[5], 1)
        self.assertEqual(reply[7], 3)
        self.assertEqual(reply[9], 2)
        # Size is the value's memory, which MEMORY USAGE counts with the key.
        self.assertLessEqual(reply[3], self.r.memory_usage("k", samples=0))
        self.assertGreater(reply[3], 500)  # bits for 500 items at 1% / 2
        self.assertEqual(self.call("BF.INFO", "k", "CAPACITY"), [500])
        self.assertEqual(self.call("BF.INFO", "k", "size"), [reply[3]])
        self.assertEqual(self.call("BF.INFO", "k", "Filters"), [1])
        self.assertEqual(self.call("BF.INFO", "k", "ITEMS"), [3])
        self.assertEqual(self.call("BF.INFO", "k", "EXPANSION"), [2])
        self.call("BF.RESERVE", "n", "0.01", 500, "NONSCALING")
        self.assertEqual(self.call("BF.INFO", "n", "EXPANSION"), [None])
        self.assertIsNone(self.call("BF.INFO", "n")[9])

    def test_info_errors(self):
        self.assertError("not found", "BF.INFO", "none")
        self.call("BF.ADD", "k", "a")
        self.assertError("Invalid information value", "BF.INFO", "k", "colour")
        self.assertEqual(self.r.exists("none"), 0)

    def test_card(self):
        self.assertEqual(self.call("BF.CARD", "k"), 0)
        self.call("BF.MADD", "k", *items("c", 250))
        self.assertEqual(self.call("BF.CARD", "k"), self.info("k")["Number of items inserted"])
        self.assertGreaterEqual(self.call("BF.CARD", "k"), 248)


class Resp3(Base):
    """RESP3 replies through a raw socket (Debian's redis-py speaks RESP2):
    booleans for adds and queries, a map for BF.INFO, as RedisBloom."""

    def raw(self, *cmds):
        s = socket.create_connection(("127.0.0.1", self.server.port), timeout=10)
        try:
            out = b""
            for c in cmds:
                out += b"*%d\r\n" % len(c) + b"".join(
                    b"$%d\r\n%s\r\n" % (len(a), a) for a in [x.encode() for x in c])
            s.sendall(out)
            data = b""
            # Read until the last command's reply is complete: a PING at the
            # end answers +PONG, which nothing else here sends.
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            while not data.endswith(b"+PONG\r\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            return data
        finally:
            s.close()

    def test_resp3_shapes(self):
        data = self.raw(["HELLO", "3"], ["BF.ADD", "k", "a"], ["BF.EXISTS", "k", "a"],
                        ["BF.EXISTS", "k", "b"], ["BF.MADD", "k", "a", "c"],
                        ["BF.INFO", "k", "ITEMS"], ["BF.INFO", "k"])
        tail = data
        self.assertIn(b"#t\r\n#t\r\n#f\r\n*2\r\n#f\r\n#t\r\n", tail)
        self.assertIn(b"%1\r\n+Number of items inserted\r\n:2\r\n", tail)
        self.assertIn(b"%5\r\n+Capacity\r\n:100\r\n+Size\r\n:", tail)


class DumpLoad(Base):
    def fill(self, key):
        self.call("BF.RESERVE", key, "0.01", 200)
        # Three sub-filters: the dump has a header and three data chunks.
        self.call("BF.MADD", key, *items("d", 1000))

    def scandump(self, key):
        chunks, it = [], 0
        while True:
            it, data = self.call("BF.SCANDUMP", key, it)
            if it == 0:
                return chunks
            chunks.append((it, data))

    def test_scandump_loadchunk_roundtrip(self):
        self.fill("src")
        chunks = self.scandump("src")
        self.assertGreaterEqual(len(chunks), 2)
        self.assertEqual(chunks[0][0], 1, "the header comes with iterator 1")
        other = harness.Server()
        other.start()
        try:
            for target in (self.r, other.client()):
                for it, data in chunks:
                    self.assertEqual(target.execute_command("BF.LOADCHUNK", "dst", it, data),
                                     b"OK")
                probe = items("d", 1000) + items("absent", 2000)
                self.assertEqual(target.execute_command("BF.MEXISTS", "dst", *probe),
                                 self.call("BF.MEXISTS", "src", *probe))
                self.assertEqual(target.execute_command("BF.INFO", "dst"),
                                 self.call("BF.INFO", "src"))
                # The loaded filter keeps working: adds as the source's.
                more = items("more", 300)
                self.assertEqual(target.execute_command("BF.MADD", "dst", *more),
                                 self.call("BF.MADD", "src", *more))
                self.call("DEL", "src")
                self.fill("src")
        finally:
            other.stop()

    def test_scandump_errors(self):
        self.assertError("not found", "BF.SCANDUMP", "none", 0)
        self.call("BF.ADD", "k", "a")
        self.assertError("Second argument must be numeric", "BF.SCANDUMP", "k", "x")
        self.assertError("Second argument must be numeric", "BF.LOADCHUNK", "k", "x", "d")
        # A chunk for a missing key that is not a header.
        self.assertError("not found", "BF.LOADCHUNK", "none", 2, "data")
        self.assertEqual(self.r.exists("none"), 0)

    def assertRejected(self, key, it, data):
        with self.assertRaises(ResponseError):
            self.call("BF.LOADCHUNK", key, it, data)
        self.assertEqual(self.r.exists(key), 0, "a rejected chunk leaves no key")

    def test_loadchunk_rejects_garbage_and_leaves_no_key(self):
        if not self.kv:
            self.skipTest("RedisBloom does not check chunks (a kv_redis rule)")
        self.fill("src")
        chunks = self.scandump("src")
        hdr = chunks[0][1]
        # A garbage header, a truncated one, one byte flipped.
        self.assertRejected("dst", 1, b"garbage")
        self.assertRejected("dst", 1, hdr[:-1])
        self.assertRejected("dst", 1, hdr[:20] + bytes([hdr[20] ^ 1]) + hdr[21:])
        # A good header, then: a flipped byte, a chunk out of order, a
        # chunk with the wrong iterator, a chunk of another filter's dump.
        self.call("BF.RESERVE", "other", "0.01", 200)
        self.call("BF.MADD", "other", *items("o", 1000))
        foreign = self.scandump("other")
        it1, c1 = chunks[1]
        bad = [
            (it1, c1[:30] + bytes([c1[30] ^ 0x40]) + c1[31:]),
            chunks[2],
            (it1 + 1, c1),
            foreign[1],
            (it1, b"garbage"),
        ]
        for it, data in bad:
            self.assertEqual(self.call("BF.LOADCHUNK", "dst", 1, hdr), b"OK")
            self.assertRejected("dst", it, data)
        # A complete filter takes no more chunks, and stays as it was.
        for it, data in chunks:
            self.call("BF.LOADCHUNK", "dst", it, data)
        before = self.state("dst")
        with self.assertRaises(ResponseError):
            self.call("BF.LOADCHUNK", "dst", it1, c1)
        with self.assertRaises(ResponseError):
            self.call("BF.LOADCHUNK", "dst", 1, hdr)
        self.assertEqual(self.state("dst"), before)

    def test_a_filter_being_loaded_answers_nothing(self):
        if not self.kv:
            self.skipTest("RedisBloom answers from a half-loaded filter (a kv_redis rule)")
        self.fill("src")
        chunks = self.scandump("src")
        self.call("BF.LOADCHUNK", "dst", *chunks[0])
        for cmd in (("BF.EXISTS", "dst", "a"), ("BF.ADD", "dst", "a"), ("BF.CARD", "dst"),
                    ("BF.INFO", "dst"), ("BF.SCANDUMP", "dst", 0)):
            self.assertError("filter is being loaded (BF.LOADCHUNK)", *cmd)
        for it, data in chunks[1:]:
            self.call("BF.LOADCHUNK", "dst", it, data)
        self.assertEqual(self.call("BF.MEXISTS", "dst", *items("d", 1000)), [1] * 1000)


class Flags(Base):
    def test_command_flags_and_keys(self):
        want = {
            "bf.reserve": {b"write", b"denyoom"}, "bf.add": {b"write", b"denyoom"},
            "bf.madd": {b"write", b"denyoom"}, "bf.insert": {b"write", b"denyoom"},
            "bf.loadchunk": {b"write", b"denyoom"},
            "bf.exists": {b"readonly", b"fast"}, "bf.mexists": {b"readonly", b"fast"},
            "bf.info": {b"readonly", b"fast"}, "bf.card": {b"readonly", b"fast"},
            "bf.scandump": {b"readonly", b"fast"},
        }
        reply = self.call("COMMAND", "INFO", *want)
        for name, flags in want.items():
            entry = reply[name]
            got = {f.encode() if isinstance(f, str) else f for f in entry["flags"]}
            self.assertTrue(flags <= got, "%s flags %r" % (name, got))
            self.assertEqual((entry["first_key_pos"], entry["last_key_pos"],
                              entry["step_count"]), (1, 1, 1), "%s key positions" % name)


class ModuleArgs(unittest.TestCase):
    def test_load_arguments_set_defaults(self):
        s = harness.Server(module_args=["INITIAL_SIZE", "400", "ERROR_RATE", "0.001"])
        s.start()
        try:
            s.cmd("BF.ADD", "k", "a")
            info = s.cmd("BF.INFO", "k")
            self.assertEqual(info[1], 400)
            s.cmd("BF.ADD", "d", "a")
            s2 = harness.Server()
            s2.start()
            try:
                s2.cmd("BF.ADD", "d", "a")
                # 0.1% needs more bits per item than 1%.
                self.assertGreater(s.cmd("BF.INFO", "d", "SIZE")[0],
                                   s2.cmd("BF.INFO", "d", "SIZE")[0] * 3)
            finally:
                s2.stop()
        finally:
            s.stop()

    def test_bad_load_arguments_refuse_to_load(self):
        for args in (["INITIAL_SIZE", "0"], ["INITIAL_SIZE", "x"], ["ERROR_RATE", "1"],
                     ["ERROR_RATE", "0"], ["ERROR_RATE", "abc"], ["INITIAL_SIZE"]):
            s = harness.Server(module_args=args)
            with self.assertRaises(harness.ServerError, msg="args %r" % args):
                s.start(timeout=10)
            s.stop()


if __name__ == "__main__":
    harness.main()
