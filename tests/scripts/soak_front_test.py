"""The chaos soak's Redis-front round trip (scripts/chaos_soak.py) against a
front that dies between accepting a connection into its backlog and serving
it, as a kill -9 of the service does: the round trip must count one error, as
Inductor's remote cache would, and not crash the rank.

Debian 12's python3-redis (4.3.4) turns that reset into an AttributeError
('UnixDomainSocketConnection' object has no attribute 'host', redis-py#1902,
#2496) rather than a ConnectionError; the short soak failed on it in CI.
Exit codes: 0 pass, 1 fail, 125 skip (python3-redis missing)."""
import argparse
import importlib.util
import os
import socket
import sys
import tempfile

SOURCE = os.environ.get("CCPOOL_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def main():
    try:
        import redis
    except ImportError:
        print("SKIP: python3-redis is not installed (scripts/setup-deps.sh installs it)", file=sys.stderr)
        return 125
    spec = importlib.util.spec_from_file_location("chaos_soak", os.path.join(SOURCE, "scripts", "chaos_soak.py"))
    soak = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(soak)

    path = os.path.join(tempfile.mkdtemp(prefix="ccpool-soak-front."), "resp.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(8)
    # The fault's timing, made certain: the listener goes away right after the
    # client's connect() lands in its backlog, so the client's first read sees
    # ECONNRESET, exactly what a service killed with connections queued leaves.
    real_connect = redis.connection.UnixDomainSocketConnection.connect

    def connect_then_die(self):
        real_connect(self)
        listener.close()

    redis.connection.UnixDomainSocketConnection.connect = connect_then_die
    try:
        got = soak.front_round_trip(argparse.Namespace(front=path, job="t"))
    except Exception as e:  # the bug: the rank died instead of counting an error
        print(f"FAIL: front_round_trip raised {type(e).__name__}: {e} (redis-py {redis.__version__})")
        return 1
    finally:
        redis.connection.UnixDomainSocketConnection.connect = real_connect
    if got != {"ok": 0, "mismatch": 0, "errors": 1}:
        print(f"FAIL: a front reset mid-connect gave {got}, want one error (redis-py {redis.__version__})")
        return 1
    print(f"ok: a front reset mid-connect counts one error (redis-py {redis.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
