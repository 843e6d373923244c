"""The cluster tier through real services (issue 7): simulated nodes are
separate `ccpool serve` processes sharing one private redis-server.

Every assertion is on counts (`ccpool status --json` of each node, tool runs
recorded in runs/, Redis keys) and bytes; time only appears as hang guards.
The declared tool waits on a gate file so a test decides when a compile
finishes; it copies in.bin to out.bin, so a served output is checked byte for
byte against the input.
"""
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nodes import NodesCase, main, pid_gone, wait_until  # noqa: E402

# $1 = gate file. Records "$$ $!" (itself and a background child, both in the
# job's process group) in runs/<pid>, so runs/ counts executions on all nodes.
TOOL = r"""#!/bin/sh
sleep 300 >/dev/null 2>&1 &
echo "$$ $!" > "runs/$$"
i=0
while [ ! -e "$1" ] && [ $i -lt 1800 ]; do sleep 0.05; i=$((i+1)); done
kill $! 2>/dev/null
cat in.bin > out.bin
echo "copied $(wc -c < in.bin) bytes"
"""

GXX = "/usr/bin/g++"
KERNEL = """extern "C" void kernel(const float* in, float* out, long n) {
  for (long i = 0; i < n; ++i) out[i] = in[i] * 2.0f + 1.0f;
}
"""

LEASE_BOUND_S = 60   # default lease TTL 10 s + compile + a loaded machine
POLL_EVALS = 40      # EVALs only a lease poller (every 50 ms) reaches within the guard


