"""The .deb and the sdist (issue 26).

DebTest: scripts/package.sh deb (CPack in the build tree) makes
ccpool_<version>_amd64.deb; its file list is exactly the binaries in /usr/bin,
the shim in /usr/lib, the Python package in /usr/share/ccpool/python with a
.pth making it importable, the systemd user units in /usr/lib/systemd/user
(ExecStart naming /usr/bin/ccpool) and the docs in /usr/share/doc/ccpool; its
Depends come from dpkg-shlibdeps. dpkg installs it into a scratch root (its
maintainer scripts run outside a chroot with a recording stand-in for ldconfig),
where the installed binaries find the shim, the client and the package, the
package finds its binary, `systemd-analyze verify --user` accepts the installed
units, and dpkg --purge leaves nothing. apt-get resolves its dependencies on
this machine (`apt-get install --simulate ./ccpool_*.deb`).

SdistTest: scripts/package.sh sdist makes ccpool-<version>.tar.gz holding every
tracked file and nothing of a build tree.

Exit 125 when dpkg, cpack, systemd-analyze or root (dpkg --root) is missing."""
import glob
import json
import os
import shutil
import subprocess
import tarfile
import unittest

from support import BUILD, SOURCE, main, package, project_version, run, scratch, tree


def need(tool, debian_package):
    if shutil.which(tool) is None:
        raise unittest.SkipTest(f"{tool} is not installed (Debian package {debian_package})")


