"""systemd socket activation with real parts (issue 15): Debian's
`systemd-socket-activate` starts `ccpool serve` on the first connection and a
compile through `ccpool exec` succeeds and is counted; after an idle exit the
next connection on the same listening socket starts a new instance (what the
socket unit does); journal-stream logging carries priorities. Exit 125 when
systemd-socket-activate or gcc is absent."""
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "service", "support"))
from harness import CCPOOL, ServiceCase, end_process, main, pid_gone, wait_until  # noqa: E402

SOURCE = "int answer(void) { return 42; }\n"


def exe_of(pid):
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


class SystemdTest(ServiceCase):
    def setUp(self):
        super().setUp()
        os.makedirs(self.run_dir, mode=0o700)
        self.write("work/k.c", SOURCE)
        self.extra = []

    def tearDown(self):
        for p in self.extra:
            end_process(p)
        super().tearDown()

    def serve_args(self, *more):
        return [CCPOOL, "serve", "--socket", self.sock, "--dir", self.store, "--no-resp", "--jobs", "2", *more]

    def compile_ok(self):
        rc, out, err = self.run_exec(["gcc", "-c", "k.c", "-o", "k.o"])
        self.assertEqual(rc, 0, err)

    def test_systemd_socket_activate_starts_on_first_connection(self):
        tool = shutil.which("systemd-socket-activate")
        if tool is None:
            self.skipTest("systemd-socket-activate is not installed (Debian package systemd)")
        if shutil.which("gcc") is None:
            self.skipTest("gcc is not installed")
        out = open(self.path("activate.out"), "wb")
        activator = subprocess.Popen([tool, "-l", self.sock, *self.serve_args("--idle-timeout", "10m")],
                                     env=self.env, stdout=out, stderr=subprocess.STDOUT, cwd=self.dir)
        self.extra.append(activator)
        wait_until(lambda: os.path.exists(self.sock), "systemd-socket-activate to listen")
        # Nothing runs ccpool until a client connects.
        self.assertEqual(exe_of(activator.pid), os.path.realpath(tool))
        self.assertFalse(os.path.exists(os.path.join(self.run_dir, "serve.pid")))

        env = dict(self.env, CCPOOL_NO_AUTOSTART="1")  # a fallback must not hide a failed activation
        rc, _, err = self.run_exec(["gcc", "-c", "k.c", "-o", "k.o"], env=env)
        self.assertEqual(rc, 0, err)
        s = self.status()
        self.assertEqual(s["pid"], activator.pid, "the activated process is the service")
        self.assertEqual((s["requests"], s["misses"], s["executions"], s["fallbacks"]), (1, 1, 1, 0))
        rc, _, err = self.run_exec(["gcc", "-c", "k.c", "-o", "k.o"], env=env)
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.status()["hits"], 1)
        log = self.read("run/ccpool.log")
        self.assertIn("socket-activated", log)

        activator.send_signal(signal.SIGTERM)
        self.assertEqual(activator.wait(60), 0)
        self.assertTrue(os.path.exists(self.sock), "systemd's socket is not the service's to unlink")

    def test_idle_exit_then_reactivation_on_the_same_socket(self):
        """What the .socket unit does: keep listening, start the service when a
        connection is pending, again after the service's idle exit."""
        if shutil.which("gcc") is None:
            self.skipTest("gcc is not installed")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.sock)
        listener.listen(64)
        listen_fd = listener.fileno()
        env = {k: v for k, v in self.env.items()}
        env["LISTEN_FDS"] = "1"
        env["CCPOOL_NO_AUTOSTART"] = "1"

        def activate():
            # LISTEN_PID must name the service: set by the shell that execs it.
            cmd = ["/bin/sh", "-c", 'LISTEN_PID=$$ exec "$@"', "sh",
                   *self.serve_args("--idle-timeout", "1s")]
            p = subprocess.Popen(cmd, env=env, cwd=self.dir, close_fds=False,
                                 preexec_fn=lambda: os.dup2(listen_fd, 3),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.extra.append(p)
            return p

        pids = []
        for round_ in range(2):
            client = self.spawn(["gcc", "-c", "k.c", "-o", "k.o"], env={"CCPOOL_NO_AUTOSTART": "1"})
            readable, _, _ = select.select([listener], [], [], 60)
            self.assertTrue(readable, "the client never connected")
            service = activate()
            rc, _, err = self.finish([client])[0]
            self.assertEqual(rc, 0, err)
            self.assertEqual(service.wait(60), 0, "an idle exit is a clean exit")
            pids.append(service.pid)
            self.assertTrue(os.path.exists(self.sock), "the inherited socket must survive the idle exit")
        self.assertNotEqual(pids[0], pids[1])
        log = self.read("run/ccpool.log")
        self.assertEqual(log.count("idle for"), 2, log)
        self.assertEqual(len(self.lines("run/fallbacks.log")), 0, "no client ran its compiler itself")
        listener.close()

    def test_wrong_socket_refused_with_both_paths(self):
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        other = os.path.join(self.run_dir, "other.sock")
        listener.bind(other)
        listener.listen(4)
        listen_fd = listener.fileno()
        env = dict(self.env, LISTEN_FDS="1")
        r = subprocess.run(["/bin/sh", "-c", 'LISTEN_PID=$$ exec "$@"', "sh", *self.serve_args()],
                           env=env, cwd=self.dir, close_fds=False, capture_output=True, timeout=60,
                           preexec_fn=lambda: os.dup2(listen_fd, 3))
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"systemd passed a socket bound to '{other}' but the service's socket is '{self.sock}'",
                      r.stderr.decode())
        listener.close()

    def test_system_unit_serves_its_user(self):
        """docs/deploy.md's system unit per user (issue 23): systemd (root) owns
        the listening socket (ListenStream=/run/ccpool-UID/sock, SocketUser=,
        SocketMode=0600), the directory comes from tmpfiles.d (`d ... 0700 USER
        USER`), and the service runs with User=. So SO_PEERCRED on the socket
        names root, not the user: the user's clients must still be served
        rather than fall back to local compiles. Here this process plays
        systemd's part with the same calls, for uid 65534."""
        if os.geteuid() != 0:
            self.skipTest("playing systemd's part (a root-owned listener, a service started with User=) needs root")
        for tool in ("setpriv", "gcc"):
            if shutil.which(tool) is None:
                self.skipTest(f"{tool} is not installed")
        uid = gid = 65534
        as_user = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]
        os.chmod(self.dir, 0o755)
        run_dir = self.path("run-65534")  # d /run/ccpool-65534 0700 nobody nogroup -
        store = self.path("store-65534")
        work = self.path("work-65534")
        for d in (run_dir, store, work):
            os.makedirs(d, mode=0o700)
            os.chown(d, uid, gid)
        with open(os.path.join(work, "k.c"), "w") as f:
            f.write(SOURCE)
        os.chown(os.path.join(work, "k.c"), uid, gid)
        sock = os.path.join(run_dir, "sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # systemd (pid 1, root) binds and listens
        listener.bind(sock)
        os.chown(sock, uid, gid)  # SocketUser=
        os.chmod(sock, 0o600)     # SocketMode=0600
        listener.listen(64)
        listen_fd = listener.fileno()
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": work, "CCPOOL_NO_AUTOSTART": "1"}
        service = subprocess.Popen(
            [*as_user, "/bin/sh", "-c", 'LISTEN_PID=$$ exec "$@"', "sh",
             CCPOOL, "serve", "--socket", sock, "--dir", store, "--no-resp", "--jobs", "2", "--idle-timeout", "10m"],
            env=dict(env, LISTEN_FDS="1"), cwd=work, close_fds=False,
            preexec_fn=lambda: (os.dup2(listen_fd, 3), os.set_inheritable(3, True)),
            stdout=open(self.path("serve.out"), "wb"), stderr=subprocess.STDOUT)
        self.extra.append(service)
        listener.close()

        def user_run(*args):
            r = subprocess.run([*as_user, CCPOOL, *args], env=env, cwd=work, capture_output=True, timeout=120)
            return r.returncode, r.stdout.decode(), r.stderr.decode()

        def serving():
            if service.poll() is not None:
                raise AssertionError(f"ccpool serve exited {service.returncode}: {self.read('serve.out', '')}")
            return "serving on" in self.read("serve.out", "")
        wait_until(serving, "the service to serve")
        rc, _, err = user_run("exec", "--socket", sock, "--", "gcc", "-c", "k.c", "-o", "k.o")
        self.assertEqual(rc, 0, err)
        self.assertNotIn("refusing", err)
        rc, out, err = user_run("status", "--socket", sock, "--json")
        self.assertEqual(rc, 0, f"the user cannot reach the service: {err}")
        s = json.loads(out)
        self.assertEqual((s["requests"], s["misses"], s["executions"], s["fallbacks"]), (1, 1, 1, 0))
        self.assertEqual(os.stat(os.path.join(work, "k.o")).st_uid, uid)
        service.send_signal(signal.SIGTERM)
        self.assertEqual(service.wait(60), 0)

    def test_journal_stream_lines_carry_priorities(self):
        """With JOURNAL_STREAM naming its stderr, every log line is "<N>text"."""
        err_path = self.path("journal.err")
        with open(err_path, "wb") as err:
            st = os.fstat(err.fileno())
            env = dict(self.env, JOURNAL_STREAM=f"{st.st_dev}:{st.st_ino}", CCPOOL_LOG="debug")
            service = subprocess.Popen([*self.serve_args("--foreground", "--idle-timeout", "10m")], env=env,
                                       stdout=subprocess.DEVNULL, stderr=err, cwd=self.dir)
            self.extra.append(service)
            wait_until(lambda: self.try_status() is not None, "the service to answer")
            service.send_signal(signal.SIGTERM)
            self.assertEqual(service.wait(60), 0)
        lines = [l for l in open(err_path).read().split("\n") if l]
        self.assertTrue(lines)
        for l in lines:
            self.assertRegex(l, r"^<[2-7]>[^<\[]", "a journal line without its priority prefix")
        self.assertTrue(any(l.startswith("<6>serving on ") for l in lines), lines)


if __name__ == "__main__":
    main()
