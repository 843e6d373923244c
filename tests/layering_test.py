"""The layers of ARCHITECTURE.md ("The parts"), checked on the includes.

CMake links each folder only to the layers it may use, but the include root
is the whole source tree, so an include of header-only code (types,
constants, inline functions, templates) from a layer a folder does not link
compiles and links anyway. This test reads every `#include "<folder>/..."`
of every library folder and fails naming each one outside the folder's row
below, which mirrors the table in ARCHITECTURE.md.

Run:  /usr/bin/python3 tests/layering_test.py   (CTest: layering)
"""
import os
import re
import sys

ROOT = os.environ.get("CCPOOL_SOURCE_DIR",
                      os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BELOW_SERVICE = {"base", "cache", "pool", "ipc", "compiler", "remote", "resp", "workers"}
# folder -> the folders its sources may include (besides its own)
MAY_INCLUDE = {
    "base": set(),
    "cache": {"base"},
    "pool": {"base"},
    "ipc": {"base"},
    "compiler": {"base"},
    "remote": {"base"},
    "resp": {"base"},
    "launch": {"base"},
    "workers": {"base", "pool"},
    "client": {"base", "ipc"},
    "service": BELOW_SERVICE,
    "cli": BELOW_SERVICE | {"service", "client", "launch"},
    "preload": set(),       # header-only plain C on libc, shared by the two below
    "shim": {"preload"},    # plain C on libc and libdl
    "trace": {"preload"},   # plain C on libc and libdl
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)


def violations():
    found = []
    for folder, allowed in sorted(MAY_INCLUDE.items()):
        directory = os.path.join(ROOT, folder)
        for name in sorted(os.listdir(directory)):
            if not name.endswith((".h", ".c", ".cpp")):
                continue
            with open(os.path.join(directory, name), encoding="utf-8", errors="replace") as f:
                text = f.read()
            for target in INCLUDE.findall(text):
                if target != folder and target in MAY_INCLUDE and target not in allowed:
                    found.append(f"{folder}/{name} includes {target}/: {folder}/ may include "
                                 f"{', '.join(sorted(allowed)) or 'nothing of ours'} "
                                 "(ARCHITECTURE.md, The parts)")
    return found


def main():
    missing = [f for f in MAY_INCLUDE if not os.path.isdir(os.path.join(ROOT, f))]
    if missing:
        print(f"layering: no folder {', '.join(missing)} under {ROOT}: update MAY_INCLUDE "
              "and ARCHITECTURE.md together", file=sys.stderr)
        return 1
    found = violations()
    for line in found:
        print(line, file=sys.stderr)
    if not found:
        print(f"layering: the includes of {len(MAY_INCLUDE)} folders follow ARCHITECTURE.md")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
