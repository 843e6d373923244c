"""Issue 14, Triton and the CUDA toolkit through the service: Triton compiles
for GPUTarget("cuda", 90, 32) with no GPU; its ptxas runs with random temp
names (/tmp/tmpXXXX.ptx -o /tmp/tmpXXXX.ptx.o) and must still hit across
runs, byte-identical to a direct compile, with -v output replayed exactly.
Also the toolkit's own ptxas and `nvcc -c`.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from torch_case import CCPOOL, TRITON_KERNELS, VENV, VENV_PY, TorchCase, main  # noqa: E402

TRITON_PTXAS = os.path.join(VENV, "lib", "python3.11", "site-packages", "triton", "backends",
                            "nvidia", "bin", "ptxas")
CUDA_PTXAS = "/usr/local/cuda/bin/ptxas"
NVCC = "/usr/local/cuda/bin/nvcc"
KERNELS = 3
COMPILE_TIME = re.compile(rb"Compile time = [0-9.]+ ms")

# Double-precision work: with -warn-double-usage ptxas warns, naming the
# input path as given ("ptxas /tmp/x.ptx, line N; warning : ...").
DOUBLE_PTX = """.version 8.7
.target sm_90a
.address_size 64

.visible .entry dbl(
\t.param .u64 dbl_param_0
)
{
\t.reg .b64 \t%rd<3>;
\t.reg .f64 \t%fd<3>;
\tld.param.u64 \t%rd1, [dbl_param_0];
\tcvta.to.global.u64 \t%rd2, %rd1;
\tld.global.f64 \t%fd1, [%rd2];
\tmul.f64 \t%fd2, %fd1, 0d4008000000000000;
\tst.global.f64 \t[%rd2], %fd2;
\tret;
}
"""

CU_SOURCE = """extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""


