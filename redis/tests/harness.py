"""harness.py - redis-server processes for the Redis module's tests.

Starts redis-server (/usr/bin/redis-server, or $REDIS_SERVER) on free
loopback ports, each in its own temporary directory with its own redis.conf,
loads the module under test into it, waits until it answers, and stops it by
pid: SIGTERM, then SIGKILL when it has not exited after a timeout.  Every
server and directory it makes is registered and cleaned up at exit, also
when a test fails or raises; the servers are also started with a parent-death
signal, so a test runner killed by ctest's timeout takes its servers with it.

The module path comes from $KV_REDIS_MODULE or the first command-line
argument (main() takes it off argv before unittest sees the rest).  The same
tests run against RedisBloom by giving its .so instead: that is how we check
that they encode RedisBloom's behaviour.

Helpers: Server (start, stop, kill, restart on the same directory for the RDB
and AOF paths, client), make_replica (REPLICAOF and wait for the sync),
Cluster (three masters and three replicas, slots assigned by hand, wait for
cluster_state:ok), key_slot (CRC16 hash slot with hash tags).

Exit status 77 (ctest's SKIP_RETURN_CODE) when redis-server or python3-redis
is missing.  Python 3 standard library plus python3-redis only.
"""

import atexit
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

SKIP = 77

try:
    import redis  # python3-redis
except ImportError:  # pragma: no cover - reported as a skip by main()
    redis = None

REDIS_SERVER = os.environ.get("REDIS_SERVER", "/usr/bin/redis-server")
REDIS_CLI = os.environ.get("REDIS_CLI", "/usr/bin/redis-cli")

# Set by main() (or by a caller that sets it before starting servers).
MODULE = os.environ.get("KV_REDIS_MODULE")
MODULE_ARGS = []

_servers = []   # every Server started and not yet stopped
_dirs = []      # temporary directories to remove at exit


def _cleanup():
    for s in list(_servers):
        try:
            s.stop()
        except Exception:  # keep going: the other servers must stop too
            pass
    if os.environ.get("KV_TEST_KEEP"):
        for d in _dirs:
            sys.stderr.write("harness: kept %s\n" % d)
        return
    for d in _dirs:
        shutil.rmtree(d, ignore_errors=True)


atexit.register(_cleanup)


def _on_signal(signum, frame):
    # SIGTERM/SIGINT/SIGHUP end the test through sys.exit so atexit runs.
    sys.exit(128 + signum)


for _sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(_sig, _on_signal)


def make_tmpdir(prefix="kv-redis-"):
    """A fresh directory under /tmp, removed at exit (kept with KV_TEST_KEEP)."""
    d = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    _dirs.append(d)
    return d


