"""The CLI as a new user meets it (issue 15): sockets sharing a directory,
refusals, error texts, help texts and a store that does not exist yet."""
import json
import os
import re
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "service", "support"))
from harness import BIN, CCPOOL, ServiceCase, main, serve_pids, wait_until  # noqa: E402

CCPOOL_CLI = os.path.join(BIN, "ccpool-cli")


class CliPolishTest(ServiceCase):
    def cli(self, *args, env=None):
        return subprocess.run([CCPOOL, *args], env=env or self.env, capture_output=True, timeout=60,
                              cwd=self.dir)

    def serve_daemon(self, sock, store):
        return self.cli("serve", "--socket", sock, "--dir", store, "--no-resp", "--idle-timeout", "10m")

    def test_two_sockets_in_one_directory_each_get_their_own_service(self):
        os.makedirs(self.run_dir, mode=0o700)
        a, b = os.path.join(self.run_dir, "a.sock"), os.path.join(self.run_dir, "b.sock")
        try:
            r = self.serve_daemon(a, self.path("store-a"))
            self.assertEqual((r.returncode, r.stdout.decode()), (0, f"ccpool: serving on {a}\n"), r.stderr)
            r = self.serve_daemon(b, self.path("store-b"))
            self.assertEqual((r.returncode, r.stdout.decode()), (0, f"ccpool: serving on {b}\n"), r.stderr)
            pid_a = self.try_status(a)["pid"]
            pid_b = self.try_status(b)["pid"]
            self.assertNotEqual(pid_a, pid_b)
            self.assertEqual(serve_pids(a), [pid_a])
            self.assertEqual(serve_pids(b), [pid_b])
            # Each socket has its own state: lock, pid, log, work dir.
            for sock, pid in ((a, pid_a), (b, pid_b)):
                state = sock + ".d"
                self.assertEqual(open(os.path.join(state, "serve.pid")).read(), f"{pid}\n")
                self.assertTrue(os.path.exists(os.path.join(state, "serve.lock")))
                self.assertEqual(os.stat(state).st_mode & 0o777, 0o700)
            # A refusal names the socket that is taken and its pid, and fails.
            r = self.serve_daemon(a, self.path("store-a"))
            self.assertEqual(r.returncode, 1)
            self.assertEqual(r.stdout, b"")
            self.assertIn(f"a service is already running on {a} (pid {pid_a})", r.stderr.decode())
        finally:
            for sock in (a, b):
                self.cli("stop", "--socket", sock)

    def test_second_serve_on_the_same_socket_exits_nonzero(self):
        service = self.start_service()
        r = self.cli("serve", "--socket", self.sock, "--dir", self.store)
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"a service is already running on {self.sock} (pid {service.pid})", r.stderr.decode())
        self.assertEqual(serve_pids(self.sock), [service.pid])

    def test_no_service_error_says_start_one_once(self):
        missing = self.path("nowhere", "sock")
        for cmd in (["status", "--socket", missing], ["stop", "--socket", missing]):
            r = self.cli(*cmd)
            self.assertEqual(r.returncode, 1)
            err = r.stderr.decode()
            self.assertEqual(err.count("start one with"), 1, err)
            self.assertEqual(err.count("ccpool:"), 1, err)
            self.assertIn(missing, err)

    def test_help_texts_share_one_style(self):
        """Every command and option description starts with a capital letter
        and ends without a period, in every command's --help."""
        commands = [[], ["serve"], ["status"], ["stop"], ["exec"], ["run"], ["env"], ["cache"]]
        for sub in ["stats", "ls", "show", "cat", "rm", "clear", "gc", "verify", "export", "import"]:
            commands.append(["cache", sub])
        for cmd in commands:
            r = subprocess.run([CCPOOL_CLI, *cmd, "--help"], capture_output=True, timeout=60)
            self.assertEqual(r.returncode, 0, (cmd, r.stderr))
            text = r.stdout.decode()
            lines = text.split("\n")
            # The description line of the command itself (first line), then the
            # descriptions after an option or subcommand name.
            descriptions = [lines[0]] if cmd else []
            for line in lines:
                m = re.match(r"^  (\S.*?)\s{2,}(\S.*)$", line)
                if m and not m.group(2).startswith("Excludes"):
                    descriptions.append(m.group(2))
            for d in descriptions:
                self.assertRegex(d, r"^[A-Z]", f"'ccpool {' '.join(cmd)} --help': '{d}' starts in lower case")
                self.assertFalse(d.endswith(".") and not d.endswith("..."), f"'ccpool {' '.join(cmd)} --help': '{d}' ends with a period")

    def test_shared_socket_directory_gets_useful_advice(self):
        shared = self.path("shared")
        os.makedirs(shared)
        os.chmod(shared, 0o1777)  # like /tmp: world-writable, sticky
        r = self.cli("serve", "--socket", os.path.join(shared, "sock"), "--dir", self.store)
        self.assertEqual(r.returncode, 1)
        err = r.stderr.decode()
        self.assertNotIn("chmod", err, "never advise opening up or locking down a shared directory")
        self.assertIn(f"--socket {shared}/ccpool-{os.geteuid()}/sock", err)
        self.assertEqual(os.stat(shared).st_mode & 0o7777, 0o1777)
        # The advised directory works below that same shared directory.
        sock = os.path.join(shared, f"ccpool-{os.geteuid()}", "sock")
        try:
            r = self.serve_daemon(sock, self.store)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIsNotNone(self.try_status(sock))
        finally:
            self.cli("stop", "--socket", sock)

    def test_run_names_the_log_when_the_service_cannot_start(self):
        not_a_dir = self.write("not-a-dir", "x")
        r = self.cli("run", "--socket", self.sock, "--dir", not_a_dir, "--", "true")
        self.assertEqual(r.returncode, 1)
        err = r.stderr.decode()
        log = os.path.join(self.run_dir, "ccpool.log")
        self.assertIn(f"the ccpool service did not come up on '{self.sock}'; see {log}", err)
        self.assertIn(not_a_dir, open(log).read(), "the log says why")
        self.assertEqual(serve_pids(self.sock), [])

    def test_run_outlives_a_dying_lock_holder(self):
        """Issue 27's soak race: `ccpool run` found no service and started one,
        which refused because another instance still held the lock (a service
        being killed, or one killed as it started); that instance then died
        without ever answering. `run` must start a service again, not fail
        the job."""
        import fcntl
        os.makedirs(self.run_dir, mode=0o700, exist_ok=True)
        lock = os.open(os.path.join(self.run_dir, "serve.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(lock, fcntl.LOCK_EX)  # the dying instance
        run = subprocess.Popen([CCPOOL, "run", "--socket", self.sock, "--dir", self.store, "--", "true"],
                               env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            time.sleep(0.5)  # its serve refused: the lock is held
            os.close(lock)  # it dies: the lock is free, and nothing answers on the socket
            _, err = run.communicate(timeout=60)
            self.assertEqual(run.returncode, 0, err.decode())
            self.assertIsNotNone(self.try_status(self.sock))
        finally:
            if run.poll() is None:
                run.kill()
            self.cli("stop", "--socket", self.sock)

    def test_status_does_not_count_itself_as_a_client(self):
        self.start_service()
        r = self.cli("status", "--socket", self.sock)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("clients    0 connected\n", r.stdout.decode())
        with socket.socket(socket.AF_UNIX) as other:
            other.connect(self.sock)
            wait_until(lambda: (self.try_status() or {}).get("clients") == 2, "the second connection to count")
            r = self.cli("status", "--socket", self.sock)
            self.assertIn("clients    1 connected\n", r.stdout.decode())

    def test_count_options_say_what_is_wrong(self):
        for cmd in (["env", "--ranks", "0"], ["env", "--jobs", "-2"], ["run", "--ranks", "x", "--", "true"]):
            r = self.cli(*cmd)
            self.assertEqual(r.returncode, 2, cmd)
            err = r.stderr.decode()
            self.assertIn(f"'{cmd[2]}' is not a positive whole number", err)
            self.assertNotIn("1797", err)
        for flag, value in (("--resp-port", "70000"), ("--metrics-port", "-5"), ("--metrics-port", "65536")):
            r = self.cli("serve", "--socket", self.sock, "--dir", self.store, flag, value)
            self.assertEqual(r.returncode, 2, (flag, value))
            self.assertIn(f"invalid {flag} {value}; use 1-65535", r.stderr.decode())
            self.assertFalse(os.path.exists(self.sock))
        for value in ("65", "-1"):
            r = self.cli("serve", "--socket", self.sock, "--dir", self.store, "--resp-threads", value)
            self.assertEqual(r.returncode, 2, value)
            self.assertIn(f"invalid --resp-threads {value}; use 1-64 (0: automatic)", r.stderr.decode())
            self.assertFalse(os.path.exists(self.sock))

    def test_unknown_command_is_named(self):
        r = self.cli("bogus")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.decode(), "ccpool: unknown command 'ccpool bogus'; see 'ccpool --help'\n")
        r = self.cli("cache", "bogus")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.decode(),
                         "ccpool: unknown command 'ccpool cache bogus'; see 'ccpool cache --help'\n")
        r = self.cli("cache")  # a missing command is still CLI11's usage error
        self.assertEqual(r.returncode, 2)
        self.assertIn("A subcommand is required", r.stderr.decode())
        r = self.cli("--version")
        self.assertEqual((r.returncode, r.stdout), (0, b"ccpool 0.1.0\n"))

    def test_cache_stats_on_a_missing_store_prints_zeros(self):
        missing = self.path("no-store-yet")
        r = self.cli("cache", "stats", "--dir", missing)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout.decode()
        self.assertIn("entries         0 (0 unique bodies)", out)
        self.assertIn("does not exist yet", out)
        r = self.cli("cache", "stats", "--dir", missing, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual((j["entries"], j["hits"], j["exists"]), (0, 0, False))
        self.assertFalse(os.path.exists(missing), "stats must not create the store")
        # Other commands keep their error.
        for cmd in (["ls"], ["verify"], ["clear"]):
            r = self.cli("cache", *cmd, "--dir", missing)
            self.assertEqual(r.returncode, 1, cmd)
            self.assertIn(f"no store at '{missing}'", r.stderr.decode())


if __name__ == "__main__":
    main()
