"""What the .d file does not show, through the real service with real
compilers (compiler/cc_lookups.cpp; library-level cases in
tests/compiler/cc_lookups_test.cpp): Inductor's precompiled-header flow and
__has_include probes. Counters prove hits and executions; every result is
compared with the same command run directly.
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from e2e_case import PYTHON, E2ECase, main  # noqa: E402

CALL_K = ("import ctypes, shutil, sys, tempfile\n"
          "d = tempfile.mkdtemp()\n"
          "shutil.copy(sys.argv[1], d + '/k.so')\n"
          "k = ctypes.CDLL(d + '/k.so').k\n"
          "k.restype = ctypes.c_double\n"
          "k.argtypes = [ctypes.c_double]\n"
          "print(k(10.0))\n"
          "shutil.rmtree(d)\n")


class LookupsBase(E2ECase):
    def call_k(self, rel):
        r = subprocess.run([PYTHON, "-c", CALL_K, self.wpath(rel)], capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return float(r.stdout)

    def via_ok(self, args, cwd=None):
        rc, out, err = self.via(args, cwd=cwd)
        self.assertEqual(rc, 0, err)

    def test_probed_header_appearing_misses(self):
        self.start_service(jobs=2)
        self.put("inc/port.h", "#ifdef __has_include\n#if __has_include(<feature.h>)\n"
                               "#define HAVE 1\n#else\n#define HAVE 0\n#endif\n#endif\n")
        self.put("k.cpp", "#include <port.h>\nint have() { return HAVE; }\n")
        os.makedirs(self.wpath("inc1"))
        args = [self.CXX, "-O2", "-Iinc1", "-Iinc", "-c", "k.cpp", "-o", "k.o"]
        before = self.counters()
        self.via_ok(args)
        self.via_ok(args)
        self.assert_delta(before, misses=1, hits=1, executions=1, not_stored=0)
        old = self.bytes_of("k.o")
        self.put("inc1/feature.h", "\n")
        self.remove("k.o")
        rc, _, err = self.direct(args)
        self.assertEqual(rc, 0, err)
        want = self.bytes_of("k.o")
        self.assertNotEqual(want, old)
        self.remove("k.o")
        before = self.counters()
        self.via_ok(args)
        self.assert_delta(before, misses=1, hits=0, executions=1, not_stored=0)
        self.assertEqual(self.bytes_of("k.o"), want)


class GccLookupsServiceTest(LookupsBase):
    CC, CXX = "gcc", "g++"

    def write_tree(self, d, dep):
        self.put(f"{d}/dep.h", f"#define DEPV {dep}\n")
        self.put(f"{d}/prefix.h", '#include "dep.h"\ninline double pv() { return DEPV; }\n')
        self.put(f"{d}/k.cpp", 'extern "C" double k(double x) { return x + pv(); }\n')

    def test_inductor_pch_flow(self):
        """g++ -x c++-header prefix.h -o prefix.h.gch, then -include prefix.h:
        cached, hit from a fresh directory with zero executions, missed (and
        right) after an edit."""
        self.start_service(jobs=2)
        pch = [self.CXX, "-O2", "-fPIC", "-x", "c++-header", "prefix.h", "-o", "prefix.h.gch"]
        so = [self.CXX, "-O2", "-shared", "-fPIC", "-include", "prefix.h", "k.cpp", "-o", "k.so"]
        self.write_tree("a", 5)
        before = self.counters()
        self.via_ok(pch, cwd=self.wpath("a"))
        self.via_ok(so, cwd=self.wpath("a"))
        self.assert_delta(before, misses=2, executions=2, passthrough=0, not_stored=0)
        self.assertEqual(self.call_k("a/k.so"), 15.0)

        self.write_tree("b", 5)  # a fresh directory, nothing built in it
        before = self.counters()
        self.via_ok(pch, cwd=self.wpath("b"))
        self.via_ok(so, cwd=self.wpath("b"))
        self.assert_delta(before, hits=2, misses=0, executions=0)
        self.assertEqual(self.bytes_of("b/prefix.h.gch"), self.bytes_of("a/prefix.h.gch"))
        self.assertEqual(self.call_k("b/k.so"), 15.0)

        self.put("b/prefix.h", '#include "dep.h"\ninline double pv() { return DEPV * 3; }\n')
        before = self.counters()
        self.via_ok(pch, cwd=self.wpath("b"))
        self.via_ok(so, cwd=self.wpath("b"))
        self.assert_delta(before, hits=0, misses=2, executions=2, not_stored=0)
        self.assertEqual(self.call_k("b/k.so"), 25.0)
        shutil.copytree(self.wpath("b"), self.wpath("c"))  # the direct build's reference
        for f in ("prefix.h.gch", "k.so"):
            os.remove(self.wpath("c", f))
        for args in (pch, so):
            rc, _, err = self.direct(args, cwd=self.wpath("c"))
            self.assertEqual(rc, 0, err)
        self.assertEqual(self.call_k("c/k.so"), 25.0)

    def test_gch_beside_first_include_misses(self):
        self.start_service(jobs=2)
        self.put("inc/big.h", "#define V 2\n")
        self.put("other.h", "#define V 7\n")
        self.put("k.cpp", '#include <big.h>\nextern "C" double k(double x) { return x + V; }\n')
        args = [self.CXX, "-shared", "-fPIC", "-Iinc", "k.cpp", "-o", "k.so"]
        self.via_ok(args)
        self.assertEqual(self.call_k("k.so"), 12.0)
        rc, _, err = self.direct([self.CXX, "-fPIC", "-x", "c++-header", "other.h", "-o",
                                  "inc/big.h.gch"])
        self.assertEqual(rc, 0, err)
        before = self.counters()
        self.via_ok(args)
        self.assert_delta(before, hits=0, misses=1, executions=1)
        self.assertEqual(self.call_k("k.so"), 17.0)


class ClangLookupsServiceTest(LookupsBase):
    CC, CXX = "clang", "clang++"


del LookupsBase  # only the concrete compilers run

if __name__ == "__main__":
    main()