def free_port():
    """A loopback TCP port nobody listens on right now.  Another process may
    take it before the server binds it: Server.start retries with a new one."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_PR_SET_PDEATHSIG = 1
try:
    _libc = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover
    _libc = None


def _child_setup():
    # Runs in the forked child before exec: die with SIGKILL when the test
    # process dies, however it dies (ctest timeout, crash).  Own process group
    # so a ^C in the terminal reaches the test, which then stops its servers.
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    os.setpgid(0, 0)


def _conf_value(v):
    v = str(v)
    if v == "" or any(c in v for c in " \t\"'\\"):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return v


class ServerError(Exception):
    pass


class Server:
    """One redis-server process.

    module: path of the .so to load (default: MODULE; None or "" loads none).
    module_args: load arguments (e.g. ["ERROR_RATE", "0.001"]).
    dir: working directory (RDB, AOF, log); a new temporary one by default.
    config: extra redis.conf directives, a dict or a list of (name, value).
    appendonly / aof_preamble: the AOF settings (aof-use-rdb-preamble).
    cluster: cluster-enabled yes, with its own bus port.

    Persistence is off unless asked for (save "" and appendonly no), so a
    test controls exactly when an RDB or AOF is written.
    """

    def __init__(self, module=None, module_args=None, dir=None, config=None,
                 appendonly=False, aof_preamble=True, cluster=False,
                 port=None, name="redis"):
        self.module = MODULE if module is None else module
        self.module_args = list(MODULE_ARGS if module_args is None else module_args)
        self.dir = dir or make_tmpdir()
        self.config = list(config.items() if isinstance(config, dict) else (config or []))
        self.appendonly = appendonly
        self.aof_preamble = aof_preamble
        self.cluster = cluster
        self.port = port
        self.bus_port = None
        self.name = name
        self.proc = None
        self._fixed_port = port is not None
        self._clients = []

    # -- lifetime ----------------------------------------------------------

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    @property
    def log_path(self):
        return os.path.join(self.dir, "redis.log")

    def _write_conf(self):
        lines = [
            ("port", self.port), ("bind", "127.0.0.1"), ("daemonize", "no"),
            ("dir", self.dir), ("logfile", self.log_path), ("loglevel", "notice"),
            ("dbfilename", "dump.rdb"), ("save", ""),
            ("appendonly", "yes" if self.appendonly else "no"),
            ("appendfilename", "appendonly.aof"),
            ("aof-use-rdb-preamble", "yes" if self.aof_preamble else "no"),
            ("appendfsync", "no"), ("protected-mode", "no"),
            ("enable-debug-command", "yes"), ("enable-module-command", "yes"),
            ("pidfile", os.path.join(self.dir, "redis.pid")),
            # A replica's full sync starts at once instead of waiting 5 s
            # for more replicas to share a diskless transfer.
            ("repl-diskless-sync-delay", 0),
        ]
        if self.cluster:
            lines += [("cluster-enabled", "yes"), ("cluster-port", self.bus_port),
                      ("cluster-config-file", os.path.join(self.dir, "nodes.conf"))]
        lines += self.config
        text = "".join("%s %s\n" % (k, _conf_value(v)) for k, v in lines)
        if self.module:
            text += "loadmodule %s\n" % " ".join(
                _conf_value(a) for a in [os.path.abspath(self.module)] + self.module_args)
        path = os.path.join(self.dir, "redis.conf")
        with open(path, "w") as f:
            f.write(text)
        return path

    def start(self, timeout=30.0):
        """Start the server and wait until it answers PING (not LOADING).
        Raises ServerError with the log's tail when it exits or never answers."""
        if self.proc is not None:
            raise ServerError("%s already running (pid %d)" % (self.name, self.proc.pid))
        attempts = 1 if self._fixed_port else 5
        last = None
        for _ in range(attempts):
            if not self._fixed_port or self.port is None:
                self.port = free_port()
            if self.cluster and (self.bus_port is None or not self._fixed_port):
                self.bus_port = free_port()
            conf = self._write_conf()
            out = open(os.path.join(self.dir, "stdout.log"), "ab")
            self.proc = subprocess.Popen([REDIS_SERVER, conf], cwd=self.dir,
                                         stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL,
                                         preexec_fn=_child_setup)
            out.close()
            _servers.append(self)
            try:
                self._wait_ready(timeout)
                return self
            except ServerError as e:
                last = e
                self._reap(kill=True)
                if "Address already in use" not in self.log_tail(20):
                    break  # not a port race: do not retry
        raise last

    def _wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            rc = self.proc.poll()
            if rc is not None:
                raise ServerError("%s exited with status %d during start\n%s"
                                  % (self.name, rc, self.log_tail()))
            try:
                c = redis.Redis(host="127.0.0.1", port=self.port,
                                socket_timeout=2, socket_connect_timeout=1)
                try:
                    if c.ping():
                        return
                finally:
                    c.close()
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                pass
            except redis.ResponseError as e:  # e.g. LOADING
                if "LOADING" not in str(e):
                    raise
            if time.monotonic() > deadline:
                raise ServerError("%s did not answer on port %d within %.0fs\n%s"
                                  % (self.name, self.port, timeout, self.log_tail()))
            time.sleep(0.02)

    def _reap(self, kill=False, timeout=10.0):
        for c in self._clients:
            try:
                c.close()
            except Exception:
                pass
        self._clients = []
        p = self.proc
        if p is None:
            return None
        if p.poll() is None:
            p.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.proc = None
        if self in _servers:
            _servers.remove(self)
        return p.returncode

    def stop(self, timeout=10.0):
        """SIGTERM (Redis's own shutdown: an RDB save when save points are set,
        an AOF flush), then SIGKILL after timeout.  Returns the exit status."""
        return self._reap(kill=False, timeout=timeout)

    def kill(self):
        """SIGKILL: a crash, nothing saved beyond what is already on disk."""
        return self._reap(kill=True)

    def restart(self, timeout=30.0, **changes):
        """Stop (SIGTERM) and start again on the same directory and port, so
        it loads the RDB or AOF left there.  Keyword arguments change settings
        first (e.g. appendonly=True, aof_preamble=False, module=...)."""
        self.stop()
        for k, v in changes.items():
            if not hasattr(self, k):
                raise TypeError("Server has no setting %r" % k)
            setattr(self, k, v)
        self._fixed_port = True
        return self.start(timeout)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self):
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    # -- use ---------------------------------------------------------------

    def client(self, decode=False, **kw):
        """A redis-py client on this server (closed when the server stops)."""
        c = redis.Redis(host="127.0.0.1", port=self.port, decode_responses=decode,
                        socket_timeout=kw.pop("socket_timeout", 30), **kw)
        self._clients.append(c)
        return c

    def cmd(self, *args):
        """One command on a short-lived connection; raw (bytes) reply."""
        c = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=30)
        try:
            return c.execute_command(*args)
        finally:
            c.close()

    def info(self, section=None):
        c = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=30)
        try:
            return c.info(section) if section else c.info()
        finally:
            c.close()

    def log_tail(self, n=40):
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            lines = []
        try:
            with open(os.path.join(self.dir, "stdout.log"), "rb") as f:
                lines += f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            pass
        return "\n".join(lines[-n:])

    def __repr__(self):
        return "<Server %s port=%s pid=%s dir=%s>" % (self.name, self.port, self.pid, self.dir)