class TritonPtxasTest(TorchCase):
    def triton(self, out_dir, cache_dir, ptxas=None, via_ccpool=True):
        env = {"TRITON_CACHE_DIR": cache_dir}
        if ptxas:
            env["TRITON_PTXAS_PATH"] = ptxas
        args = [VENV_PY, TRITON_KERNELS, "--out-dir", out_dir]
        p = self.ccpool_run(*args, env=env) if via_ccpool else self._run(args, env=env)
        out, _ = self.run_ok(p)
        return json.loads(out.strip().splitlines()[-1])

    def ptxas_builds(self):
        return [e["argv"] for e in self.execs()
                if os.path.basename(e["argv"][0]) == "ptxas" and "--version" not in e["argv"]]

    def check_temp_names_hit(self, ptxas=None):
        want = self.triton(self.wpath("direct"), self.path("tc-direct"), ptxas, via_ccpool=False)
        self.assertEqual(len(want), KERNELS)
        os.remove(self.exec_log)
        first = self.triton(self.wpath("run1"), self.path("tc1"), ptxas)
        s1 = self.status_summary()
        builds1 = self.ptxas_builds()
        self.assertEqual(len(builds1), KERNELS, builds1)
        self.assertEqual(first, want)
        # Every ptxas build went through the service.
        self.assertEqual((s1["misses"], s1["hits"], s1["fallbacks"]), (KERNELS, 0, 0), s1)
        self.assertEqual(s1["requests"], s1["misses"] + s1["passthrough"], s1)
        os.remove(self.exec_log)
        second = self.triton(self.wpath("run2"), self.path("tc2"), ptxas)
        s2 = self.status_summary()
        builds2 = self.ptxas_builds()
        self.assertEqual(len(builds2), KERNELS, builds2)
        names1 = {a for argv in builds1 for a in argv if a.endswith(".ptx")}
        names2 = {a for argv in builds2 for a in argv if a.endswith(".ptx")}
        self.assertFalse(names1 & names2, "Triton reused temp names")
        delta = {k: s2[k] - s1[k] for k in ("hits", "misses", "executions", "passthrough")}
        print(f"triton ({ptxas or 'its own ptxas'}): run 1 {s1}; run 2 deltas {delta}",
              file=sys.stderr)
        self.assertEqual(second, want)
        self.assertEqual((delta["hits"], delta["misses"]), (KERNELS, 0),
                         f"second run with new temp names: {delta}")
        self.assertEqual(delta["executions"], delta["passthrough"], delta)  # only --version runs

    def test_triton_ptxas_temp_names_hit(self):
        self.check_temp_names_hit()

    def test_cuda_ptxas_temp_names_hit(self):
        if not os.access(CUDA_PTXAS, os.X_OK):
            self.skipTest(f"{CUDA_PTXAS} is not installed (the CUDA toolkit)")
        self.check_temp_names_hit(CUDA_PTXAS)

    # --- -v output ----------------------------------------------------------------
    def ptxas_via(self, argv, ptx_text, tmp_dir):
        """Runs argv (a Triton ptxas line) through `ccpool exec` on a new temp
        name holding ptx_text: (rc, stderr, cubin)."""
        fd, src = tempfile.mkstemp(suffix=".ptx", dir=tmp_dir)
        with os.fdopen(fd, "w") as f:
            f.write(ptx_text)
        args = argv[:-3] + [src, "-o", src + ".o"]
        self.last_src = src
        return self.run_ptxas(args, src + ".o")

    def run_ptxas(self, args, out, via=True):
        rc, _, err = (self.via if via else self.direct)(args)
        data = None
        if os.path.exists(out):
            with open(out, "rb") as f:
                data = f.read()
        return rc, err, data

    def check_verbose_replay(self, ptxas):
        self.start_service(jobs=JOBS_SERVICE)
        # Triton's own line for a real kernel, from a direct compile.
        self.triton(self.wpath("direct"), self.path("tc"), ptxas, via_ccpool=False)
        argv = self.ptxas_builds()[0]
        self.assertIn("-v", argv)
        self.assertEqual(argv[-2], "-o")
        ptx_text = open(sorted(glob.glob(self.path("tc", "*", "*.ptx")))[0]).read()
        tmp = self.path("ptx-tmp")
        os.makedirs(tmp)
        direct_ptx = self.path("d.ptx")
        with open(direct_ptx, "w") as f:
            f.write(ptx_text)
        rc0, err0, cubin0 = self.run_ptxas(argv[:-3] + [direct_ptx, "-o", direct_ptx + ".o"],
                                           direct_ptx + ".o", via=False)
        before = self.counters()
        rc1, err1, cubin1 = self.ptxas_via(argv, ptx_text, tmp)
        rc2, err2, cubin2 = self.ptxas_via(argv, ptx_text, tmp)
        d = self.delta(before)
        self.assertEqual((rc0, rc1, rc2), (0, 0, 0), err1 + err2)
        self.assertEqual((d["misses"], d["hits"]), (1, 1), d)
        self.assertIn(b"ptxas info", err1)
        self.assertEqual(err2, err1, "the hit must replay the run's -v output exactly")
        self.assertEqual(COMPILE_TIME.sub(b"T", err1), COMPILE_TIME.sub(b"T", err0),
                         "the run's -v output differs from a direct run's beyond its timing")
        self.assertEqual(cubin1, cubin0)
        self.assertEqual(cubin2, cubin0)

    def test_triton_ptxas_verbose_replayed(self):
        self.check_verbose_replay(None)

    def test_cuda_ptxas_verbose_replayed(self):
        if not os.access(CUDA_PTXAS, os.X_OK):
            self.skipTest(f"{CUDA_PTXAS} is not installed (the CUDA toolkit)")
        self.check_verbose_replay(CUDA_PTXAS)

    def test_warning_naming_the_temp_path_never_replayed_elsewhere(self):
        """ptxas warnings name the input path as given. A hit for another temp
        name must not print the first one's path: it misses (the run's output
        names a path the content key leaves out, so it is not stored) or its
        output names its own path."""
        if not os.access(CUDA_PTXAS, os.X_OK):
            self.skipTest(f"{CUDA_PTXAS} is not installed (the CUDA toolkit)")
        self.start_service(jobs=JOBS_SERVICE)
        tmp = self.path("ptx-tmp")
        os.makedirs(tmp)
        argv = [CUDA_PTXAS, "-lineinfo", "-v", "-warn-double-usage", "--gpu-name=sm_90a", "X", "-o", "X.o"]
        rc1, err1, _ = self.ptxas_via(argv, DOUBLE_PTX, tmp)
        first = self.last_src
        rc2, err2, cubin2 = self.ptxas_via(argv, DOUBLE_PTX, tmp)
        second = self.last_src
        self.assertEqual((rc1, rc2), (0, 0))
        self.assertIn(b"warning", err1)
        self.assertEqual(set(re.findall(rb"ptxas (\S+\.ptx), line", err1)), {first.encode()})
        self.assertEqual(set(re.findall(rb"ptxas (\S+\.ptx), line", err2)), {second.encode()},
                         f"the second compile's warnings name another compile's temp file:\n{err2!r}")


