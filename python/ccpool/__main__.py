"""`python -m ccpool ARGS` and the `ccpool` console script of the wheel: the
ccpool binary that belongs to this package, run with ARGS (it replaces this
interpreter, so exit codes, signals and output are the binary's own)."""
from __future__ import annotations

import os
import sys
from typing import List, NoReturn, Optional

from . import _locate


def main(argv: Optional[List[str]] = None) -> NoReturn:
    args = sys.argv[1:] if argv is None else argv
    try:
        binary = _locate.ccpool_binary()
    except FileNotFoundError as e:
        sys.stderr.write(f"ccpool: {e}\n")
        sys.exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(binary, [binary, *args])
    except OSError as e:
        sys.stderr.write(f"ccpool: cannot run {binary}: {e.strerror}; reinstall ccpool\n")
        sys.exit(126)


if __name__ == "__main__":
    main()