def wait_for(pred, timeout=30.0, interval=0.05, what="condition"):
    """Poll pred() until it returns a true value (returned); AssertionError on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            v = pred()
        except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
            v = None
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.0fs waiting for %s" % (timeout, what))
        time.sleep(interval)


def replica_in_sync(replica, master=None):
    """True when replica's link to its master is up, no sync is in progress
    and (with master given) it has applied everything the master sent."""
    r = replica.info("replication")
    if r.get("role") != "slave" or r.get("master_link_status") != "up":
        return False
    if int(r.get("master_sync_in_progress", 1)) != 0:
        return False
    if master is not None:
        m = master.info("replication")
        return int(r.get("slave_repl_offset", -1)) >= int(m.get("master_repl_offset", 0))
    return True


def attach_replica(replica, master, timeout=60.0):
    """REPLICAOF master on a running server and wait until the sync is done."""
    replica.cmd("REPLICAOF", "127.0.0.1", master.port)
    wait_for(lambda: replica_in_sync(replica, master), timeout,
             what="%r to sync from %r" % (replica, master))
    return replica


def make_replica(master, timeout=60.0, **kw):
    """A new server (same module and load arguments unless given) made a
    replica of master, returned once the first sync has finished."""
    kw.setdefault("module", master.module)
    kw.setdefault("module_args", master.module_args)
    kw.setdefault("name", master.name + "-replica")
    r = Server(**kw).start()
    return attach_replica(r, master, timeout)


# -- cluster --------------------------------------------------------------

def _crc16(data):
    # CRC16-CCITT (XModem): polynomial 0x1021, initial 0, as Redis Cluster uses.
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def key_slot(key):
    """The cluster hash slot of key: CRC16 of the whole key or, when it has a
    non-empty {tag}, of the tag only; modulo 16384."""
    if isinstance(key, str):
        key = key.encode()
    s = key.find(b"{")
    if s >= 0:
        e = key.find(b"}", s + 1)
        if e > s + 1:
            key = key[s + 1:e]
    return _crc16(key) % 16384


def tag_for_slot_range(lo, hi, prefix="t"):
    """A hash tag string whose slot lies in [lo, hi] (found by trying prefix0,
    prefix1, ...), so a test can put keys on a chosen master."""
    i = 0
    while True:
        tag = "%s%d" % (prefix, i)
        if lo <= key_slot(tag) <= hi:
            return tag
        i += 1


class Cluster:
    """Three masters and three replicas on loopback, one replica per master.

    Slots are split evenly (master i owns ranges[i]); nodes meet through
    CLUSTER MEET, replicas attach with CLUSTER REPLICATE, and start() returns
    once every node reports cluster_state:ok and every replica is in sync.
    node_timeout (ms) is small so that a killed master fails over in a couple
    of seconds; cluster-replica-validity-factor 0 lets any replica take over.
    """

    def __init__(self, masters=3, node_timeout=1000, module=None, module_args=None,
                 config=None):
        self.n = masters
        self.node_timeout = node_timeout
        cfg = [("cluster-node-timeout", node_timeout),
               ("cluster-replica-validity-factor", 0),
               ("cluster-require-full-coverage", "yes"),
               ("cluster-allow-replica-migration", "no")]
        cfg += list(config.items() if isinstance(config, dict) else (config or []))
        self.masters = [Server(module=module, module_args=module_args, cluster=True,
                               config=cfg, name="master%d" % i) for i in range(masters)]
        self.replicas = [Server(module=module, module_args=module_args, cluster=True,
                                config=cfg, name="replica%d" % i) for i in range(masters)]
        step = 16384 // masters
        self.ranges = [(i * step, 16383 if i == masters - 1 else (i + 1) * step - 1)
                       for i in range(masters)]

    @property
    def nodes(self):
        return self.masters + self.replicas

    def start(self, timeout=90.0):
        for s in self.nodes:
            s.start()
        for m, (lo, hi) in zip(self.masters, self.ranges):
            m.cmd("CLUSTER", "ADDSLOTSRANGE", lo, hi)
        first = self.masters[0]
        for s in self.nodes[1:]:
            first.cmd("CLUSTER", "MEET", "127.0.0.1", s.port, s.bus_port)
        wait_for(lambda: all(self._knows_all(s) for s in self.nodes), timeout,
                 what="every node to know the other %d" % (len(self.nodes) - 1))
        for m, r in zip(self.masters, self.replicas):
            r.cmd("CLUSTER", "REPLICATE", self.node_id(m))
        self.wait_ok(timeout)
        for m, r in zip(self.masters, self.replicas):
            wait_for(lambda: replica_in_sync(r, m), timeout,
                     what="%r to sync from %r" % (r, m))
        return self

    def _knows_all(self, s):
        lines = [l for l in _text(s.cmd("CLUSTER", "NODES")).splitlines() if l.strip()]
        return len(lines) == len(self.nodes) and not any(
            "handshake" in l.split()[2] or "noaddr" in l.split()[2] for l in lines)

    def node_id(self, s):
        return _text(s.cmd("CLUSTER", "MYID"))

    def state_ok(self, s):
        return "cluster_state:ok" in _text(s.cmd("CLUSTER", "INFO"))

    def wait_ok(self, timeout=60.0, nodes=None):
        nodes = [s for s in (nodes or self.nodes) if s.alive()]
        wait_for(lambda: all(self.state_ok(s) for s in nodes), timeout,
                 what="cluster_state:ok on %d nodes" % len(nodes))

    def owner(self, key_or_slot, via=None):
        """The Server that serves the slot (of a key, or a slot number) as
        master according to node via's CLUSTER SLOTS (default: the first
        live node); None when no node serves it."""
        slot = key_or_slot if isinstance(key_or_slot, int) else key_slot(key_or_slot)
        via = via or next(s for s in self.nodes if s.alive())
        by_port = {s.port: s for s in self.nodes}
        for lo, hi, master, *_ in via.cmd("CLUSTER", "SLOTS"):
            if lo <= slot <= hi:
                return by_port.get(int(master[1]))
        return None

    def replica_of(self, master):
        return self.replicas[self.masters.index(master)]

    def role(self, s):
        return _text(s.cmd("ROLE")[0])

    def stop(self):
        for s in self.nodes:
            s.stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


# -- running a test file ---------------------------------------------------

def module_name(server):
    """The names of the modules loaded in server (MODULE LIST), lower case:
    lets a test tell our module ("kv..." ) from RedisBloom ("bf")."""
    names = []
    for m in server.cmd("MODULE", "LIST"):
        d = dict(zip(m[0::2], m[1::2])) if isinstance(m, list) else m
        n = d.get(b"name", d.get("name"))
        names.append(_text(n).lower())
    return names


def main(argv=None):
    """Entry point of a test file: `python3 test_x.py [module.so] [unittest args]`.
    Takes the module path from argv[1] (when it ends in .so) or
    $KV_REDIS_MODULE, skips (exit 77) without redis-server or python3-redis,
    runs the file's unittest cases and exits with their status."""
    global MODULE
    argv = list(sys.argv if argv is None else argv)
    if len(argv) > 1 and argv[1].endswith(".so"):
        MODULE = argv.pop(1)
    if redis is None:
        print("SKIP: python3-redis is not installed (apt-get install python3-redis)")
        sys.exit(SKIP)
    if not (os.path.isfile(REDIS_SERVER) and os.access(REDIS_SERVER, os.X_OK)):
        print("SKIP: %s not found (apt-get install redis-server)" % REDIS_SERVER)
        sys.exit(SKIP)
    if not MODULE:
        print("error: no module: give its .so as the first argument or in KV_REDIS_MODULE")
        sys.exit(2)
    if not os.path.isfile(MODULE):
        print("error: module %s does not exist" % MODULE)
        sys.exit(2)
    MODULE = os.path.abspath(MODULE)
    os.environ["KV_REDIS_MODULE"] = MODULE
    print("module under test: %s" % MODULE, flush=True)
    prog = unittest.main(argv=argv, exit=False, verbosity=2)
    _cleanup_and_exit(0 if prog.result.wasSuccessful() else 1)


def _cleanup_and_exit(rc):
    sys.stdout.flush()
    sys.exit(rc)
