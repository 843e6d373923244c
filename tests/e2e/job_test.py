"""Issue 5 through the real service: `ccpool run` + the shim with simulated
ranks (scripts/lib/rank.py: a 32-thread pool of subprocess.run, i.e. the
vfork path), the client's fallback when the service dies with kill -9, and
no recursion (the service's own children are never intercepted).

Every output is compared with a plain compile of the same command.
"""
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from e2e_case import (CCPOOL, GEN_KERNELS, PYTHON, RANK, SHIM,  # noqa: E402
                      E2ECase, descendants, main, serve_pids)

RANKS = 8
KERNELS = 4
SO_FLAGS = ["-O2", "-shared", "-fPIC", "-fopenmp"]  # what rank.py passes

# Starts RANKS rank.py processes at once; exits 1 when any rank failed.
RANKS_LAUNCHER = """import subprocess, sys
py, rank, kernels, out, ranks = sys.argv[1:6]
procs = [subprocess.Popen([py, rank, kernels, f"{out}/rank{r}", "32"]) for r in range(int(ranks))]
sys.exit(1 if any(p.wait() != 0 for p in procs) else 0)
"""

TINY_KERNEL = """extern "C" int kernel_id() {{ return {i}; }}
extern "C" double kernel_scale(double x) {{ return x * {i}.5; }}
"""


