"""ccpool._locate: the package finds its binary in the wheel's layout and in
an install prefix, and names both places when it is in neither."""
from __future__ import annotations

import os

import pytest

from ccpool import _locate


def make_exe(path: str) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n")
    os.chmod(path, 0o755)
    return path


def test_wheel_layout(tmp_path: os.PathLike[str]) -> None:
    package = os.path.join(tmp_path, "site-packages", "ccpool")
    binary = make_exe(os.path.join(package, "_native", "bin", "ccpool"))
    assert _locate.ccpool_binary(package) == binary


def test_install_prefix_layout(tmp_path: os.PathLike[str]) -> None:
    package = os.path.join(tmp_path, "usr", "share", "ccpool", "python", "ccpool")
    os.makedirs(package)
    binary = make_exe(os.path.join(tmp_path, "usr", "bin", "ccpool"))
    assert _locate.ccpool_binary(package) == binary


def test_wheel_private_copy_finds_the_wheel_binary(tmp_path: os.PathLike[str]) -> None:
    native = os.path.join(tmp_path, "site-packages", "ccpool", "_native")
    private = os.path.join(native, "share", "ccpool", "python", "ccpool")
    os.makedirs(private)
    binary = make_exe(os.path.join(native, "bin", "ccpool"))
    assert _locate.ccpool_binary(private) == binary


def test_build_tree_package_finds_the_build_binary() -> None:
    assert _locate.ccpool_binary() == os.path.join(os.environ["CCPOOL_BUILD_DIR"], "bin", "ccpool")


def test_missing_binary_names_both_places_and_the_fix(tmp_path: os.PathLike[str]) -> None:
    package = os.path.join(tmp_path, "lib", "ccpool")
    os.makedirs(package)
    make_exe(os.path.join(package, "_native", "bin", "ccpool"))
    os.chmod(os.path.join(package, "_native", "bin", "ccpool"), 0o644)  # not executable: not taken
    with pytest.raises(FileNotFoundError) as e:
        _locate.ccpool_binary(package)
    message = str(e.value)
    assert os.path.join(package, "_native", "bin", "ccpool") in message
    assert os.path.normpath(os.path.join(package, "..", "..", "..", "..", "bin", "ccpool")) in message
    assert "reinstall ccpool" in message
