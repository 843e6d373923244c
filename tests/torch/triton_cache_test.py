"""Issue 14: Triton's own remote cache (RemoteCacheManager +
RedisRemoteCacheBackend) pointed at the service's Redis-protocol front.
Triton's backend speaks TCP only, so the front also listens on a loopback
port (`ccpool run --frameworks-cache --resp-port P`). Process A compiles;
process B, with an empty TRITON_CACHE_DIR, gets every kernel from the front
and never runs ptxas.

Triton 3.7.1's RedisRemoteCacheBackend itself cannot be constructed (it reads
knobs.cache.redis; the knobs are knobs.redis), so `ccpool run
--frameworks-cache` leaves TRITON_CACHE_MANAGER unset: the first case shows a
Triton compile still works under it. The others opt in as a user would,
with Triton's RemoteCacheManager and support/triton_redis_backend.py,
Triton's backend with that lookup fixed.
"""
import json
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from torch_case import TRITON_KERNELS, VENV_PY, TorchCase, main  # noqa: E402

KERNELS = 3
FIXED_BACKEND = "triton_redis_backend:RedisBackend"  # support/, on PYTHONPATH


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TritonRemoteCacheTest(TorchCase):
    def triton(self, out_dir, cache_dir, port, backend=FIXED_BACKEND, protocol=None):
        env = {"TRITON_CACHE_DIR": cache_dir}
        if protocol:
            env["CCPOOL_TEST_REDIS_PROTOCOL"] = str(protocol)
        if backend:  # the user opts in to Triton's remote cache (ccpool leaves it unset)
            env["TRITON_CACHE_MANAGER"] = "triton.runtime.cache:RemoteCacheManager"
            env["TRITON_REMOTE_CACHE_BACKEND"] = backend
        p = self.ccpool_run(VENV_PY, TRITON_KERNELS, "--out-dir", out_dir,
                            flags=("--frameworks-cache", "--resp-port", str(port)), env=env)
        out, _ = self.run_ok(p)
        return json.loads(out.strip().splitlines()[-1])

    def test_frameworks_cache_keeps_triton_working(self):
        """Under `ccpool run --frameworks-cache` with Triton's own backend (what
        ccpool sets), a Triton compile must still work."""
        a = self.triton(self.wpath("a"), self.path("tc-a"), free_port(), backend=None)
        self.assertEqual(len(a), KERNELS)

    def ptxas_builds(self):
        return [e["argv"] for e in self.execs()
                if os.path.basename(e["argv"][0]) == "ptxas" and "--version" not in e["argv"]]

    def test_kernel_from_the_front(self):
        """redis-py as pip installs it (8.x: HELLO 3)."""
        self.check_kernel_from_the_front(None)

    def test_kernel_from_the_front_resp2(self):
        """The client held to RESP2."""
        self.check_kernel_from_the_front(2)

    def check_kernel_from_the_front(self, protocol):
        port = free_port()
        a = self.triton(self.wpath("a"), self.path("tc-a"), port, protocol=protocol)
        self.assertEqual(len(a), KERNELS)
        self.assertEqual(len(self.ptxas_builds()), KERNELS)
        s = self.status()
        self.assertEqual(s["resp_port"], port, "the service did not open the TCP front")
        writes = s["resp_commands"]
        self.assertGreater(writes, 0, "Triton never reached the front")
        os.remove(self.exec_log)
        b = self.triton(self.wpath("b"), self.path("tc-b"), port, protocol=protocol)
        self.assertEqual(b, a)
        self.assertEqual(self.ptxas_builds(), [], "process B compiled instead of reading the front")
        print(f"triton remote cache: front commands {writes} after A, "
              f"{self.status()['resp_commands']} after B", file=sys.stderr)


if __name__ == "__main__":
    main()