class JobTest(E2ECase):
    def ccpool_run(self, *args, jobs=None, env=None):
        cmd = [CCPOOL, "run", "--socket", self.sock, "--dir", self.store]
        if jobs:
            cmd += ["--jobs", str(jobs)]
        return self._run(cmd + ["--", *args], env=env)

    def plain_compile(self, kernel_dir, out_dir):
        """The reference: each kernel compiled directly, as rank.py would."""
        os.makedirs(out_dir)
        want = {}
        for name in sorted(os.listdir(kernel_dir)):
            so = os.path.join(out_dir, name[:-4] + ".so")
            rc, _, err = self.direct([self.CXX, os.path.join(kernel_dir, name), *SO_FLAGS,
                                      "-o", so])
            self.assertEqual(rc, 0, err)
            with open(so, "rb") as f:
                want[name[:-4] + ".so"] = f.read()
        return want

    def assert_outputs(self, out_dir, want):
        self.assertEqual(sorted(os.listdir(out_dir)), sorted(want), out_dir)
        for name, data in want.items():
            with open(os.path.join(out_dir, name), "rb") as f:
                self.assertEqual(f.read(), data, os.path.join(out_dir, name))

    # --- end to end: 8 ranks x 4 kernels -------------------------------------
    def test_eight_ranks_four_kernels(self):
        kernels = self.wpath("kernels")
        subprocess.run([PYTHON, GEN_KERNELS, kernels, str(KERNELS)], check=True, timeout=60)
        want = self.plain_compile(kernels, self.wpath("plain"))
        launcher = self.put("ranks.py", RANKS_LAUNCHER)
        # `ccpool run` starts the (daemonized) service itself, with --jobs 2.
        p = self.ccpool_run(PYTHON, launcher, PYTHON, RANK, kernels, self.wpath("out"),
                            str(RANKS), jobs=2)
        rc, out, err = self.wait_one(p)
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(serve_pids(self.sock)), 1, "ccpool run did not start one service")
        s = self.status()
        self.assertEqual(s["jobs"], 2)
        self.assertEqual((s["requests"], s["misses"], s["executions"]),
                         (RANKS * KERNELS, KERNELS, KERNELS), s)
        self.assertEqual(s["hits"] + s["joins"], RANKS * KERNELS - KERNELS)
        self.assertEqual((s["failures"], s["fallbacks"], s["passthrough"]), (0, 0, 0))
        self.assertGreaterEqual(s["peak_running"], 1)
        self.assertLessEqual(s["peak_running"], 2)
        for r in range(RANKS):
            self.assert_outputs(self.wpath("out", f"rank{r}"), want)

    # --- fallback: kill -9 the service under 16 concurrent compiles ----------
    def test_kill9_during_16_compiles_all_succeed(self):
        kernels = self.wpath("kernels")
        os.makedirs(kernels)
        for i in range(16):
            with open(os.path.join(kernels, f"k{i:03d}.cpp"), "w") as f:
                f.write(TINY_KERNEL.format(i=i))
        want = self.plain_compile(kernels, self.wpath("plain"))
        # Two slots: the gate job holds one, so at most one compile runs (and
        # sits in the injected exec delay) while the other 15 queue.
        service = self.start_service(jobs=2, fault="delay_exec=1500")
        gate = self.hold_slot()
        p = self.ccpool_run(PYTHON, RANK, kernels, self.wpath("out"), "16")
        self.wait_status(lambda s: s["requests"] == 17, "16 compile requests")
        self.strays += descendants(service.pid)
        service.send_signal(signal.SIGKILL)
        service.wait(30)
        open(self.wpath("gate"), "w").close()  # the gate job falls back too; let it end
        rc, out, err = self.wait_one(p)
        self.assertEqual(rc, 0, err)
        self.wait_one(gate)
        self.assert_outputs(self.wpath("out"), want)
        log = self.lines("run/fallbacks.log")
        compiles = [l for l in log if l.split("\t")[-1].endswith(self.CXX)]
        self.assertGreaterEqual(len(compiles), 15, log)  # every queued one, at least
        self.assertLessEqual(len(compiles), 16, log)

    # --- no recursion ---------------------------------------------------------
    def start_preloaded_service(self):
        """A service that itself runs with the shim preloaded (as when an
        auto-start inherited it): its children must still not be intercepted."""
        self.need_shim()
        return self.start_service(jobs=2, extra_env={"LD_PRELOAD": SHIM})

    def test_service_children_have_no_shim(self):
        self.start_preloaded_service()
        libm = "/lib/x86_64-linux-gnu/libm.so.6"
        preload = f"{SHIM} {libm}" if os.path.exists(libm) else SHIM
        before = self.counters()
        rc, out, err = self.via(["/usr/bin/env"], env={"LD_PRELOAD": preload})
        self.assertEqual(rc, 0, err)
        self.assert_delta(before, requests=1, passthrough=1, fallbacks=0)
        env = dict(l.split("=", 1) for l in out.decode().splitlines() if "=" in l)
        self.assertNotIn("libccpool-shim", env.get("LD_PRELOAD", ""), env)
        if os.path.exists(libm):  # the user's other preloads are kept
            self.assertEqual(env.get("LD_PRELOAD"), libm)

    def compile_cmds(self):
        """Three unique compiles and their direct outputs."""
        self.put("a.cpp", "int a(int x) { return x * 2; }\n")
        self.put("b.cpp", "int b(int x) { return x * 3; }\n")
        self.put("c.cpp", 'extern "C" int kernel_id() { return 42; }\n')
        cmds = {"a.o": [self.CXX, "-O2", "-c", "a.cpp", "-o", "a.o"],
                "b.o": [self.CXX, "-O2", "-c", "b.cpp", "-o", "b.o"],
                "c.so": [self.CXX, "-O2", "-shared", "-fPIC", "c.cpp", "-o", "c.so"]}
        want = {}
        for out, args in cmds.items():
            rc, _, err = self.direct(args)
            self.assertEqual(rc, 0, err)
            want[out] = self.bytes_of(out)
            self.remove(out)
        return cmds, want

    def test_nested_compiler_not_reintercepted(self):
        self.need_shim()
        self.start_service(jobs=2)
        cmds, want = self.compile_cmds()
        # A pass-through shell in the service runs g++: that g++ is the
        # service's grandchild and must run directly, not come back as a request.
        before = self.counters()
        rc, _, err = self.via(["/bin/sh", "-c", " ".join(cmds["a.o"])],
                              env={"LD_PRELOAD": SHIM})
        self.assertEqual(rc, 0, err)
        self.assert_delta(before, requests=1, passthrough=1, executions=1, misses=0, fallbacks=0)
        self.assertEqual(self.bytes_of("a.o"), want["a.o"])
        # Under `ccpool run` each compiler the job starts is one request, and
        # the service's compiler child starts no further request.
        before = self.counters()
        script = " && ".join(" ".join(cmds[o]) for o in ("b.o", "c.so"))
        rc, _, err = self.wait_one(self.ccpool_run("/bin/sh", "-c", script))
        self.assertEqual(rc, 0, err)
        self.assert_delta(before, requests=2, misses=2, executions=2, passthrough=0, fallbacks=0)
        for out in ("b.o", "c.so"):
            self.assertEqual(self.bytes_of(out), want[out], out)

    def test_preloaded_service_not_reintercepted(self):
        """The service itself runs with the shim preloaded (a `ccpool serve`
        or `ccpool run` started from a shell that ran `eval "$(ccpool env)"`):
        its own helper and compiler spawns must not come back as requests."""
        self.start_preloaded_service()
        cmds, want = self.compile_cmds()
        for out in ("a.o", "c.so"):
            before = self.counters()
            rc, _, err = self.via(cmds[out])
            self.assertEqual(rc, 0, err)
            self.assert_delta(before, requests=1, misses=1, executions=1, passthrough=0,
                              fallbacks=0)
            self.assertEqual(self.bytes_of(out), want[out], out)


if __name__ == "__main__":
    main()
