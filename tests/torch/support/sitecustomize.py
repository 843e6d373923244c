"""Loaded by every Python process of a torch test (PYTHONPATH): records each
subprocess the process starts (argv, cwd) as one JSON line in
$CCPOOL_TORCH_EXECLOG. That is the test's independent view of what Inductor
and Triton ran (ranks, compile workers), to compare with the service's
counters. Appends of one short line are atomic (O_APPEND, one write)."""
import json
import os
import sys

_LOG = os.environ.get("CCPOOL_TORCH_EXECLOG")

if _LOG:
    def _record(event, args):
        if event != "subprocess.Popen":
            return
        try:
            exe, argv, cwd, _env = args
            if isinstance(argv, (str, bytes)):
                argv = [argv]
            line = json.dumps({"pid": os.getpid(), "argv": [os.fsdecode(a) for a in argv],
                               "cwd": os.fsdecode(cwd) if cwd else os.getcwd()}) + "\n"
            fd = os.open(_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        except Exception:  # never break the program under test
            pass

    sys.addaudithook(_record)
