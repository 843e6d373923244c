"""Static archives through `ccpool run` in a real CMake tree (Unix Makefiles:
CMake's own `ar qc` then `ranlib`, run by `cmake -E cmake_link_script`). A
warm rebuild after `make clean` is served whole, compiles and archive alike,
and the archive is byte for byte the one a plain build writes (one member
name long enough for ar's long-name table); an edited source is a miss for
its object, the archive and its index.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from e2e_case import CCPOOL, E2ECase, main  # noqa: E402

CMAKELISTS = """cmake_minimum_required(VERSION 3.16)
project(artree CXX)
add_library(demo STATIC a.cpp b_with_a_long_name.cpp)
"""


class ArchiveTreeTest(E2ECase):
    def setUp(self):
        super().setUp()
        self.need_tool("cmake")
        self.need_tool("make")
        self.need_tool("ar")
        self.need_shim()
        self.put("src/CMakeLists.txt", CMAKELISTS)
        self.put("src/a.cpp", "int fa() { return 1; }\n")
        self.put("src/b_with_a_long_name.cpp", "int fb() { return 2; }\n")
        for name in ("plain", "pooled"):
            self.check([
                "cmake", "-S", self.wpath("src"), "-B", self.wpath(name), "-G", "Unix Makefiles",
                "-DCMAKE_BUILD_TYPE=Release"])

    def check(self, cmd, env=None):
        rc, out, err = self.direct(cmd, env=env)
        self.assertEqual(rc, 0, f"{cmd}: {out.decode(errors='replace')}{err.decode(errors='replace')}")

    def build(self, name, pooled):
        cmd = ["make", "-C", self.wpath(name), "-j2"]
        if pooled:
            cmd = [CCPOOL, "run", "--socket", self.sock, "--dir", self.store, "--"] + cmd
        self.check(cmd, env={"CCPOOL_DISABLE": "1"} if not pooled else None)

    def archive(self, name):
        return self.bytes_of(os.path.join(name, "libdemo.a"))

    def test_warm_rebuild_serves_the_archive(self):
        self.start_service(jobs=2)
        self.build("plain", pooled=False)
        before = self.counters()
        self.build("pooled", pooled=True)
        # Two compiles, ar and ranlib: each a miss, each stored.
        self.assert_delta(before, misses=4, hits=0, not_stored=0, passthrough=0)
        self.assertEqual(self.archive("pooled"), self.archive("plain"))
        self.check(["make", "-C", self.wpath("pooled"), "clean"])
        self.assertFalse(os.path.exists(self.wpath("pooled", "libdemo.a")))
        before = self.counters()
        self.build("pooled", pooled=True)
        self.assert_delta(before, misses=0, hits=4, executions=0)
        self.assertEqual(self.archive("pooled"), self.archive("plain"))
        reasons = self.status().get("passthrough_reasons") or {}
        self.assertEqual(reasons, {}, reasons)

        # An edit: its object, the archive and its index are misses; the bytes follow.
        self.put("src/b_with_a_long_name.cpp", "int fb() { return 3; }\n")
        self.build("plain", pooled=False)
        before = self.counters()
        self.build("pooled", pooled=True)
        self.assert_delta(before, misses=3, hits=0, not_stored=0)
        self.assertEqual(self.archive("pooled"), self.archive("plain"))


if __name__ == "__main__":
    main()
