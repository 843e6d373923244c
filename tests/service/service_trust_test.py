"""Who trusts whom (docs/threat-model.md, issue 12): clients refuse a socket
directory or a listener that is not theirs and compile locally instead; the
service deletes only what it created, keeps its log private, counts open
Redis-front connections as activity; the cluster tier is signed by default."""
import os
import shutil
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from harness import BIN, CCPOOL, ServiceCase, main, serve_pids, wait_until  # noqa: E402

SETPRIV = "/usr/bin/setpriv"
OTHER_UID = 65534
SHIM = os.path.join(BIN, "..", "lib", "libccpool-shim.so")

# Listens on an inherited, already bound socket (fd argv[2]) as whatever uid
# runs it, accepts, and records how many bytes each connection sent.
IMPOSTOR = r"""
import socket, sys
s = socket.socket(fileno=int(sys.argv[2]))
s.listen(16)
with open(sys.argv[1], "ab", buffering=0) as log:
    log.write(b"listening\n")
    while True:
        c, _ = s.accept()
        c.settimeout(5)
        data = b""
        try:
            while True:
                chunk = c.recv(65536)
                if not chunk:
                    break
                data += chunk
        except OSError:
            pass
        log.write(b"conn %d\n" % len(data))
        c.close()
"""


class ServiceTrustTest(ServiceCase):
    def need_root_and_setpriv(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to act as a second uid (chown, setpriv)")
        if not os.access(SETPRIV, os.X_OK):
            self.skipTest("setpriv (util-linux) is not installed")

    def need_gcc(self):
        if not shutil.which("gcc", path=self.env["PATH"]):
            self.skipTest("gcc is not installed")

    def source(self):
        return self.write("work/k.c", "int k(int x) { return x * 7; }\n")

    def direct_object(self):
        subprocess.run(["gcc", "-c", "k.c", "-o", "direct.o"], cwd=self.work, env=self.env, check=True)
        with open(os.path.join(self.work, "direct.o"), "rb") as f:
            return f.read()

    def assert_compiled_locally_with_refusal(self, sock, named):
        """`ccpool exec -- gcc` on `sock`: the object is right, stderr names `named`."""
        self.source()
        expected = self.direct_object()
        env = dict(self.env, CCPOOL_SOCKET=sock)
        env.pop("CCPOOL_SERVICE_BINARY", None)
        r = subprocess.run([CCPOOL, "exec", "--", "gcc", "-c", "k.c", "-o", "k.o"], cwd=self.work,
                           env=env, capture_output=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(self.work, "k.o"), "rb") as f:
            self.assertEqual(f.read(), expected)
        err = r.stderr.decode()
        self.assertIn(named, err)
        self.assertRegex(err, r"refus")
        self.assertIn("locally", err)
        self.assertEqual(serve_pids(sock), [], "a service was started on a refused socket")
        return err

    # --- clients check the service ------------------------------------------
    def test_foreign_socket_dir_refused(self):
        self.need_root_and_setpriv()
        self.need_gcc()
        foreign = self.path("foreign")
        os.mkdir(foreign, 0o700)
        os.chown(foreign, OTHER_UID, OTHER_UID)
        sock = os.path.join(foreign, "sock")
        err = self.assert_compiled_locally_with_refusal(sock, foreign)
        self.assertIn(f"uid {OTHER_UID}", err)
        self.assertEqual(os.listdir(foreign), [], "the client wrote into a foreign directory")
        r = subprocess.run([CCPOOL, "status", "--socket", sock], env=self.env, capture_output=True,
                           timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(foreign, r.stderr.decode())

    def test_loose_socket_dir_refused(self):
        self.need_gcc()
        loose = self.path("loose")
        os.mkdir(loose)
        os.chmod(loose, 0o777)
        err = self.assert_compiled_locally_with_refusal(os.path.join(loose, "sock"), loose)
        self.assertIn("chmod 700", err)
        self.assertEqual(os.listdir(loose), [])

    def start_impostor(self, sock):
        """A listener on `sock` (in a directory of ours) run by another uid."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(sock)  # bound by us, listen()ed by the other uid: SO_PEERCRED names it
        log = self.path("impostor.log")
        open(log, "wb").close()
        os.chmod(log, 0o666)
        os.chmod(self.dir, 0o755)
        p = subprocess.Popen([SETPRIV, f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}", "--clear-groups",
                              "/usr/bin/python3", "-c", IMPOSTOR, log, str(listener.fileno())],
                             pass_fds=[listener.fileno()], stdin=subprocess.DEVNULL)
        listener.close()
        self.clients.append(p)
        wait_until(lambda: b"listening" in open(log, "rb").read(), "the impostor to listen")
        return log

    def test_foreign_listener_refused(self):
        self.need_root_and_setpriv()
        self.need_gcc()
        os.makedirs(self.run_dir, mode=0o700)
        log = self.start_impostor(self.sock)
        self.assert_compiled_locally_with_refusal(self.sock, self.sock)
        # `ccpool run` pings before it starts the job: refused too, nothing run.
        marker = self.path("ran")
        env = dict(self.env)
        r = subprocess.run([CCPOOL, "run", "--socket", self.sock, "--", "/usr/bin/touch", marker],
                           env=env, capture_output=True, timeout=120)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(self.sock, r.stderr.decode())
        self.assertFalse(os.path.exists(marker))
        # The impostor got connections, but not one byte from any of them.
        conns = [l for l in open(log, "rb").read().split(b"\n") if l.startswith(b"conn")]
        self.assertGreaterEqual(len(conns), 1)
        self.assertEqual(set(conns), {b"conn 0"})

    def test_frameworks_cache_checks_the_resp_socket(self):
        """Inductor's redis-py checks nothing, so `ccpool run --frameworks-cache`
        checks resp.sock before it points the job there."""
        self.need_root_and_setpriv()
        self.start_service()  # --no-resp: the impostor takes resp.sock
        resp_sock = os.path.join(self.run_dir, "resp.sock")
        self.start_impostor(resp_sock)
        marker = self.path("ran")
        r = subprocess.run([CCPOOL, "run", "--frameworks-cache", "--socket", self.sock, "--",
                            "/usr/bin/touch", marker], env=self.env, capture_output=True, timeout=120)
        self.assertNotEqual(r.returncode, 0)
        err = r.stderr.decode()
        self.assertIn(resp_sock, err)
        self.assertIn(f"uid {OTHER_UID}", err)
        self.assertFalse(os.path.exists(marker))

    def test_cleaned_environment_reaches_own_service(self):
        """A process with the shim execs gcc with env={PATH} only: the socket the
        process started with still reaches its service, not the /tmp default."""
        self.need_gcc()
        if not os.path.exists(SHIM):
            self.fail(f"the shim is not built: {SHIM}")
        self.start_service()
        self.source()
        before = self.status()["requests"]
        script = ("import subprocess, sys; sys.exit(subprocess.run(['gcc', '-c', 'k.c', '-o', 'k.o'], "
                  "env={'PATH': '/usr/bin:/bin', 'CCPOOL_NO_AUTOSTART': '1'}).returncode)")
        env = dict(self.env, LD_PRELOAD=SHIM)
        env.pop("XDG_RUNTIME_DIR", None)
        r = subprocess.run(["/usr/bin/python3", "-c", script], cwd=self.work, env=env,
                           capture_output=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.status()["requests"], before + 1)
        self.assertTrue(os.path.exists(os.path.join(self.work, "k.o")))

    # --- the service deletes only what it created -------------------------
    def test_work_dir_is_its_own(self):
        os.makedirs(self.run_dir, mode=0o700)
        keep = self.write("run/work/keep", "mine\n")  # the user's, next to the socket
        self.start_service()
        rc, out, _ = self.run_exec(["/bin/echo", "hi"])
        self.assertEqual((rc, out), (0, b"hi\n"))
        self.assertTrue(os.path.isfile(os.path.join(self.run_dir, "ccpool-work", ".ccpool-work")))
        subprocess.run([CCPOOL, "stop", "--socket", self.sock], env=self.env, check=True, timeout=60)
        self.service.wait(60)
        self.assertEqual(self.read("run/work/keep"), "mine\n", keep)
        self.assertFalse(os.path.exists(os.path.join(self.run_dir, "ccpool-work")))
        # A ccpool-work it did not mark is refused, never emptied.
        mine = self.write("run/ccpool-work/notes", "mine too\n")
        r = subprocess.run([CCPOOL, "serve", "--foreground", "--no-resp", "--socket", self.sock,
                            "--dir", self.store], env=self.env, capture_output=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(os.path.join(self.run_dir, "ccpool-work"), r.stderr.decode())
        self.assertEqual(self.read("run/ccpool-work/notes"), "mine too\n", mine)

    # --- file modes ----------------------------------------------------------
    def test_log_is_private_in_an_existing_0755_dir(self):
        os.makedirs(self.run_dir)
        os.chmod(self.run_dir, 0o755)
        self.start_service()
        self.status()
        st = os.stat(os.path.join(self.run_dir, "ccpool.log"))
        self.assertEqual(st.st_mode & 0o777, 0o600)
        # The Redis password file must be private too.
        pw = self.write("pw", "secret\n", 0o644)
        r = subprocess.run([CCPOOL, "serve", "--foreground", "--socket", self.path("r2", "sock"),
                            "--dir", self.store, "--resp-password-file", pw],
                           env=self.env, capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(f"chmod 600 {pw}", r.stderr.decode())

    # --- idle exit --------------------------------------------------------------
    def test_open_front_connection_keeps_the_service(self):
        cmd = [CCPOOL, "serve", "--foreground", "--socket", self.sock, "--dir", self.store,
               "--idle-timeout", "1s"]
        log = open(self.path("serve.out"), "wb")
        self.service = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        resp_sock = os.path.join(self.run_dir, "resp.sock")
        wait_until(lambda: os.path.exists(resp_sock), "the Redis front's socket")
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(resp_sock)
        c.sendall(b"PING\r\n")
        self.assertEqual(c.recv(64), b"+PONG\r\n")
        # Three idle timeouts with the connection open: still serving.
        time.sleep(3.5)
        self.assertIsNone(self.service.poll(), "the service exited under an open front connection")
        c.sendall(b"PING\r\n")
        self.assertEqual(c.recv(64), b"+PONG\r\n")
        c.close()
        wait_until(lambda: self.service.poll() is not None, "the idle service to exit")
        self.assertEqual(self.service.returncode, 0)

    # --- the cluster tier is signed by default -----------------------------
    def test_remote_requires_a_key_file(self):
        serve = [CCPOOL, "serve", "--foreground", "--no-resp", "--socket", self.sock, "--dir", self.store,
                 "--remote", "redis://127.0.0.1:1"]
        r = subprocess.run(serve, env=self.env, capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        err = r.stderr.decode()
        self.assertIn("--remote-key-file", err)
        self.assertIn("--remote-unsigned", err)
        key = self.write("cluster.key", "k" * 32, 0o644)
        r = subprocess.run(serve + ["--remote-key-file", key], env=self.env, capture_output=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(f"chmod 600 {key}", r.stderr.decode())
        # The explicit opt-out starts (Redis need not be up) and says so in its log.
        self.start_service("--remote", "redis://127.0.0.1:1", "--remote-unsigned")
        self.assertIn("UNSIGNED CLUSTER TIER", self.read("run/ccpool.log"))


if __name__ == "__main__":
    main()
