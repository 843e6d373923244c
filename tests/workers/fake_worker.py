"""A stand-in for python/ccpool/_worker.py in the WorkerPool tests: the same
channel protocol (workers/worker_wire.h) on fd 3, with jobs that are plain
commands instead of pickles, so the tests need no torch.

  echo:TEXT      answers TEXT
  sleep:S:TEXT   sleeps S seconds, then answers TEXT
  gate:DIR:TEXT  creates DIR/running.<pid>, waits for DIR/go, answers TEXT
  log:FILE:TEXT  appends "<pid> start TEXT" and "<pid> end TEXT" lines to FILE around a 0.2 s run
  exit:N         exits with status N without answering
  garbage        sends a frame header declaring 2**31 bytes
Every answer is "<TEXT>@<pid>"; the result's stats count one "jobs" and
report the worker's peak RSS. FAKE_WORKER_HELLO=0 makes it exit before hello;
FAKE_WORKER_HELLO=close:FILE makes it close its channel without a hello, create
FILE, and exit 1.5 s later (a worker that failed to start, still exiting);
FAKE_WORKER_HELLO_PID=N makes it greet as pid N.
With --zygote=1 it is a zygote (python/ccpool/_zygote.py, the real one) whose
forked workers run the loop below; FAKE_ZYGOTE_HELLO=0 makes the zygote itself
exit before its hello, and FAKE_ZYGOTE_PID=N makes it name pid N for each
worker it forks (a lying zygote).
"""
import json
import os
import resource
import socket
import struct
import sys
import time

HEADER = struct.Struct("<B3xQI")


def main():
    if "--zygote=1" in sys.argv[1:]:
        if os.environ.get("FAKE_ZYGOTE_HELLO") == "0":
            return 3
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
        from ccpool import _zygote

        lie = os.environ.get("FAKE_ZYGOTE_PID")
        if lie:
            real_fork = _zygote._fork
            _zygote._fork = lambda *args: (real_fork(*args), int(lie))[1]
        return _zygote.run(3, serve, {})
    return serve()


def serve():
    hello = os.environ.get("FAKE_WORKER_HELLO", "")
    if hello == "0":
        return 3
    if hello.startswith("close:"):
        os.close(3)
        open(hello.split(":", 1)[1], "w").close()
        time.sleep(1.5)
        return 3
    chan = socket.socket(fileno=3)
    if os.environ.get("FAKE_WORKER_RECORD"):
        with open(os.environ["FAKE_WORKER_RECORD"], "a") as f:
            f.write(f"{os.getpid()} {os.environ.get('WORKER_ENV_MARK', '')}\n")

    def send(kind, job_id, payload):
        chan.sendall(HEADER.pack(kind, job_id, len(payload)) + payload)

    def exact(n):
        data = b""
        while len(data) < n:
            chunk = chan.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    greet_as = int(os.environ.get("FAKE_WORKER_HELLO_PID", os.getpid()))
    send(1, 0, json.dumps({"pid": greet_as}).encode())
    while True:
        header = exact(HEADER.size)
        if header is None:
            return 0
        kind, job_id, length = HEADER.unpack(header)
        payload = exact(length) if length else b""
        if kind == 4:
            return 0
        command = payload.decode()
        if command.startswith("exit:"):
            return int(command.split(":")[1])
        if command == "garbage":
            chan.sendall(HEADER.pack(3, job_id, 1 << 31))
            time.sleep(5)
            return 0
        text = command.split(":")[-1]
        if command.startswith("sleep:"):
            time.sleep(float(command.split(":")[1]))
        elif command.startswith("gate:"):
            gate = command.split(":")[1]
            open(os.path.join(gate, f"running.{os.getpid()}"), "w").close()
            while not os.path.exists(os.path.join(gate, "go")):
                time.sleep(0.02)
        elif command.startswith("log:"):
            log = command.split(":")[1]
            with open(log, "a") as f:
                f.write(f"{os.getpid()} start {text}\n")
            time.sleep(0.2)
            with open(log, "a") as f:
                f.write(f"{os.getpid()} end {text}\n")
        answer = f"{text}@{os.getpid()}".encode()
        stats = json.dumps({"rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                            "counts": {"jobs": 1}}).encode()
        send(3, job_id, struct.pack("<I", len(stats)) + stats + answer)


if __name__ == "__main__":
    sys.exit(main())
