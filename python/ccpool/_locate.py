"""Where the ccpool binaries are, seen from this package.

The package sits in one of two layouts (docs/packaging.md):
- the wheel: site-packages/ccpool/ with an install prefix of its own in
  ccpool/_native/ (bin/ccpool, lib/libccpool-shim.so, share/ccpool/python);
- an install prefix (cmake --install, the .deb, the build tree):
  <prefix>/share/ccpool/python/ccpool beside <prefix>/bin/ccpool. The
  wheel's private copy of the package (ccpool/_native/share/ccpool/python/
  ccpool) is this layout too.
The binaries find the shim, the client and the package from their own
directory (launch/launch_env.h), the same way in both."""
from __future__ import annotations

import os
from typing import List

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def candidate_bin_dirs(package_dir: str = PACKAGE_DIR) -> List[str]:
    """Directories that may hold the `ccpool` binary, in the order tried:
    the wheel's <package>/_native/bin, then <prefix>/bin for a package in
    <prefix>/share/ccpool/python/ccpool."""
    return [
        os.path.join(package_dir, "_native", "bin"),
        os.path.normpath(os.path.join(package_dir, os.pardir, os.pardir, os.pardir, os.pardir, "bin")),
    ]


def ccpool_binary(package_dir: str = PACKAGE_DIR) -> str:
    """The `ccpool` binary that belongs to this package. Raises
    FileNotFoundError naming every place tried and the fix."""
    tried = []
    for directory in candidate_bin_dirs(package_dir):
        path = os.path.join(directory, "ccpool")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        tried.append(path)
    raise FileNotFoundError(
        f"the ccpool binary that belongs to the Python package {package_dir} is not at "
        f"{' or '.join(tried)}; reinstall ccpool (pip install --force-reinstall ccpool), or import the "
        "package from its install prefix (<prefix>/share/ccpool/python) rather than from the source tree")
