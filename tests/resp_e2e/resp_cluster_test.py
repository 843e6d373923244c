"""The Redis front with the cluster tier (issue 8, requirement 3): two nodes, each
a `ccpool serve --remote redis://127.0.0.1:P` with its own store, share one
redis-server started by the test. A value SET through node A's front is read
through node B's front although B's store never had it, and then lives in B's
store; TTLs travel with the value.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resp_harness import RespCase, main, wait_until  # noqa: E402
import resp_harness  # noqa: E402

BINARY = bytes(range(256)) * 64 + b"\r\n\0"


class RespClusterTest(RespCase):

    def start_pair(self):
        self.require_redis_py()
        port = self.start_redis_server()
        self.tier = resp_harness.redis.Redis(host="127.0.0.1", port=port)
        url = self.tier_url = f"redis://127.0.0.1:{port}"
        return self.start_node("a", remote=url), self.start_node("b", remote=url)

    def wait_remote_writes(self, node, n):
        """The tier writes behind the caller: wait for node's n-th write to land."""
        wait_until(lambda: self.status(node)["remote_writes"] >= n, f"{n} remote writes from node {node.name}")
        self.assertEqual(len(self.tier.keys("ccpool:obj:*")), n)

    def test_set_on_a_reads_on_b(self):
        a, b = self.start_pair()
        ra, rb = self.client(a), self.client(b)
        self.assertTrue(ra.set("pt2:c::graph:c1", BINARY, ex=3600))
        self.assertTrue(ra.set("triton:k:kernel.cubin", b"\x7fELF" + BINARY))
        self.wait_remote_writes(a, 2)
        self.assertEqual(self.cache(b, "ls"), [])  # B's store does not have them
        self.assertEqual(rb.get("pt2:c::graph:c1"), BINARY)
        self.assertEqual(rb.mget(["triton:k:kernel.cubin", "triton:k:missing"]), [b"\x7fELF" + BINARY, None])
        ttl = rb.ttl("pt2:c::graph:c1")
        self.assertTrue(0 < ttl <= 3600, ttl)  # the entry carries its deadline
        self.assertEqual(rb.ttl("triton:k:kernel.cubin"), -1)
        self.assertEqual(sorted(e["label"] for e in self.cache(b, "ls")),
                         ["pt2:c::graph:c1", "triton:k:kernel.cubin"])  # now in B's store
        # A key nobody set misses on both nodes.
        self.assertIsNone(rb.get("nobody"))
        self.assertIsNone(ra.get("nobody"))
        # B's later reads come from its own store.
        self.assertEqual(rb.get("pt2:c::graph:c1"), BINARY)
        sb = self.status(b)
        self.assertEqual((sb["remote_invalid"], sb["remote_bad_signature"], sb["remote_errors"]), (0, 0, 0))
        self.assertGreaterEqual(sb["remote_misses"], 2)  # triton:k:missing, nobody
        with self.subTest(check="status remote_hits counts the front's tier hits"):
            self.assertEqual(sb["remote_hits"], 2)

    def test_overwrite_on_b_reaches_a_fresh_node(self):
        a, b = self.start_pair()
        ra, rb = self.client(a), self.client(b)
        self.assertTrue(ra.set("shared", b"one"))
        self.wait_remote_writes(a, 1)
        self.assertEqual(rb.get("shared"), b"one")
        self.assertTrue(rb.set("shared", b"two"))
        wait_until(lambda: self.status(b)["remote_writes"] >= 1, "node b's write")
        # A third node with an empty store sees the newest value.
        c = self.start_node("c", remote=self.tier_url)
        self.assertEqual(self.client(c).get("shared"), b"two")

    def test_expired_value_misses_through_the_tier(self):
        a, b = self.start_pair()
        ra, rb = self.client(a), self.client(b)
        self.assertTrue(ra.set("short", b"soon gone", px=400))
        self.wait_remote_writes(a, 1)
        wait_until(lambda: ra.get("short") is None, "the key to expire on node a")
        self.assertIsNone(rb.get("short"))  # the packed entry carries expires_ms
        self.assertEqual(rb.exists("short"), 0)

    def test_del_is_not_undone_by_the_tier(self):
        """DEL through A's front removes the key for A's clients: a later GET on A
        must not fetch the old value back from the cluster tier."""
        a, _ = self.start_pair()
        ra = self.client(a)
        self.assertTrue(ra.set("gone", b"old"))
        self.wait_remote_writes(a, 1)
        self.assertEqual(ra.delete("gone"), 1)
        self.assertIsNone(ra.get("gone"))
        self.assertEqual(ra.exists("gone"), 0)


if __name__ == "__main__":
    main()
