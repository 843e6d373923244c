"""The Redis-protocol front as the SERVICE serves it (issue 8): real redis-cli and
redis-py clients on <socket dir>/resp.sock and on --resp-port, values checked
in the node store with `ccpool cache`, TTLs through gc, restarts, the
Inductor/Triton call patterns and cross-uid refusal. Parser, session and
standalone-server behaviour is tested in tests/resp/; this file tests only
what the service adds (StoreKv, the listeners it configures, its counters).
"""
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resp_harness import (AS_NOBODY, HANG_GUARD_S, RespCase, free_port, main,  # noqa: E402
                          wait_until)
import resp_harness  # noqa: E402

FRAMEWORK_CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "resp",
                               "framework_compat_check.py")
# Every byte value, CRLFs and NULs included: nothing may be line- or C-string-based.
BINARY = bytes(range(256)) * 4 + b"\r\n\0\r\n$-1\r\n*3\r\n"
# Run as uid 65534: connect (Unix path or loopback port), read until EOF, print it.
READ_ON_CONNECT = """
import socket, sys
a = sys.argv[1]
s = socket.socket(socket.AF_UNIX) if a.startswith("/") else socket.socket()
s.settimeout(30)
s.connect(a if a.startswith("/") else ("127.0.0.1", int(a)))
data = b""
while True:
    chunk = s.recv(4096)
    if not chunk:
        break
    data += chunk
sys.stdout.buffer.write(data)
"""


