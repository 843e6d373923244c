"""Pool sessions (ipc/PROTOCOL.md, "Pool sessions") against a real service,
with raw frames: what a malformed or misplaced pool frame gets, and that a
job the pool cannot run comes back "failed" with the reason instead of
hanging or being lost. The torch suite (tests/torch/worker_pool_test.py)
covers real ranks and real workers."""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from harness import (E_PROTOCOL, T_HELLO, T_HELLO_OK, ServiceCase, frame, hello_payload,  # noqa: E402
                     main, raw_connect, read_reply)

T_POOL_OPEN, T_POOL_OPENED, T_POOL_SUBMIT, T_POOL_RESULT = 12, 13, 14, 15
E_INVALID_ARGUMENT = 0


def s(b):
    return struct.pack("<I", len(b)) + b


def pool_open(python, cwd, env=(), args=(), rank=-1):
    return (s(python.encode()) + s(cwd.encode()) + struct.pack("<I", len(env)) + b"".join(s(e.encode()) for e in env)
            + struct.pack("<I", len(args)) + b"".join(s(a.encode()) for a in args) + struct.pack("<i", rank))


def submit(job_id, key, payload):
    return struct.pack("<Q", job_id) + s(key) + s(payload)


class PoolSessionTest(ServiceCase):
    def greeted(self):
        c = raw_connect(self.sock)
        c.sendall(frame(T_HELLO, hello_payload()))
        self.assertEqual(read_reply(c)[0], T_HELLO_OK)
        return c

    def test_misplaced_and_malformed_pool_frames(self):
        self.start_service(jobs=2)
        c = self.greeted()
        c.sendall(frame(T_POOL_SUBMIT, submit(1, b"k", b"job")))
        self.assertEqual(read_reply(c), ("error", (E_PROTOCOL, "pool-submit before pool-open")))
        self.assertEqual(read_reply(c)[0], "eof")

        c = self.greeted()
        c.sendall(frame(T_POOL_OPEN, pool_open("python3", "/")))
        kind, (code, message) = read_reply(c)
        self.assertEqual((kind, code), ("error", E_PROTOCOL))
        self.assertIn("'python' is not an absolute path", message)

        c = self.greeted()
        c.sendall(frame(T_POOL_OPEN, pool_open("/nonexistent/bin/python", "/")))
        kind, (code, message) = read_reply(c)
        self.assertEqual((kind, code), ("error", E_INVALID_ARGUMENT))
        self.assertIn("/nonexistent/bin/python", message)

        c = self.greeted()
        c.sendall(frame(T_POOL_OPEN, pool_open("/usr/bin/python3", "/", args=["-c", "import os"])))
        kind, (code, message) = read_reply(c)
        self.assertEqual((kind, code), ("error", E_PROTOCOL))
        self.assertIn("--name=value", message)

    def test_a_job_the_pool_cannot_run_fails_with_the_reason(self):
        """Debian's python3 has no torch: the worker cannot start, and the
        job is answered "failed" with why (the rank then runs it in its own
        pool); nothing stays busy."""
        self.start_service(jobs=2)
        c = self.greeted()
        c.sendall(frame(T_POOL_OPEN, pool_open("/usr/bin/python3", self.work, env=["PATH=/usr/bin:/bin"])))
        kind, payload = read_reply(c)
        self.assertEqual(kind, T_POOL_OPENED)
        self.assertEqual(struct.unpack("<I", payload)[0], 2)
        c.sendall(frame(T_POOL_SUBMIT, submit(7, b"k", b"\x80\x05N.")))
        kind, payload = read_reply(c)
        self.assertEqual(kind, T_POOL_RESULT, payload)
        (job_id,) = struct.unpack("<Q", payload[:8])
        self.assertEqual((job_id, payload[8]), (7, 1), payload)  # status 1: failed
        self.assertIn(b"did not start", payload)
        self.wait_status(lambda st: st["worker_pool"]["busy"] == 0 and st["worker_pool"]["failed"] == 1,
                         "the failed job to be counted")

    def test_a_job_id_used_twice_is_a_protocol_error(self):
        self.start_service(jobs=2)
        c = self.greeted()
        c.sendall(frame(T_POOL_OPEN, pool_open("/usr/bin/python3", self.work, env=["PATH=/usr/bin:/bin"])))
        self.assertEqual(read_reply(c)[0], T_POOL_OPENED)
        # Both in one write: the service reads them in one pass, before the
        # first job can have an answer.
        c.sendall(frame(T_POOL_SUBMIT, submit(7, b"k", b"x")) + frame(T_POOL_SUBMIT, submit(7, b"k", b"x")))
        self.assertEqual(read_reply(c), ("error", (E_PROTOCOL, "pool-submit reuses a job id")))
        self.assertEqual(read_reply(c)[0], "eof")
    def test_a_rank_in_another_mount_namespace_keeps_its_own_pool(self):
        """Its python and paths are of its own view: the session is refused."""
        import shutil
        import subprocess
        if shutil.which("unshare") is None or os.geteuid() != 0:
            self.skipTest("needs unshare(1) and root for a private mount namespace")
        self.start_service(jobs=2)
        client = (
            "import socket, struct, sys\n"
            f"sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r} + '/support')\n"
            "from harness import frame, hello_payload, read_reply\n"
            f"from service_pool_session_test import pool_open\n"
            "c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1])\n"
            "c.sendall(frame(1, hello_payload())); read_reply(c)\n"
            "c.sendall(frame(12, pool_open('/usr/bin/python3', '/')))\n"
            "print(read_reply(c))\n")
        out = subprocess.run(["unshare", "-m", "/usr/bin/python3", "-c", client, self.sock],
                             cwd=os.path.dirname(os.path.abspath(__file__)), capture_output=True, text=True,
                             timeout=60)
        if out.returncode != 0 and "unshare" in out.stderr:
            self.skipTest(f"unshare -m is not permitted here: {out.stderr.strip()}")
        self.assertIn("sees another filesystem", out.stdout, out.stdout + out.stderr)
        self.assertIn("'error', (4,", out.stdout)


if __name__ == "__main__":
    main()