JOBS_SERVICE = 2


# The default compiler list with nvcc added: the shim matches nvcc only when
# asked (docs/shim.md), because an nvcc that passes through runs in the
# service without the shim, so its inner steps would no longer be cached.
NVCC_COMPILERS = "gcc:g++:cc:c++:clang:clang++:ptxas:nvcc"

DEVICE_ONLY_SOURCE = """#include "host.h"
#ifdef __CUDA_ARCH__
#include "dev.h"
#else
#define DEV_FACTOR 1.0f
#endif
extern "C" __global__ void scale(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = y[i] * DEV_FACTOR + HOST_BIAS;
}
"""


class NvccTest(TorchCase):
    def setUp(self):
        super().setUp()
        if not os.access(NVCC, os.X_OK):
            self.skipTest(f"{NVCC} is not installed (the CUDA toolkit)")
        self.env["PATH"] = "/usr/local/cuda/bin:" + self.env["PATH"]

    def nvcc_via(self, *args):
        """`nvcc ARGS` through `ccpool exec` (the shim's client path): (rc, err)."""
        rc, _, err = self.via([NVCC, *args])
        return rc, err

    def nvcc_direct(self, *args):
        """The reference compile, never through the shim."""
        rc, _, err = self.direct([NVCC, *args], env={"CCPOOL_DISABLE": "1"})
        return rc, err

    def test_nvcc_c_second_run_hits(self):
        """`nvcc -c k.cu` through `ccpool run`, twice, as a build tool runs it
        (a shell under the shim execs nvcc): the second run is served from the
        store, byte-identical to the first (nvcc's own objects differ run to
        run: its temp names reach the symbol table)."""
        self.put("k.cu", CU_SOURCE)
        env = {"CCPOOL_COMPILERS": NVCC_COMPILERS}
        cmd = ("sh", "-c", "nvcc -c k.cu -o k.o")
        self.run_ok(self.ccpool_run(*cmd, env=env))
        first = self.bytes_of("k.o")
        s1 = self.status_summary()
        self.assertEqual((s1["requests"], s1["misses"], s1["not_stored"]), (1, 1, 0), s1)
        self.remove("k.o")
        shutil.rmtree(self.tmp)  # another temp dir state: nvcc's tmpxft names differ anyway
        os.makedirs(self.tmp)
        self.run_ok(self.ccpool_run(*cmd, env=env))
        s2 = self.status_summary()
        delta = {k: s2[k] - s1[k] for k in ("requests", "hits", "misses", "executions", "passthrough",
                                            "not_stored")}
        print(f"nvcc -c: run 1 {s1}; run 2 deltas {delta}; not stored: {self.not_stored_reasons()}",
              file=sys.stderr)
        self.assertEqual(self.bytes_of("k.o"), first, "the second object is not the stored one")
        self.assertEqual((delta["misses"], delta["executions"]), (0, 0), delta)
        self.assertEqual(delta["hits"], 1, delta)

    def check_edit_misses(self, edited, new_text, args):
        """Compiles (miss), again (hit), edits `edited`, again: a miss whose
        object matches a direct compile's symbols and fatbin, then a hit."""
        self.start_service(jobs=JOBS_SERVICE)
        before = self.counters()
        self.assertEqual(self.nvcc_via(*args)[0], 0)
        self.assertEqual(self.nvcc_via(*args)[0], 0)
        self.assertEqual((self.delta(before)["misses"], self.delta(before)["hits"]), (1, 1),
                         self.delta(before))
        self.put(edited, new_text)
        before = self.counters()
        rc, err = self.nvcc_via(*args)
        self.assertEqual(rc, 0, err)
        d = self.delta(before)
        self.assertEqual((d["misses"], d["hits"], d["not_stored"]), (1, 0, 0), d)
        served = self.bytes_of("k.o")
        self.remove("k.o")
        rc, err = self.nvcc_direct(*args)
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.fatbin(served), self.fatbin(self.bytes_of("k.o")),
                         "the miss's device code differs from a direct compile's")
        self.assertEqual(self.nvcc_via(*args)[0], 0)
        self.assertEqual(self.delta(before)["hits"], 1, self.delta(before))

    def fatbin(self, data):
        return self.section(data, ".nv_fatbin")

    def section(self, data, name):
        path = self.path("section.o")
        with open(path, "wb") as f:
            f.write(data)
        out = subprocess.run(["objcopy", "-O", "binary", f"--only-section={name}", path, "/dev/stdout"],
                             check=True, capture_output=True).stdout
        self.assertTrue(out)
        return out

    def test_nvcc_header_edit_misses(self):
        self.put("inc/host.h", "#define HOST_BIAS 1.0f\n")
        self.put("dev.h", "#define DEV_FACTOR 2.0f\n")
        self.put("k.cu", DEVICE_ONLY_SOURCE)
        self.check_edit_misses("inc/host.h", "#define HOST_BIAS 3.0f\n",
                               ["-c", "k.cu", "-o", "k.o", "-Iinc", "-arch=sm_90"])

    def test_nvcc_device_only_header_edit_misses(self):
        """dev.h is included only under __CUDA_ARCH__: the host preprocessing
        never reads it, the device one does."""
        self.put("inc/host.h", "#define HOST_BIAS 1.0f\n")
        self.put("dev.h", "#define DEV_FACTOR 2.0f\n")
        self.put("k.cu", DEVICE_ONLY_SOURCE)
        self.check_edit_misses("dev.h", "#define DEV_FACTOR 5.0f\n",
                               ["-c", "k.cu", "-o", "k.o", "-Iinc", "-gencode", "arch=compute_80,code=sm_80",
                                "--generate-code=arch=compute_90,code=sm_90"])

    def test_nvcc_shadowing_header_misses(self):
        """A header appearing in an -I directory that shadows one the final
        host compile read (from nvcc's stub, never seen by the -E steps)."""
        self.put("k.cu", CU_SOURCE)
        os.makedirs(self.wpath("inc"))
        args = ["-c", "k.cu", "-o", "k.o", "-Iinc"]
        self.start_service(jobs=JOBS_SERVICE)
        before = self.counters()
        self.assertEqual(self.nvcc_via(*args)[0], 0)
        self.assertEqual(self.nvcc_via(*args)[0], 0)
        self.assertEqual(self.delta(before)["hits"], 1, self.delta(before))
        self.put("inc/fatbinary_section.h", "#error shadowed\n")
        rc_direct, err_direct = self.nvcc_direct(*args)
        self.assertNotEqual(rc_direct, 0, "the shadowing header is not read by a direct compile")
        before = self.counters()
        rc, err = self.nvcc_via(*args)
        self.assertEqual(rc, rc_direct, err)
        self.assertIn(b"shadowed", err)
        self.assertEqual(self.delta(before)["hits"], 0, self.delta(before))

    def test_nvcc_time_macro_not_stored(self):
        """__TIME__ in the source: the record sees gcc's -E step make a date
        from the clock (and the source names the macro nvcc's front ends would
        expand), nothing is stored, and each run compiles."""
        self.put("k.cu", CU_SOURCE + 'const char* built_at = __TIME__;\n')
        self.start_service(jobs=JOBS_SERVICE)
        before = self.counters()
        for _ in range(2):
            rc, err = self.nvcc_via("-c", "k.cu", "-o", "k.o")
            self.assertEqual(rc, 0, err)
        d = self.delta(before)
        self.assertEqual((d["misses"], d["hits"], d["not_stored"]), (2, 0, 2), d)
        self.assertEqual(self.status()["not_stored_reasons"], {"time_macro": 2})

    def test_nvcc_asm_include_keyed(self):
        """Host inline asm `.include`s a file: the assembler's read of it is in
        the record, so a changed included file is compiled again (never a hit)
        and gives a direct compile's data; the same file again hits. (The
        preprocessor-mode key could not see it and stored nothing.)"""
        self.put("v.s", ".globl cu_v\n.data\ncu_v: .long 1\n")
        self.put("k.cu", CU_SOURCE + 'asm(".include \\"v.s\\"");\n')
        self.start_service(jobs=JOBS_SERVICE)
        before = self.counters()
        rc, err = self.nvcc_via("-c", "k.cu", "-o", "k.o")
        self.assertEqual(rc, 0, err)
        self.put("v.s", ".globl cu_v\n.data\ncu_v: .long 2\n")
        rc, err = self.nvcc_via("-c", "k.cu", "-o", "k.o")
        self.assertEqual(rc, 0, err)
        d = self.delta(before)
        self.assertEqual((d["misses"], d["hits"], d["not_stored"]), (2, 0, 0), d)
        served = self.bytes_of("k.o")
        self.remove("k.o")
        rc, err = self.nvcc_direct("-c", "k.cu", "-o", "k.o")
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.section(served, ".data"), self.section(self.bytes_of("k.o"), ".data"))
        self.assertEqual(self.nvcc_via("-c", "k.cu", "-o", "k.o")[0], 0)
        self.assertEqual(self.delta(before)["hits"], 1, self.delta(before))
        self.assertEqual(self.bytes_of("k.o"), served)

    def test_nvcc_joiner_served_from_the_store(self):
        """Two identical nvcc requests in flight: one runs; the other joins and
        takes the run's object once its own view validates against the run's
        manifest entry (Planner::accepts, as for C/C++); a later request is a
        hit with the same bytes."""
        self.put("k.cu", CU_SOURCE)
        self.start_service(jobs=1)
        args = [NVCC, "-c", "k.cu", "-o", "k.o"]
        gate = self.hold_slot()
        before = self.counters()
        procs = [self.start_via(args) for _ in range(2)]
        self.wait_status(lambda s: s["requests"] == before["requests"] + 2, "both nvcc requests to arrive")
        self.release_slot(gate)
        for p in procs:
            rc, _, err = self.wait_one(p)
            self.assertEqual(rc, 0, err)
        d = self.delta(before)
        # The gate's execution was counted before `before`: one nvcc ran.
        self.assertEqual((d["misses"], d["joins"], d["executions"], d["not_stored"]), (1, 1, 1, 0), d)
        first = self.bytes_of("k.o")
        self.remove("k.o")
        self.assertEqual(self.nvcc_via("-c", "k.cu", "-o", "k.o")[0], 0)
        self.assertEqual(self.bytes_of("k.o"), first)
        self.assertEqual(self.delta(before)["hits"], 1, self.delta(before))

    def test_nvcc_warm_hit_runs_nothing(self):
        """A hit is decided from the record alone: no compiler, no
        preprocessor, no `nvcc --dryrun`. nvcc finds gcc through PATH, where
        a logging gcc stands first: the miss runs it, the hit runs nothing.
        (Fails on the preprocessor-mode key: every lookup ran the dryrun's
        `gcc -E` steps, found through the same PATH.)"""
        log = self.path("gcc.log")
        wrap = self.path("wrap")
        os.makedirs(wrap)
        for name in ("gcc", "g++"):
            with open(os.path.join(wrap, name), "w") as f:
                f.write(f'#!/bin/sh\necho "$0 $*" >> {log}\nexec /usr/bin/{name} "$@"\n')
            os.chmod(os.path.join(wrap, name), 0o755)
        self.env["PATH"] = wrap + ":" + self.env["PATH"]
        self.put("k.cu", CU_SOURCE)
        self.start_service(jobs=JOBS_SERVICE)
        before = self.counters()
        rc, err = self.nvcc_via("-c", "k.cu", "-o", "k.o")
        self.assertEqual(rc, 0, err)
        self.assert_delta(before, misses=1, executions=1, not_stored=0)
        with open(log) as f:
            ran = f.read().splitlines()
        self.assertTrue(any(" -E " in l for l in ran), ran)  # the wrapper is the gcc nvcc runs
        stored = self.bytes_of("k.o")
        self.remove("k.o")
        before = self.counters()
        rc, err = self.nvcc_via("-c", "k.cu", "-o", "k.o")
        self.assertEqual(rc, 0, err)
        self.assert_delta(before, hits=1, misses=0, executions=0, passthrough=0)
        with open(log) as f:
            self.assertEqual(f.read().splitlines(), ran, "the hit ran gcc")
        self.assertEqual(self.bytes_of("k.o"), stored)
        # `ccpool explain` says how the stored entry is keyed (it ran nothing either).
        out = subprocess.run([CCPOOL, "explain", "--dir", self.store, "--json", "--", NVCC, "-c", "k.cu",
                              "-o", "k.o"], cwd=self.work, env=self.env, check=True,
                             capture_output=True).stdout
        j = json.loads(out)
        self.assertEqual((j["mode"], j["store"]), ("record", "hit"), j)
        with open(log) as f:
            self.assertEqual(f.read().splitlines(), ran, "explain ran gcc")

    def test_nvcc_new_shadowing_include_misses(self):
        """dev.h is found in the second -I directory; one appearing in the
        first shadows it: a miss whose device code is a direct compile's."""
        self.put("inc/host.h", "#define HOST_BIAS 1.0f\n")
        self.put("b/dev.h", "#define DEV_FACTOR 2.0f\n")
        os.makedirs(self.wpath("a"))
        self.put("k.cu", DEVICE_ONLY_SOURCE)
        self.check_edit_misses("a/dev.h", "#define DEV_FACTOR 7.0f\n",
                               ["-c", "k.cu", "-o", "k.o", "-Iinc", "-Ia", "-Ib", "-arch=sm_90"])

    def fake_toolkit(self):
        """A CUDA tree of links to the real one, with its own nvcc.profile and
        libdevice (nvcc takes its directory from the path it was run by)."""
        root = self.path("cuda")
        real = os.path.dirname(os.path.dirname(NVCC))
        os.makedirs(os.path.join(root, "bin"))
        os.makedirs(os.path.join(root, "nvvm"))
        for name in os.listdir(os.path.join(real, "bin")):
            src = os.path.join(real, "bin", name)
            if name == "nvcc.profile":
                shutil.copy(src, os.path.join(root, "bin", name))
            else:
                os.symlink(src, os.path.join(root, "bin", name))
        os.symlink(os.path.join(real, "nvvm", "bin"), os.path.join(root, "nvvm", "bin"))
        shutil.copytree(os.path.join(real, "nvvm", "libdevice"), os.path.join(root, "nvvm", "libdevice"))
        for name in ("targets", "include", "lib"):
            if os.path.exists(os.path.join(real, name)):
                os.symlink(os.path.join(real, name), os.path.join(root, name))
        return root

    def test_nvcc_profile_and_libdevice_keyed(self):
        """nvcc.profile is read by every run: a changed one misses and gives a
        direct compile's device code. libdevice is not read by CUDA 13's cicc
        (it carries its own): a changed file is no input, the next request
        hits, and a direct compile with it makes the same device code."""
        root = self.fake_toolkit()
        nvcc = os.path.join(root, "bin", "nvcc")
        profile = os.path.join(root, "bin", "nvcc.profile")
        args = [nvcc, "-c", "k.cu", "-o", "k.o", "-arch=sm_90"]
        self.put("k.cu", "__global__ void m(float* x) { x[threadIdx.x] = sinf(x[threadIdx.x]); }\n")
        self.start_service(jobs=JOBS_SERVICE)
        before = self.counters()
        for _ in range(2):
            rc, _, err = self.via(args)
            self.assertEqual(rc, 0, err)
        self.assert_delta(before, misses=1, hits=1, not_stored=0)
        with open(profile, "a") as f:
            f.write("PTXAS_FLAGS += -O0\n")
        before = self.counters()
        rc, _, err = self.via(args)
        self.assertEqual(rc, 0, err)
        self.assert_delta(before, misses=1, hits=0, not_stored=0)
        served = self.bytes_of("k.o")
        self.remove("k.o")
        rc, _, err = self.direct(args, env={"CCPOOL_DISABLE": "1"})
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.fatbin(served), self.fatbin(self.bytes_of("k.o")))
        libdevice = glob.glob(os.path.join(root, "nvvm", "libdevice", "*.bc"))
        self.assertTrue(libdevice)
        for path in libdevice:
            with open(path, "wb") as f:
                f.write(b"not bitcode")
        before = self.counters()
        rc, _, err = self.via(args)
        self.assertEqual(rc, 0, err)
        self.assert_delta(before, hits=1, misses=0)
        self.assertEqual(self.bytes_of("k.o"), served)
        rc, _, err = self.direct(args, env={"CCPOOL_DISABLE": "1"})
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.fatbin(served), self.fatbin(self.bytes_of("k.o")))

    def test_nvcc_unsupported_option_passes_through(self):
        self.put("k.cu", CU_SOURCE)
        self.start_service(jobs=JOBS_SERVICE)
        before = self.counters()
        rc, err = self.nvcc_via("-c", "-rdc=true", "k.cu", "-o", "k.o")
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.delta(before)["passthrough"], 1, self.delta(before))
        self.assertEqual(self.status()["passthrough_reasons"], {"nvcc_unsupported_option:-rdc": 1})
        self.assertTrue(os.path.exists(self.wpath("k.o")))


if __name__ == "__main__":
    main()
