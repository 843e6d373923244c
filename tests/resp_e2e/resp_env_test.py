"""`ccpool env --frameworks-cache` and `ccpool run --frameworks-cache` (issue 8,
requirement 4): the Inductor and Triton remote-cache variables point at the
service's Redis front, a value the user set is kept, and a job started by
`ccpool run` reaches the front of the service that run started.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resp_harness import CCPOOL, HANG_GUARD_S, Node, RespCase, free_port, main  # noqa: E402
from service_fixture import stop_with_cli  # noqa: E402

FRAMEWORK_VARS = ("TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE", "TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE",
                  "TORCHINDUCTOR_REDIS_URL", "TRITON_CACHE_MANAGER", "TRITON_REMOTE_CACHE_BACKEND")
TRITON_TCP_VARS = ("TRITON_REDIS_HOST", "TRITON_REDIS_PORT")

# A job's use of the front, the way Inductor (from_url) and Triton (host, port) connect.
INDUCTOR_JOB = """
import os, redis
r = redis.Redis.from_url(os.environ["TORCHINDUCTOR_REDIS_URL"])
r.set("pt2:job::graph:c1", b'{"code": 1}', ex=600)
print(r.get("pt2:job::graph:c1").decode())
"""
TRITON_JOB = """
import os, redis
r = redis.Redis(host=os.environ["TRITON_REDIS_HOST"], port=int(os.environ["TRITON_REDIS_PORT"]))
r.set("triton:job:kernel.cubin", b"\\x7fELF")
print(r.mget(["triton:job:kernel.cubin", "triton:job:missing"]))
"""


class RespEnvTest(RespCase):

    def setUp(self):
        super().setUp()
        self.env.pop("CCPOOL_NO_AUTOSTART", None)
        # A node handle without a process: tearDown stops whatever `ccpool run`
        # auto-started on its socket.
        self.node = Node(self, "a")
        self.nodes.append(self.node)

    def tearDown(self):
        stop_with_cli(self.node.sock, self.env, timeout=HANG_GUARD_S)
        super().tearDown()

    def env_json(self, *args, extra_env=None):
        env = dict(self.env, **(extra_env or {}))
        r = subprocess.run([CCPOOL, "env", "--socket", self.node.sock, "--shell", "json", *args], env=env,
                           capture_output=True, timeout=HANG_GUARD_S)
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        return json.loads(r.stdout)

    def run_job(self, *args, extra_env=None):
        env = dict(self.env, **(extra_env or {}))
        return subprocess.run([CCPOOL, "run", "--socket", self.node.sock, "--dir", self.node.store, "--jobs", "2",
                               *args], env=env, capture_output=True, timeout=HANG_GUARD_S * 2)

    def expected_url(self):
        return f"unix://{self.node.resp_sock}"

    def test_env_json(self):
        plain = self.env_json()
        for name in FRAMEWORK_VARS + TRITON_TCP_VARS:
            self.assertNotIn(name, plain)  # only with --frameworks-cache
        env = self.env_json("--frameworks-cache")
        self.assertEqual(env["TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE"], "1")
        self.assertEqual(env["TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE"], "1")
        self.assertEqual(env["TORCHINDUCTOR_REDIS_URL"], self.expected_url())
        self.assertNotIn("TRITON_CACHE_MANAGER", env)  # left to the user (README: Triton 3.7.1)
        self.assertNotIn("TRITON_REMOTE_CACHE_BACKEND", env)
        for name in TRITON_TCP_VARS:
            self.assertNotIn(name, env)  # Triton takes only host and port: no TCP front, no variables
        tcp = self.env_json("--frameworks-cache", "--resp-port", "16399")
        self.assertEqual((tcp["TRITON_REDIS_HOST"], tcp["TRITON_REDIS_PORT"]), ("127.0.0.1", "16399"))
        self.assertEqual(tcp["TORCHINDUCTOR_REDIS_URL"], self.expected_url())

    def test_env_keeps_user_values(self):
        user = {"TORCHINDUCTOR_REDIS_URL": "redis://cache.example:6379", "TRITON_REDIS_PORT": "7000",
                "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE": "0"}
        env = self.env_json("--frameworks-cache", "--resp-port", "16399", extra_env=user)
        for name, value in user.items():
            self.assertEqual(env[name], value)
        self.assertEqual(env["TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE"], "1")
        self.assertEqual(env["TRITON_REDIS_HOST"], "127.0.0.1")

    def test_run_sets_variables_and_job_reaches_front(self):
        self.require_redis_py()
        r = self.run_job("--frameworks-cache", "--", "/usr/bin/env")
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        job_env = dict(line.split("=", 1) for line in r.stdout.decode().splitlines() if "=" in line)
        self.assertEqual(job_env["TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE"], "1")
        self.assertEqual(job_env["TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE"], "1")
        self.assertEqual(job_env["TORCHINDUCTOR_REDIS_URL"], self.expected_url())
        self.assertNotIn("TRITON_CACHE_MANAGER", job_env)
        self.assertNotIn("TRITON_REMOTE_CACHE_BACKEND", job_env)
        for name in TRITON_TCP_VARS:
            self.assertNotIn(name, job_env)
        # The service run started serves the front the URL names.
        self.assertTrue(os.path.exists(self.node.resp_sock))
        r = self.run_job("--frameworks-cache", "--", "/usr/bin/python3", "-c", INDUCTOR_JOB)
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        self.assertEqual(r.stdout, b'{"code": 1}\n')
        entries = self.cache(self.node, "ls")
        self.assertEqual([(e["label"], e["kind"]) for e in entries], [("pt2:job::graph:c1", "blob")])

    def test_run_keeps_user_values(self):
        user = {"TORCHINDUCTOR_REDIS_URL": "redis://cache.example:6379", "TRITON_CACHE_MANAGER": "mine:Manager"}
        r = self.run_job("--frameworks-cache", "--", "/usr/bin/env", extra_env=user)
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        job_env = dict(line.split("=", 1) for line in r.stdout.decode().splitlines() if "=" in line)
        for name, value in user.items():
            self.assertEqual(job_env[name], value)
        self.assertEqual(job_env["TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE"], "1")

    def test_run_resp_port_reaches_front(self):
        """`ccpool run --frameworks-cache --resp-port P` gives Triton
        TRITON_REDIS_HOST/PORT; the service run starts must listen there."""
        self.require_redis_py()
        port = free_port()
        r = self.run_job("--frameworks-cache", "--resp-port", str(port), "--", "/usr/bin/python3", "-c",
                         TRITON_JOB)
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        self.assertEqual(r.stdout, b"[b'\\x7fELF', None]\n")
        s = self.status(self.node)
        self.assertEqual(s["resp_port"], port)
        self.assertEqual([e["label"] for e in self.cache(self.node, "ls")], ["triton:job:kernel.cubin"])


if __name__ == "__main__":
    main()