class DebTest(unittest.TestCase):
    def test_deb_installs_into_a_scratch_root_and_purges_cleanly(self):
        for tool, pkg in (("dpkg", "dpkg"), ("dpkg-deb", "dpkg"), ("dpkg-shlibdeps", "dpkg-dev"),
                          ("cpack", "cmake"), ("systemd-analyze", "systemd")):
            need(tool, pkg)
        if os.geteuid() != 0:
            self.skipTest("installing into a scratch root with dpkg --root needs root")
        work = scratch("deb")
        out = os.path.join(work, "dist")
        package("deb", out)
        version = project_version()
        debs = glob.glob(os.path.join(out, "ccpool_*.deb"))
        self.assertEqual([os.path.basename(d) for d in debs], [f"ccpool_{version}_amd64.deb"])
        deb = debs[0]
        self.check_control(deb, version)
        self.assertEqual(self.files_of(deb), self.expected_files())

        root = self.scratch_root(work)
        self.dpkg(root, "--force-depends", "-i", deb)
        self.assertEqual(self.ldconfig_calls(root), 1, "postinst runs ldconfig for /usr/lib/libccpool-shim.so")
        self.check_installed(root, work)
        self.dpkg(root, "--purge", "ccpool")
        self.assertEqual(self.ldconfig_calls(root), 2, "postrm runs ldconfig")
        left = {p for p in tree(root) if not p.startswith(("var", "fake-bin", "ldconfig.calls"))}
        self.assertEqual(left, set(), "dpkg --purge left files behind")

        if shutil.which("apt-get"):
            r = subprocess.run(["apt-get", "install", "--simulate", "./" + os.path.basename(deb)], cwd=out,
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn(f"Inst ccpool ({version}", r.stdout)

    def check_control(self, deb, version):
        control = run(["dpkg-deb", "-f", deb, "Package", "Version", "Architecture", "Depends"])
        fields = dict(line.split(": ", 1) for line in control.strip().splitlines())
        self.assertEqual((fields["Package"], fields["Version"], fields["Architecture"]), ("ccpool", version, "amd64"))
        depends = {d.split()[0] for d in fields["Depends"].split(", ")}
        for lib in ("libc6", "libstdc++6", "libtbb12", "liblmdb0", "libzstd1", "libhiredis0.14", "libssl3"):
            self.assertIn(lib, depends)

    def files_of(self, deb):
        listing = run(["dpkg-deb", "--contents", deb])
        return {line.split()[-1][1:] for line in listing.splitlines() if not line.split()[-1].endswith("/")}

    def expected_files(self):
        python = os.path.join(SOURCE, "python")
        package_files = {"/usr/share/ccpool/python/" + os.path.relpath(os.path.join(d, f), python)
                         for d, dirs, files in os.walk(os.path.join(python, "ccpool"))
                         for f in files if "__pycache__" not in d}
        docs = {"/usr/share/doc/ccpool/docs/" + f for f in os.listdir(os.path.join(SOURCE, "docs")) if f.endswith(".md")}
        return {"/usr/bin/ccpool", "/usr/bin/ccpool-cli", "/usr/bin/ccpool-client", "/usr/bin/ccpool-client-fast",
                "/usr/lib/libccpool-shim.so",
                "/usr/lib/libccpool-trace.so",
                "/usr/lib/python3/dist-packages/ccpool.pth", "/usr/lib/systemd/user/ccpool.socket",
                "/usr/lib/systemd/user/ccpool.service", "/usr/share/doc/ccpool/README.md",
                "/usr/share/doc/ccpool/ARCHITECTURE.md", "/usr/share/doc/ccpool/BENCHMARKS.md"} | package_files | docs

    def scratch_root(self, work):
        """An empty dpkg database, and ldconfig replaced by a recorder: the
        maintainer scripts run without chroot (the root has no shell), and
        must not touch this machine's loader cache."""
        root = os.path.join(work, "root")
        for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "fake-bin"):
            os.makedirs(os.path.join(root, d))
        open(os.path.join(root, "var/lib/dpkg/status"), "w").close()
        recorder = os.path.join(root, "fake-bin", "ldconfig")
        with open(recorder, "w") as f:
            f.write(f"#!/bin/sh\necho \"$@\" >> {root}/ldconfig.calls\n")
        os.chmod(recorder, 0o755)
        return root

    def dpkg(self, root, *args):
        env = dict(os.environ, PATH=f"{root}/fake-bin:/usr/sbin:/usr/bin:/sbin:/bin")
        return run(["dpkg", f"--root={root}", "--force-script-chrootless", *args], env=env)

    def ldconfig_calls(self, root):
        path = os.path.join(root, "ldconfig.calls")
        return len(open(path).read().splitlines()) if os.path.exists(path) else 0

    def check_installed(self, root, work):
        usr = os.path.join(root, "usr")
        env = {k: v for k, v in os.environ.items() if not k.startswith("CCPOOL_") and k != "LD_PRELOAD"}
        env["CCPOOL_SOCKET"] = os.path.join(work, "s", "sock")
        self.assertEqual(run([f"{usr}/bin/ccpool", "--version"], env=env).strip(), f"ccpool {project_version()}")
        settings = json.loads(run([f"{usr}/bin/ccpool", "env", "--shell", "json"], env=env))
        self.assertTrue(os.path.isfile(settings["LD_PRELOAD"]), settings["LD_PRELOAD"])
        self.assertEqual(os.path.realpath(settings["LD_PRELOAD"]), f"{usr}/lib/libccpool-shim.so")
        self.assertEqual(settings["CCPOOL_CLIENT"], f"{usr}/bin/ccpool-client")
        self.assertEqual(os.path.realpath(settings["PYTHONPATH"]), f"{usr}/share/ccpool/python/ccpool/_bootstrap")
        # Debian's python3 imports the package through the .pth, and it finds its binary.
        code = ("import site, sys; site.addsitedir(sys.argv[1]); import ccpool, ccpool._locate; "
                "print(ccpool._locate.ccpool_binary())")
        found = run(["/usr/bin/python3", "-c", code, f"{usr}/lib/python3/dist-packages"], env=env, cwd=work)
        self.assertEqual(found.strip(), f"{usr}/bin/ccpool")
        # The installed units, as systemd reads user units; ExecStart is the installed binary
        # (verify checks that the command exists, so it is pointed into the scratch root).
        units = os.path.join(work, "units")
        os.makedirs(units)
        for name in ("ccpool.socket", "ccpool.service"):
            with open(f"{usr}/lib/systemd/user/{name}") as f:
                text = f.read()
            if name == "ccpool.service":
                self.assertIn("\nExecStart=/usr/bin/ccpool serve --socket %t/ccpool/sock ", text)
                text = text.replace("ExecStart=/usr/bin/ccpool ", f"ExecStart={usr}/bin/ccpool ")
            with open(os.path.join(units, name), "w") as f:
                f.write(text)
        runtime = os.path.join(work, "xdg")
        os.makedirs(runtime, mode=0o700)
        r = subprocess.run(["systemd-analyze", "verify", "--user", os.path.join(units, "ccpool.socket"),
                            os.path.join(units, "ccpool.service")], env=dict(env, XDG_RUNTIME_DIR=runtime),
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


class SdistTest(unittest.TestCase):
    def test_sdist_holds_the_tracked_sources(self):
        work = scratch("sdist")
        out = os.path.join(work, "dist")
        package("sdist", out)
        version = project_version()
        sdists = glob.glob(os.path.join(out, "*.tar.gz"))
        self.assertEqual([os.path.basename(s) for s in sdists], [f"ccpool-{version}.tar.gz"])
        with tarfile.open(sdists[0]) as t:
            names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
            pkg_info = t.extractfile(f"ccpool-{version}/PKG-INFO").read().decode()
        self.assertIn(f"\nVersion: {version}\n", pkg_info)
        if shutil.which("git") and os.path.exists(os.path.join(SOURCE, ".git")):
            tracked = set(run(["git", "-C", SOURCE, "ls-files"]).splitlines())
            tracked = {p for p in tracked if os.path.exists(os.path.join(SOURCE, p))}
            self.assertEqual(tracked - names, set(), "tracked files missing from the sdist")
        build_dirs = {n for n in names if n.split("/")[0].startswith("build")}
        self.assertEqual(build_dirs, set(), "a build tree in the sdist")
        for must in ("pyproject.toml", "CMakeLists.txt", "cmake/packaging.cmake", "python/ccpool/__init__.py"):
            self.assertIn(must, names)


if __name__ == "__main__":
    main()
