"""redis-py (Debian's python3-redis) against the ccpool RESP front.

Usage: /usr/bin/python3 redis_py_check.py --unix PATH --port N
Runs every check over the Unix socket and over loopback TCP. Exit 0 when all
pass; otherwise prints each failure and exits 1.
"""
import argparse
import sys
import threading
import time

import redis

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def expect_error(fn, fragment, what):
    try:
        fn()
    except redis.exceptions.ResponseError as e:
        check(fragment in str(e), f"{what}: got {e!r}, want {fragment!r}")
        return
    check(False, f"{what}: no error raised")


def basics(r, tag):
    k = f"{tag}:basic"
    check(r.ping() is True, f"{tag} ping")
    check(r.set(k, b"v1") is True, f"{tag} set")
    check(r.get(k) == b"v1", f"{tag} get")
    check(r.get(f"{tag}:missing") is None, f"{tag} get missing")
    check(r.mset({f"{tag}:a": b"1", f"{tag}:b": b""}) is True, f"{tag} mset")
    check(r.mget([f"{tag}:a", f"{tag}:nope", f"{tag}:b"]) == [b"1", None, b""], f"{tag} mget")
    check(r.exists(f"{tag}:a", f"{tag}:b", f"{tag}:nope") == 2, f"{tag} exists")
    check(r.delete(f"{tag}:a", f"{tag}:nope") == 1, f"{tag} delete")
    check(r.exists(f"{tag}:a") == 0, f"{tag} deleted")
    check(r.echo(b"hi") == b"hi", f"{tag} echo")
    check(r.client_setname("rank0") is True and r.client_getname() in (b"rank0", "rank0"), f"{tag} client name")
    check(isinstance(r.client_id(), int), f"{tag} client id")
    check("redis_version" in r.info(), f"{tag} info")
    check(r.execute_command("SELECT", 0) in (True, b"OK", "OK"), f"{tag} select 0")


def conditional_and_expiry(r, tag):
    k = f"{tag}:cond"
    check(r.set(k, b"x", xx=True) is None, f"{tag} set xx on missing")
    check(r.set(k, b"x", nx=True) is True, f"{tag} set nx on missing")
    check(r.set(k, b"y", nx=True) is None, f"{tag} set nx on present")
    check(r.set(k, b"z", xx=True) is True and r.get(k) == b"z", f"{tag} set xx on present")
    check(r.set(f"{tag}:ex", b"v", ex=100) is True, f"{tag} set ex")
    check(1 <= r.ttl(f"{tag}:ex") <= 100, f"{tag} ttl within ex")
    check(r.ttl(k) == -1 and r.ttl(f"{tag}:none") == -2, f"{tag} ttl of plain and missing keys")
    check(r.expire(k, 100) is True and 1 <= r.ttl(k) <= 100, f"{tag} expire")
    check(r.set(f"{tag}:px", b"v", px=50) is True, f"{tag} set px")
    time.sleep(0.3)  # past the deadline: the key must read as missing
    check(r.get(f"{tag}:px") is None and r.exists(f"{tag}:px") == 0, f"{tag} px expiry")


def binary(r, tag):
    every_byte = bytes(range(256))
    check(r.set(every_byte, every_byte * 64) is True, f"{tag} set binary key and value")
    check(r.get(every_byte) == every_byte * 64, f"{tag} binary round trip")
    check(r.mget([every_byte]) == [every_byte * 64], f"{tag} binary mget")
    big = bytes(range(256)) * 16384  # 4 MiB
    check(r.set(f"{tag}:big", big) is True and r.get(f"{tag}:big") == big, f"{tag} 4 MiB value")


def pipelining(r, tag):
    pipe = r.pipeline(transaction=False)
    for i in range(500):
        pipe.set(f"{tag}:p{i}", str(i))
        pipe.get(f"{tag}:p{i}")
    pipe.execute_command("NOSUCH", "x")
    pipe.get(f"{tag}:p0")
    results = pipe.execute(raise_on_error=False)
    check(len(results) == 1002, f"{tag} pipeline reply count {len(results)}")
    check(all(results[2 * i] is True and results[2 * i + 1] == str(i).encode() for i in range(500)),
          f"{tag} pipeline replies in order")
    check(isinstance(results[1000], redis.exceptions.ResponseError), f"{tag} pipelined error in place")
    check(results[1001] == b"0", f"{tag} reply after a pipelined error")


def errors(r, tag):
    expect_error(lambda: r.execute_command("FOO", "a", "b"),
                 "unknown command 'FOO', with args beginning with: 'a' 'b'", f"{tag} unknown command")
    expect_error(lambda: r.execute_command("GET"), "wrong number of arguments for 'get' command", f"{tag} arity")
    expect_error(lambda: r.execute_command("SELECT", 3), "DB index is out of range", f"{tag} select 3")
    expect_error(lambda: r.execute_command("HELLO", 4), "unsupported protocol version", f"{tag} hello 4")
    expect_error(lambda: r.set(f"{tag}:k", "v", ex=0), "invalid expire time", f"{tag} ex 0")


def concurrent(make_client, tag, count=64):
    """count clients connected at once; INFO sees them all before any leaves."""
    ready = threading.Barrier(count + 1)
    leave = threading.Barrier(count + 1)
    ok = [False] * count

    def worker(i):
        c = make_client()
        try:
            c.set(f"{tag}:c{i}", i)
            good = c.get(f"{tag}:c{i}") == str(i).encode()
            ready.wait(timeout=30)
            leave.wait(timeout=30)
            ok[i] = good and c.ping()
        finally:
            c.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    ready.wait(timeout=30)
    observer = make_client()
    connected = int(observer.info("clients")["connected_clients"])
    leave.wait(timeout=30)
    for t in threads:
        t.join()
    check(connected >= count + 1, f"{tag} connected_clients {connected} with {count} clients open")
    check(all(ok), f"{tag} all {count} concurrent clients round-tripped")
    observer.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--unix", required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    clients = {
        "unix": lambda: redis.Redis(unix_socket_path=args.unix),
        "url": lambda: redis.Redis.from_url(f"unix://{args.unix}"),
        "tcp": lambda: redis.Redis(host="127.0.0.1", port=args.port),
    }
    for tag, make in clients.items():
        r = make()
        basics(r, tag)
        conditional_and_expiry(r, tag)
        binary(r, tag)
        pipelining(r, tag)
        errors(r, tag)
        r.close()
    concurrent(clients["unix"], "unix-conc")
    concurrent(clients["tcp"], "tcp-conc")
    print(f"redis_py_check: redis-py {redis.__version__}, {len(failures)} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