class RemoteTierTest(NodesCase):
    def setUp(self):
        super().setUp()
        self.write("work/tool.sh", TOOL, 0o755)
        self.gate = self.path("gate")
        self.runs = os.path.join(self.work, "runs")
        os.makedirs(self.runs)
        self.pid_dirs.append(self.runs)

    # --- helpers ---------------------------------------------------------
    def request(self, node):
        return node.spawn(["/bin/sh", "tool.sh", self.gate], inputs=["in.bin"], outputs=["out.bin"])

    def set_input(self, data):
        self.write("work/in.bin", data)
        try:
            os.remove(os.path.join(self.work, "out.bin"))
        except FileNotFoundError:
            pass

    def compile_on(self, node, data):
        """One request for input `data` on `node`; asserts it succeeded and
        out.bin holds exactly `data`."""
        self.set_input(data)
        rc, out, err = self.finish([self.request(node)])[0]
        self.assertEqual((rc, out), (0, b"copied %d bytes\n" % len(data)), err)
        self.assertEqual(self.read_bytes("work/out.bin"), data)

    def runs_count(self):
        return len(os.listdir(self.runs))

    def obj_keys(self):
        return self.redis.keys("ccpool:obj:*")

    def open_gate(self):
        open(self.gate, "w").close()

    # --- a remote hit --------------------------------------------------------
    def test_remote_hit_without_execution(self):
        a, b = self.node("a"), self.node("b")
        self.open_gate()
        data = os.urandom(4096)
        self.compile_on(a, data)
        a.wait_status(lambda s: s["remote_writes"] >= 1, "the result to be written to Redis")
        self.assertEqual(len(self.obj_keys()), 1)
        self.compile_on(b, data)
        s = b.status()
        self.assertEqual((s["remote_hits"], s["executions"], s["hits"], s["misses"]), (1, 0, 0, 0))
        self.assertIs(s["remote"], True)
        self.assertEqual(self.runs_count(), 1)
        # The remote hit was stored locally: the next one is a local hit.
        self.compile_on(b, data)
        s = b.status()
        self.assertEqual((s["remote_hits"], s["hits"], s["executions"]), (1, 1, 0))
        self.assertEqual(self.runs_count(), 1)

    def test_hit_time_covers_local_hits_only(self):
        """`hit_service_us` and `hit_latency` describe node-store hits served
        on arrival: a hit from the cluster tier (a Redis round trip) is in
        neither, so here the histogram counts exactly `hits`."""
        a, b = self.node("a"), self.node("b")
        self.open_gate()
        data = os.urandom(4096)
        self.compile_on(a, data)
        a.wait_status(lambda s: s["remote_writes"] >= 1, "the result to be written to Redis")
        self.compile_on(b, data)
        s = b.status()
        self.assertEqual((s["remote_hits"], s["hits"]), (1, 0))
        self.assertEqual((sum(s["hit_latency"]["counts"]), s["hit_service_us"]), (0, 0))
        self.compile_on(b, data)
        s = b.status()
        self.assertEqual((s["remote_hits"], s["hits"]), (1, 1))
        self.assertEqual(sum(s["hit_latency"]["counts"]), 1)
        self.assertGreater(s["hit_service_us"], 0)

    def test_remote_hit_gxx_shared_object(self):
        """A real one-step `g++ -shared -o k.so k.cpp` (direct mode: a
        manifest and a result travel through Redis)."""
        if not os.access(GXX, os.X_OK):
            self.skipTest(f"{GXX} is not installed")
        a, b = self.node("a"), self.node("b")
        self.write("work/k.cpp", KERNEL)
        argv = [GXX, "-shared", "-fPIC", "-O2", "-o", "k.so", "k.cpp"]
        rc, _, err = self.finish([a.spawn(argv)])[0]
        self.assertEqual(rc, 0, err)
        built = self.read_bytes("work/k.so")
        self.assertEqual(built[:4], b"\x7fELF")
        s = a.wait_status(lambda s: s["remote_writes"] >= 2, "manifest and result written")
        self.assertEqual((s["executions"], s["remote_skipped"]), (1, 0))
        self.assertEqual(len(self.obj_keys()), s["remote_writes"])
        os.remove(os.path.join(self.work, "k.so"))
        rc, _, err = self.finish([b.spawn(argv)])[0]
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.read_bytes("work/k.so"), built)
        s = b.status()
        self.assertEqual((s["remote_hits"], s["executions"], s["hits"]), (1, 0, 0))

    # --- cross-node single-flight ------------------------------------------------
    def test_cold_two_nodes_one_execution(self):
        a, b = self.node("a", jobs=4), self.node("b", jobs=4)
        data = os.urandom(2048)
        self.set_input(data)
        procs = []
        for _ in range(8):
            procs += [self.request(a), self.request(b)]
        for n in (a, b):
            n.wait_status(lambda s: s["requests"] == 8 and s["joins"] == 7, "8 requests, 7 joins")
        wait_until(lambda: a.status()["executions"] + b.status()["executions"] >= 1,
                   "a node to execute")
        runner, waiter = (a, b) if a.status()["executions"] == 1 else (b, a)
        self.assertEqual(len(self.redis.keys("ccpool:lease:*")), 1)
        # The other node's leader must be polling the lease before the
        # compile may finish; otherwise it could simply take the lease later.
        base = self.redis.eval_calls()
        wait_until(lambda: self.redis.eval_calls() - base >= POLL_EVALS,
                   "the other node to poll the lease")
        self.open_gate()
        for rc, out, err in self.finish(procs):
            self.assertEqual((rc, out), (0, b"copied 2048 bytes\n"), err)
        self.assertEqual(self.read_bytes("work/out.bin"), data)
        r, w = runner.status(), waiter.status()
        self.assertEqual(r["executions"] + w["executions"], 1)
        self.assertEqual((r["executions"], r["misses"], r["joins"]), (1, 1, 7))
        self.assertEqual((w["executions"], w["remote_hits"], w["joins"]), (0, 8, 7))
        self.assertEqual(self.runs_count(), 1)
        wait_until(lambda: not self.redis.keys("ccpool:lease:*"), "the lease to be released")

    def test_lease_holder_killed(self):
        a, b = self.node("a"), self.node("b")
        data = os.urandom(1024)
        self.set_input(data)
        pa = self.request(a)
        a.wait_status(lambda s: s["executions"] == 1, "node a to execute")
        wait_until(lambda: self.runs_count() == 1, "the tool to record its pid")
        self.assertEqual(len(self.redis.keys("ccpool:lease:*")), 1)
        tool_pid = self.recorded_pids()[0]
        procs = [self.request(b) for _ in range(8)]
        b.wait_status(lambda s: s["requests"] == 8 and s["joins"] == 7 and s["misses"] == 1,
                      "8 requests, 7 joins")
        base = self.redis.eval_calls()
        wait_until(lambda: self.redis.eval_calls() - base >= POLL_EVALS,
                   "node b to poll node a's lease")
        self.assertEqual(b.status()["executions"], 0)
        # Node a dies: its client is frozen first so it cannot disconnect
        # (which would cancel the job and release the lease) or fall back.
        pa.send_signal(signal.SIGSTOP)
        a.proc.kill()
        a.proc.wait(30)
        pgid = os.getpgid(tool_pid)
        self.assertNotEqual(pgid, os.getpgrp())
        os.killpg(pgid, signal.SIGKILL)
        pa.kill()
        wait_until(lambda: pid_gone(tool_pid), "node a's job to die")
        self.open_gate()
        # The lease expires (no renewal) and node b compiles: bounded.
        for rc, out, err in self.finish(procs, timeout=LEASE_BOUND_S):
            self.assertEqual((rc, out), (0, b"copied 1024 bytes\n"), err)
        self.assertEqual(self.read_bytes("work/out.bin"), data)
        s = b.status()
        self.assertEqual((s["executions"], s["remote_hits"], s["joins"]), (1, 0, 7))
        self.assertEqual(self.runs_count(), 2)
        b.wait_status(lambda s: s["remote_writes"] >= 1, "node b to write the result")
        self.assertEqual(len(self.obj_keys()), 1)

    def test_lease_without_ttl_not_waited_on(self):
        """A lease anyone made permanent (PERSIST, or SET without PX) would make
        every node wait forever: it is ignored and the node compiles."""
        a, b = self.node("a"), self.node("b")
        data = os.urandom(512)
        self.set_input(data)
        pa = self.request(a)
        a.wait_status(lambda s: s["executions"] == 1, "node a to execute")
        wait_until(lambda: self.runs_count() == 1, "the tool to record its pid")
        leases = self.redis.keys("ccpool:lease:*")
        self.assertEqual(len(leases), 1)
        tool_pid = self.recorded_pids()[0]
        pa.send_signal(signal.SIGSTOP)
        a.proc.kill()  # no release and no more renewals
        a.proc.wait(30)
        os.killpg(os.getpgid(tool_pid), signal.SIGKILL)
        pa.kill()
        self.assertEqual(self.redis.command("PERSIST", leases[0]), 1)
        self.assertEqual(self.redis.command("PTTL", leases[0]), -1)
        self.open_gate()
        (rc, out, err), = self.finish([self.request(b)], timeout=LEASE_BOUND_S)
        self.assertEqual((rc, out), (0, b"copied 512 bytes\n"), err)
        self.assertEqual(b.status()["executions"], 1)
        self.assertEqual(self.redis.command("PTTL", leases[0]), -1)  # still there: never waited on

    # --- Redis trouble -------------------------------------------------------------
    def test_redis_slow_then_down(self):
        a = self.node("a")
        self.open_gate()
        self.compile_on(a, b"warm-up")
        a.wait_status(lambda s: s["remote_writes"] == 1, "one write")
        # Slow: the process accepts but never answers (SIGSTOP).
        self.redis.pause()
        for i in range(4):
            self.compile_on(a, b"slow %d" % i)
        s = a.status()
        self.assertEqual(s["executions"], 5)
        self.assertGreaterEqual(s["remote_errors"], 3)
        self.assertGreaterEqual(s["breaker_opened"], 1)
        self.assertTrue(s["breaker_open"])
        # Back: after the cooldown one call probes and closes the breaker.
        self.redis.resume()
        n = [0]

        def closed():
            n[0] += 1
            self.compile_on(a, b"after %d" % n[0])
            return not a.status()["breaker_open"]
        wait_until(closed, "the breaker to close", step=0.5)
        writes = a.status()["remote_writes"]
        self.compile_on(a, b"healthy")
        a.wait_status(lambda s: s["remote_writes"] > writes, "writes to resume")
        # Down: connection refused.
        opened = a.status()["breaker_opened"]
        errors = a.status()["remote_errors"]
        self.redis.kill()
        for i in range(4):
            self.compile_on(a, b"down %d" % i)
        s = a.status()
        self.assertGreater(s["remote_errors"], errors)
        self.assertEqual(s["breaker_opened"], opened + 1)
        self.assertTrue(s["breaker_open"])
        self.assertEqual(s["failures"], 0)
        self.assertEqual(s["executions"], self.runs_count())

    # --- poisoned, invalid and oversized values --------------------------------------
    def produce(self, node, inputs):
        """Compiles each input on `node`; returns {input: redis value key}."""
        keys = {}
        for data in inputs:
            before = set(self.obj_keys())
            self.compile_on(node, data)
            new = wait_until(lambda: set(self.obj_keys()) - before, "the value to reach Redis")
            self.assertEqual(len(new), 1)
            keys[data] = new.pop()
        return keys

    def test_poisoned_signature_ignored(self):
        key_file = self.write("hmac.key", os.urandom(32), 0o600)
        a = self.node("a", "--remote-key-file", key_file)
        b = self.node("b", "--remote-key-file", key_file)
        self.open_gate()
        inputs = [b"wrong mac", b"missing signature", b"replayed"]
        keys = self.produce(a, inputs)
        values = {d: self.redis.get(k) for d, k in keys.items()}
        for v in values.values():
            self.assertEqual((v[:4], v[4], v[5]), (b"CCPR", 1, 1))  # signed envelope
        wrong = bytearray(values[b"wrong mac"])
        wrong[20] ^= 0x40
        self.redis.set(keys[b"wrong mac"], bytes(wrong))
        unsigned = bytearray(values[b"missing signature"][:16]) + values[b"missing signature"][48:]
        unsigned[5] = 0
        self.redis.set(keys[b"missing signature"], bytes(unsigned))
        # A valid signed entry of another key, replayed under this key.
        self.redis.set(keys[b"replayed"], values[b"wrong mac"])
        for data in inputs:
            self.compile_on(b, data)
        s = b.status()
        self.assertEqual((s["remote_bad_signature"], s["remote_hits"], s["executions"]), (3, 0, 3))
        self.assertEqual(self.runs_count(), 6)
        # The honest node overwrote every poisoned value with its own result.
        b.wait_status(lambda s: s["remote_writes"] >= 3, "node b's write-back")
        for data, planted in ((b"wrong mac", bytes(wrong)), (b"missing signature", bytes(unsigned)),
                              (b"replayed", values[b"wrong mac"])):
            now = self.redis.get(keys[data])
            self.assertEqual((now[:4], now[5]), (b"CCPR", 1))
            self.assertNotEqual(now, planted)

    def test_truncated_or_garbage_never_served(self):
        a, b = self.node("a", "--remote-unsigned"), self.node("b", "--remote-unsigned")
        self.open_gate()
        inputs = [b"truncated" * 100, b"garbage" * 100, b"bad payload" * 100]
        keys = self.produce(a, inputs)
        values = {d: self.redis.get(k) for d, k in keys.items()}
        for v in values.values():
            self.assertEqual((v[:4], v[5]), (b"CCPR", 0))  # unsigned envelope
        self.redis.set(keys[inputs[0]], values[inputs[0]][:len(values[inputs[0]]) // 2])
        self.redis.set(keys[inputs[1]], os.urandom(300))
        # Envelope intact, the store record inside corrupted: the store's
        # validator (checksums) must reject it.
        bad = bytearray(values[inputs[2]])
        bad[16 + (len(bad) - 16) * 2 // 3] ^= 0xFF
        self.redis.set(keys[inputs[2]], bytes(bad))
        for data in inputs:
            self.compile_on(b, data)
        s = b.status()
        self.assertEqual((s["remote_hits"], s["executions"]), (0, 3))
        self.assertEqual(s["remote_invalid"], 3)
        self.assertEqual(self.runs_count(), 6)

    def test_oversized_value_skipped(self):
        a = self.node("a", "--remote-max-value", "1K")
        b = self.node("b")
        self.open_gate()
        big = os.urandom(16384)  # incompressible: the stored record stays > 1 KiB
        self.compile_on(a, big)
        s = a.wait_status(lambda s: s["remote_skipped"] >= 1, "the big value to be skipped")
        self.assertEqual((s["remote_skipped"], s["remote_writes"]), (1, 0))
        self.assertEqual(self.obj_keys(), [])
        wait_until(lambda: not self.redis.keys("ccpool:lease:*"), "node a to release its lease")
        self.compile_on(b, big)
        s = b.status()
        self.assertEqual((s["remote_hits"], s["executions"]), (0, 1))
        self.assertEqual(self.runs_count(), 2)
        # A small value on the same node is still written.
        self.compile_on(a, b"small")
        s = a.wait_status(lambda s: s["remote_writes"] >= 1, "the small value to be written")
        self.assertEqual(s["remote_skipped"], 1)

    # --- keys across nodes ------------------------------------------------------------
    def test_dash_arguments_reach_tool_and_key(self):
        """A declared job's argv is part of its key on every node: `-x` on
        node a must not be served for `-y` on node b, and the tool must see
        its dash arguments."""
        a, b = self.node("a"), self.node("b")
        self.write("work/args.sh", 'printf "%s\\n" "$*" > out.bin\n')
        self.set_input(b"same input")
        for node, flag in ((a, "-x"), (b, "-y")):
            rc, _, err = self.finish([node.spawn(["/bin/sh", "args.sh", "one", flag, "-c", "two"],
                                                 inputs=["in.bin"], outputs=["out.bin"])])[0]
            self.assertEqual(rc, 0, err)
            self.assertEqual(self.read_bytes("work/out.bin"), b"one %s -c two\n" % flag.encode())
            a.wait_status(lambda s: s["remote_writes"] >= 1, "node a's write")
        s = b.status()
        self.assertEqual((s["remote_hits"], s["executions"]), (0, 1))


if __name__ == "__main__":
    main()
