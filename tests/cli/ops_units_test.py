"""The shipped systemd units (contrib/systemd) as systemd reads them:
`systemd-analyze verify --user` accepts them, the socket unit's ListenStream
is the service's --socket, and the unit's own ExecStart command line, run by
Debian's systemd-socket-activate on the unit's socket path, serves a compile.
Exit 125 when systemd-analyze, systemd-socket-activate or gcc is absent."""
import configparser
import os
import shlex
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "service", "support"))
from harness import CCPOOL, ServiceCase, main, wait_until  # noqa: E402

UNITS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "contrib", "systemd")


def read_unit(name):
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    with open(os.path.join(UNITS, name)) as f:
        parser.read_file(f)
    return parser


class UnitsTest(ServiceCase):
    def installed_units(self, runtime):
        """The units with ExecStart pointing at this build, as a user would install them."""
        unit_dir = self.path("units")
        os.makedirs(unit_dir)
        shutil.copy(os.path.join(UNITS, "ccpool.socket"), unit_dir)
        text = open(os.path.join(UNITS, "ccpool.service")).read()
        self.assertIn("ExecStart=/usr/local/bin/ccpool serve ", text)
        text = text.replace("ExecStart=/usr/local/bin/ccpool ", f"ExecStart={CCPOOL} ")
        with open(os.path.join(unit_dir, "ccpool.service"), "w") as f:
            f.write(text)
        return unit_dir

    def test_units_verify_and_agree(self):
        if shutil.which("systemd-analyze") is None:
            self.skipTest("systemd-analyze is not installed (Debian package systemd)")
        runtime = self.path("xdg")
        os.makedirs(runtime, mode=0o700)
        unit_dir = self.installed_units(runtime)
        r = subprocess.run(["systemd-analyze", "verify", "--user", os.path.join(unit_dir, "ccpool.socket"),
                            os.path.join(unit_dir, "ccpool.service")],
                           env=dict(self.env, XDG_RUNTIME_DIR=runtime), capture_output=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        sock = read_unit("ccpool.socket")["Socket"]
        service = read_unit("ccpool.service")["Service"]
        argv = shlex.split(service["ExecStart"])
        self.assertEqual(argv[1], "serve")
        self.assertEqual(argv[argv.index("--socket") + 1], sock["ListenStream"])
        self.assertEqual(sock["ListenStream"], "%t/ccpool/sock", "the clients' default socket path")
        self.assertEqual((sock["DirectoryMode"], sock["SocketMode"], sock["Accept"]), ("0700", "0600", "no"))
        self.assertNotIn("--foreground", argv, "activation implies it")

    def test_unit_command_line_serves_when_activated(self):
        tool = shutil.which("systemd-socket-activate")
        if tool is None:
            self.skipTest("systemd-socket-activate is not installed (Debian package systemd)")
        if shutil.which("gcc") is None:
            self.skipTest("gcc is not installed")
        runtime = self.path("xdg")
        os.makedirs(os.path.join(runtime, "ccpool"), mode=0o700)
        argv = shlex.split(read_unit("ccpool.service")["Service"]["ExecStart"].replace("%t", runtime))
        argv[0] = CCPOOL
        self.sock = os.path.join(runtime, "ccpool", "sock")
        self.assertEqual(argv[argv.index("--socket") + 1], self.sock)
        out = open(self.path("activate.out"), "wb")
        activator = subprocess.Popen([tool, "-l", self.sock, *argv, "--dir", self.store, "--no-resp"],
                                     env=self.env, stdout=out, stderr=subprocess.STDOUT, cwd=self.dir)
        try:
            wait_until(lambda: os.path.exists(self.sock), "systemd-socket-activate to listen")
            self.write("work/k.c", "int answer(void) { return 42; }\n")
            rc, _, err = self.run_exec(["gcc", "-c", "k.c", "-o", "k.o"], env={"CCPOOL_NO_AUTOSTART": "1"})
            self.assertEqual(rc, 0, err)
            s = self.status()
            self.assertEqual((s["pid"], s["requests"], s["misses"]), (activator.pid, 1, 1))
        finally:
            activator.send_signal(signal.SIGTERM)
            activator.wait(60)


if __name__ == "__main__":
    main()