def resp_command(*args):
    """One RESP2 request (array of bulk strings), as redis-cli --pipe expects."""
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class RespServiceTest(RespCase):

    def test_redis_cli_commands_on_both_listeners(self):
        self.require_redis_cli()
        node = self.start_node(resp_port=free_port())
        for tcp in (False, True):
            p = "tcp:" if tcp else "unix:"
            with self.subTest(listener="tcp" if tcp else "unix"):
                self.assertEqual(self.cli(node, "PING", tcp=tcp), b"PONG\n")
                self.assertEqual(self.cli(node, "SET", p + "k1", "v1", tcp=tcp), b"OK\n")
                self.assertEqual(self.cli(node, "GET", p + "k1", tcp=tcp), b"v1\n")
                self.assertEqual(self.cli(node, "MSET", p + "a", "1", p + "b", "two", tcp=tcp), b"OK\n")
                self.assertEqual(self.cli(node, "MGET", p + "a", p + "nope", p + "b", tcp=tcp), b"1\n\ntwo\n")
                self.assertEqual(self.cli(node, "EXISTS", p + "a", p + "b", p + "nope", p + "a", tcp=tcp),
                                 b"3\n")
                self.assertEqual(self.cli(node, "DEL", p + "a", p + "nope", tcp=tcp), b"1\n")
                self.assertEqual(self.cli(node, "EXISTS", p + "a", tcp=tcp), b"0\n")
                self.assertEqual(self.cli(node, "GET", p + "a", tcp=tcp), b"\n")
                self.assertEqual(self.cli(node, "SET", p + "t", "x", "EX", "3600", tcp=tcp), b"OK\n")
                ttl = int(self.cli(node, "TTL", p + "t", tcp=tcp))
                self.assertTrue(3500 <= ttl <= 3600, ttl)
                self.assertEqual(self.cli(node, "TTL", p + "k1", tcp=tcp), b"-1\n")
                # binary value through -x (last argument from stdin, byte-exact)
                self.assertEqual(self.cli(node, "-x", "SET", p + "bin", tcp=tcp, stdin=BINARY), b"OK\n")
        # One store behind both listeners.
        self.assertEqual(self.cli(node, "GET", "tcp:k1"), b"v1\n")
        self.assertEqual(self.cli(node, "GET", "unix:k1", tcp=True), b"v1\n")
        # --pipe: 2000 pipelined writes in one stream, every reply counted.
        stream = b"".join(resp_command("SET", f"pipe:{i}", f"value-{i}") for i in range(2000))
        out = self.cli(node, "--pipe", stdin=stream)
        self.assertIn(b"errors: 0, replies: 2000", out)
        labels = self.entries_by_label(node)
        self.assertEqual(sum(1 for l in labels if l.startswith("pipe:")), 2000)
        self.assert_cat(node, labels["pipe:1999"]["key"], b"value-1999")
        for p in ("unix:", "tcp:"):
            self.assert_cat(node, labels[p + "bin"]["key"], BINARY)
        s = self.status(node)
        self.assertEqual(s["resp_socket"], node.resp_sock)
        self.assertEqual(s["resp_port"], node.port)
        # 2 x 13 redis-cli commands, 2 more, 2000 pipelined (+ --pipe's closing ECHO).
        self.assertGreaterEqual(s["resp_commands"], 2 * 13 + 2 + 2000)
        self.assertEqual(s["resp_refused_peers"], 0)

    def test_redis_py_binary_values_expiry_and_pipelining(self):
        self.require_redis_py()
        node = self.start_node(resp_port=free_port())
        big = os.urandom(3 << 20) + BINARY  # spans many reads and the store's compression
        for tcp in (False, True):
            with self.subTest(listener="tcp" if tcp else "unix"):
                r = self.client(node, tcp=tcp)
                p = b"tcp:" if tcp else b"unix:"
                self.assertTrue(r.set(p + b"bin\0key\r\n", BINARY))
                self.assertEqual(r.get(p + b"bin\0key\r\n"), BINARY)
                self.assertTrue(r.set(p + b"big", big))
                self.assertEqual(r.get(p + b"big"), big)
                self.assertTrue(r.set(p + b"empty", b""))
                self.assertEqual(r.get(p + b"empty"), b"")
                self.assertIsNone(r.get(p + b"missing"))
                self.assertTrue(r.mset({p + b"m1": b"\x00", p + b"m2": b"\xff" * 70000}))
                self.assertEqual(r.mget([p + b"m1", p + b"missing", p + b"m2"]), [b"\x00", None, b"\xff" * 70000])
                self.assertEqual(r.exists(p + b"m1", p + b"m2", p + b"missing"), 2)
                self.assertEqual(r.delete(p + b"m1", p + b"missing"), 1)
                self.assertEqual(r.exists(p + b"m1"), 0)
                self.assertTrue(r.set(p + b"ex", b"1", ex=600))
                self.assertTrue(r.set(p + b"px", b"1", px=600000))
                self.assertTrue(0 < r.ttl(p + b"ex") <= 600)
                self.assertTrue(0 < r.pttl(p + b"px") <= 600000)
                self.assertIsNone(r.set(p + b"ex", b"2", nx=True))
                self.assertTrue(r.set(p + b"ex", b"2", xx=True))  # a plain overwrite drops the TTL
                self.assertEqual((r.get(p + b"ex"), r.ttl(p + b"ex")), (b"2", -1))
                self.assertTrue(r.expire(p + b"ex", 300))
                self.assertTrue(0 < r.ttl(p + b"ex") <= 300)
                # 500 commands in one pipeline (no MULTI), answered in order.
                pipe = r.pipeline(transaction=False)
                for i in range(250):
                    pipe.set(p + b"pl:%d" % i, b"%d\r\n" % i)
                    pipe.get(p + b"pl:%d" % i)
                replies = pipe.execute()
                self.assertEqual(replies[0::2], [True] * 250)
                self.assertEqual(replies[1::2], [b"%d\r\n" % i for i in range(250)])
                r.close()
        labels = self.entries_by_label(node)
        entry = labels["tcp:big"]
        self.assertEqual(entry["logical_bytes"], len(big))
        self.assert_cat(node, entry["key"], big)
        self.assert_cat(node, labels["unix:bin\0key\r\n"]["key"], BINARY)

    def test_64_concurrent_connections(self):
        self.require_redis_py()
        node = self.start_node()
        n = 64
        clients = [self.client(node, single_connection_client=True) for _ in range(n)]
        connected = threading.Barrier(n)
        errors, seen = [], []

        def worker(i):
            try:
                r = clients[i]
                r.ping()
                connected.wait(HANG_GUARD_S)
                if i == 0:  # every connection is open now and none has closed
                    seen.append(r.info("clients")["connected_clients"])
                connected.wait(HANG_GUARD_S)
                value = bytes([i]) * (1000 + i)
                for round_ in range(20):
                    r.set(f"conc:{i}", value + b"%d" % round_)
                    if r.get(f"conc:{i}") != value + b"%d" % round_:
                        errors.append(f"client {i} round {round_} read another value")
                r.set("shared", value)  # one contended key: some writer wins whole, no mix
            except Exception as e:  # noqa: BLE001: report every thread's failure
                errors.append(f"client {i}: {e!r}")
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(HANG_GUARD_S)
        self.assertEqual(errors, [])
        self.assertEqual(seen, [n])
        check = self.client(node)
        for i in range(n):
            self.assertEqual(check.get(f"conc:{i}"), bytes([i]) * (1000 + i) + b"19")
        shared = check.get("shared")
        self.assertEqual(len(set(shared)), 1)
        self.assertEqual(len(shared), 1000 + shared[0])
        labels = self.entries_by_label(node)
        self.assertEqual(sum(1 for l in labels if l.startswith("conc:")), n)
        self.assertGreaterEqual(self.status(node)["resp_connections"], n)
        for c in clients:
            c.close()

    def test_values_are_store_entries(self):
        self.require_redis_py()
        node = self.start_node()
        r = self.client(node)
        key = "pt2:fx-graph-v1::abcdef0123:c1"
        value = b'{"graph": "' + b"x" * 5000 + b'"}' + BINARY
        self.assertTrue(r.set(key, value, ex=3600))
        self.assertTrue(r.set("triton:k1:kernel.cubin", BINARY))
        entries = self.cache(node, "ls")
        self.assertEqual(sorted(e["label"] for e in entries), sorted([key, "triton:k1:kernel.cubin"]))
        e = next(e for e in entries if e["label"] == key)
        self.assertEqual((e["kind"], e["tool"], e["outputs"], e["logical_bytes"]), ("blob", "redis", 1, len(value)))
        shown = self.cache(node, "show", e["key"])
        self.assertEqual((shown["label"], shown["kind"]), (key, "blob"))
        self.assertEqual([(o["name"], o["size"]) for o in shown["outputs"]], [("value", len(value))])
        # EX 3600 is stored as an absolute deadline one hour after creation.
        self.assertTrue(3590_000 <= shown["expires_ms"] - shown["created_ms"] <= 3600_000, shown)
        self.assert_cat(node, e["key"][:12], value)
        with self.subTest(check="ccpool cache cat -o FILE"):
            out = os.path.join(self.dir, "value.out")
            self.cache(node, "cat", e["key"], "value", "-o", out, json_out=False)
            with open(out, "rb") as f:
                self.assertTrue(f.read() == value)
        # The human listing names the key too.
        self.assertIn(key.encode(), self.cache(node, "ls", json_out=False))
        # An overwrite replaces the entry (same store key); DEL removes it.
        self.assertTrue(r.set(key, b"v2"))
        entries = self.cache(node, "ls")
        self.assertEqual([x["key"] for x in entries if x["label"] == key], [e["key"]])
        self.assert_cat(node, e["key"], b"v2")
        self.assertEqual(self.cache(node, "show", e["key"])["expires_ms"], 0)
        self.assertEqual(r.delete(key), 1)
        self.assertNotIn(key, [x["label"] for x in self.cache(node, "ls")])
        # `ccpool cache rm` of an entry is seen by the front at once.
        t = next(x for x in self.cache(node, "ls") if x["label"] == "triton:k1:kernel.cubin")
        self.cache(node, "rm", t["key"])
        self.assertIsNone(r.get("triton:k1:kernel.cubin"))

    def test_ttl_expiry_and_gc(self):
        self.require_redis_py()
        node = self.start_node()
        r = self.client(node)
        self.assertTrue(r.set("keep", b"forever"))
        self.assertTrue(r.set("long", b"an hour", ex=3600))
        self.assertTrue(r.set("short", b"soon gone", px=300))
        self.assertTrue(r.set("expire-me", b"x"))
        self.assertTrue(r.pexpire("expire-me", 300))
        self.assertEqual(r.exists("short", "expire-me"), 2)
        wait_until(lambda: r.get("short") is None and r.get("expire-me") is None, "both keys to expire")
        self.assertEqual(r.exists("short", "expire-me", "keep", "long"), 2)
        self.assertEqual(r.mget(["short", "keep", "expire-me"]), [None, b"forever", None])
        self.assertEqual((r.ttl("short"), r.ttl("keep")), (-2, -1))
        self.assertTrue(0 < r.ttl("long") <= 3600)
        # An expired key cannot be revived by EXPIRE and XX does not see it.
        self.assertFalse(r.expire("short", 100))
        self.assertIsNone(r.set("short", b"again", xx=True))
        # EXPIRE with a deadline in the past deletes at once.
        self.assertTrue(r.set("past", b"x"))
        self.assertTrue(r.expire("past", -1))
        self.assertIsNone(r.get("past"))
        gc = self.cache(node, "gc")
        self.assertEqual(gc["expired"], 2, gc)
        self.assertEqual(gc["removed_entries"], 2, gc)
        self.assertEqual(sorted(e["label"] for e in self.cache(node, "ls")), ["keep", "long"])
        again = self.cache(node, "gc")
        self.assertEqual((again["expired"], again["removed_entries"]), (0, 0))
        self.assertEqual(r.get("long"), b"an hour")
        # DEL of an expired key deletes nothing, as in Redis: 0.
        self.assertTrue(r.set("late", b"x", px=200))
        wait_until(lambda: r.get("late") is None, "'late' to expire")
        self.assertEqual(r.delete("late", "keep"), 1)

    def test_values_survive_restart(self):
        self.require_redis_py()
        port = free_port()
        node = self.start_node(resp_port=port)
        r = self.client(node)
        self.assertTrue(r.set(b"bin", BINARY))
        self.assertTrue(r.set("ttl", b"t", ex=3600))
        self.assertTrue(r.mset({"m1": b"1", "m2": b"2"}))
        r.close()
        self.stop_node(node)
        self.assertEqual(node.proc.returncode, 0)
        self.assertFalse(os.path.exists(node.resp_sock), "the front must remove its socket file on exit")
        node = self.start_node(resp_port=port)
        for tcp in (False, True):
            r = self.client(node, tcp=tcp)
            self.assertEqual(r.get(b"bin"), BINARY)
            self.assertEqual(r.mget(["m1", "m2", "gone"]), [b"1", b"2", None])
            self.assertTrue(0 < r.ttl("ttl") <= 3600)
            r.close()

    def test_framework_call_patterns(self):
        """framework_compat_check.py (tests/resp/) reimplements the redis-py calls of
        Inductor's RedisRemoteCache (Redis(host, port) and Redis.from_url, GET,
        SET EX) and Triton's RedisRemoteCacheBackend (MGET, SET), here against
        the service's listeners and store."""
        self.require_redis_py()
        node = self.start_node(resp_port=free_port())
        r = subprocess.run(["/usr/bin/python3", FRAMEWORK_CHECK, "--unix", node.resp_sock, "--port",
                            str(node.port)], capture_output=True, timeout=HANG_GUARD_S * 2)
        self.assertEqual(r.returncode, 0, r.stdout.decode() + r.stderr.decode())
        self.assertIn(b"0 failure(s)", r.stdout)
        labels = self.entries_by_label(node)
        for run in ("unix-run", "url-run", "tcp-run"):
            e = labels[f"pt2:{run}::fxgraph-3f1e2d:c1"]
            self.assertEqual(e["kind"], "blob")
            self.assertGreater(e["expires_ms"], 0)  # SET ... EX ttl
        for name in ("kernel.cubin", "kernel.json", "kernel.ptx"):
            self.assertEqual(labels[f"triton:a1b2c3:{name}"]["expires_ms"], 0)
        self.assertEqual(labels["triton:a1b2c3:kernel.cubin"]["logical_bytes"], 256 * 300)
        # What TORCHINDUCTOR_REDIS_URL=unix://<socket dir>/resp.sock gives Inductor.
        client = resp_harness.redis.Redis.from_url(f"unix://{node.resp_sock}")
        self.assertEqual(client.get("pt2:unix-run::fxgraph-3f1e2d:c1")[:1], b"{")

    def test_password_file(self):
        """--resp-password-file: the file's trailing newline is not part of the
        password; AUTH is required on both listeners; with it, another uid may
        use the TCP listener."""
        self.require_redis_py()
        pw_file = os.path.join(self.dir, "resp.pw")
        with open(pw_file, "w") as f:
            f.write("s3cret pass\n")
        os.chmod(pw_file, 0o600)
        node = self.start_node(resp_port=free_port(), extra=("--resp-password-file", pw_file))
        for tcp in (False, True):
            errors = resp_harness.redis.exceptions
            refused = (errors.AuthenticationError, errors.ResponseError)  # redis-py 4.3 vs later
            with self.assertRaisesRegex(refused, "Authentication required"):
                self.client(node, tcp=tcp).set("k", "v")
            with self.assertRaisesRegex(refused, "WRONGPASS"):
                self.client(node, tcp=tcp, password="s3cret pass\n").set("k", "v")
            r = self.client(node, tcp=tcp, password="s3cret pass")
            self.assertTrue(r.set("k", b"tcp" if tcp else b"unix"))
            self.assertEqual(r.get("k"), b"tcp" if tcp else b"unix")
        self.assertEqual([e["label"] for e in self.cache(node, "ls")], ["k"])
        if os.geteuid() == 0 and os.access(resp_harness.SETPRIV, os.X_OK):
            py = subprocess.run([*AS_NOBODY, "/usr/bin/python3", "-c",
                                 "import redis, sys; r = redis.Redis(port=int(sys.argv[1]), password='s3cret pass');"
                                 "print(r.get('k'))", str(node.port)], capture_output=True, timeout=HANG_GUARD_S)
            self.assertEqual((py.returncode, py.stdout), (0, b"b'tcp'\n"), py.stderr)

    def _open_to_nobody(self, node):
        # Let uid 65534 reach resp.sock so the front's own uid check (not file
        # permissions) is what refuses it.
        for d in (self.dir, node.root):
            os.chmod(d, 0o755)
        os.chmod(node.run_dir, 0o711)
        os.chmod(node.resp_sock, 0o666)

    def refusal_as_nobody(self, address):
        """What a uid-65534 client reads on connecting, before it writes anything
        (the front refuses at accept). `address` is a path or a TCP port."""
        r = subprocess.run([*AS_NOBODY, "/usr/bin/python3", "-c", READ_ON_CONNECT, str(address)],
                           capture_output=True, timeout=HANG_GUARD_S)
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        return r.stdout

    def assert_cli_refused(self, node, tcp):
        """redis-cli of uid 65534 gets no OK. It either prints the refusal or dies
        of SIGPIPE/ECONNRESET: the front closes right after its one-line reply,
        possibly before redis-cli has written its command."""
        r = subprocess.run([*AS_NOBODY, resp_harness.REDIS_CLI, *self.cli_target(node, tcp), "SET", "owned",
                            "stolen"], capture_output=True, timeout=HANG_GUARD_S)
        self.assertNotIn(b"OK", r.stdout)
        if r.stdout or r.stderr:
            self.assertIn(b"65534", r.stdout + r.stderr)

    def test_cross_uid_refused_on_unix_socket(self):
        self.require_redis_cli()
        self.require_root_setpriv()
        node = self.start_node()
        self.assertEqual(os.stat(node.resp_sock).st_mode & 0o777, 0o600)
        self.assertEqual(self.cli(node, "SET", "owned", "1"), b"OK\n")
        self._open_to_nobody(node)
        before = self.status(node)["resp_refused_peers"]
        self.assertEqual(self.refusal_as_nobody(node.resp_sock),
                         b"-ERR ccpool front serves uid 0 only; refused peer uid 65534\r\n")
        self.assert_cli_refused(node, tcp=False)
        self.assertEqual(self.cli(node, "GET", "owned"), b"1\n")
        s = self.status(node)
        self.assertEqual(s["resp_refused_peers"], before + 2)
        self.assertEqual(s["refused_peers"], 0)  # the binary socket saw nothing
        self.assertEqual([e["label"] for e in self.cache(node, "ls")], ["owned"])

    def test_cross_uid_refused_on_tcp(self):
        self.require_redis_cli()
        self.require_redis_py()
        self.require_root_setpriv()
        node = self.start_node(resp_port=free_port())
        before = self.status(node)["resp_refused_peers"]
        self.assertEqual(self.refusal_as_nobody(node.port),
                         b"-ERR ccpool front serves uid 0 only; refused peer uid 65534\r\n")
        self.assert_cli_refused(node, tcp=True)
        py = subprocess.run([*AS_NOBODY, "/usr/bin/python3", "-c",
                             "import redis, sys; r = redis.Redis(host='127.0.0.1', port=int(sys.argv[1]));"
                             "r.set('stolen2', 'x')", str(node.port)], capture_output=True, timeout=HANG_GUARD_S)
        self.assertNotEqual(py.returncode, 0)
        self.assertIn(b"redis.exceptions", py.stderr)
        self.assertEqual(self.cli(node, "EXISTS", "owned", "stolen2", tcp=True), b"0\n")
        # One refusal per connection: the raw read, redis-cli, and redis-py's one
        # or two (its pool reconnects once when a fresh connection already has
        # data waiting, which the refusal line may be).
        refused = self.status(node)["resp_refused_peers"] - before
        self.assertIn(refused, (3, 4))
        self.assertEqual(self.cache(node, "ls"), [])

if __name__ == "__main__":
    main()
