"""The exact redis-py calls PyTorch Inductor's and Triton's remote caches make,
reimplemented here (not copied) and pointed at the ccpool RESP front.

Usage: /usr/bin/python3 framework_compat_check.py --unix PATH --port N
  Inductor: TORCHINDUCTOR_REDIS_URL=unix://PATH or TORCHINDUCTOR_REDIS_HOST/_PORT;
            redis.Redis(host, port) or Redis.from_url(url); get(key) -> bytes | None;
            set(key, value, ex=ttl). Keys "pt2:<cache id>::<key>:c1", values JSON bytes.
  Triton:   TRITON_REDIS_HOST/_PORT; redis.Redis(host, port); mget([keys]) and
            set(key, value). Keys "triton:{key}:{filename}".
Each cache is used from two separate client objects, as two training processes
would: the second sees what the first stored.
"""
import argparse
import json
import sys

import redis

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


class InductorLikeCache:
    """Get and put of one Inductor cache, the way its Redis backend uses redis-py."""

    def __init__(self, cache_id, url=None, host=None, port=None, ttl=86400):
        self._prefix = f"pt2:{cache_id}::"
        self._ttl = ttl
        self._client = redis.Redis.from_url(url) if url else redis.Redis(host=host, port=port)

    def _key(self, key):
        return f"{self._prefix}{key}:c1"

    def get(self, key):
        data = self._client.get(self._key(key))
        return None if data is None else json.loads(data)

    def put(self, key, value):
        self._client.set(self._key(key), json.dumps(value).encode(), ex=self._ttl)

    def ttl(self, key):
        return self._client.ttl(self._key(key))


class TritonLikeBackend:
    """Triton's per-kernel remote cache: one key per file of a kernel's cache entry."""

    def __init__(self, kernel_key, host, port):
        self._kernel_key = kernel_key
        self._client = redis.Redis(host=host, port=port)

    def _key(self, filename):
        return f"triton:{self._kernel_key}:{filename}"

    def get(self, filenames):
        values = self._client.mget([self._key(f) for f in filenames])
        return {f: v for f, v in zip(filenames, values) if v is not None}

    def put(self, filename, data):
        self._client.set(self._key(filename), data)


def inductor(make):
    first, second = make(), make()
    key = "fxgraph-3f1e2d"
    check(first.get(key) is None, "inductor: miss before any put")
    graph = {"code": "def call(args):\n    return (args[0] * 2,)\n", "guards": ["L['x'].size()[0] == 8"],
             "artifact": bytes(range(256)).hex()}
    first.put(key, graph)
    check(second.get(key) == graph, "inductor: the second process hits what the first stored")
    check(1 <= second.ttl(key) <= 86400, "inductor: the put carried EX ttl")
    check(second.get("other") is None, "inductor: other keys still miss")


def triton(host, port):
    writer = TritonLikeBackend("a1b2c3", host, port)
    reader = TritonLikeBackend("a1b2c3", host, port)
    files = {"kernel.cubin": bytes(range(256)) * 300, "kernel.json": b'{"num_warps": 4}', "kernel.ptx": b"//ptx"}
    check(reader.get(list(files)) == {}, "triton: all files miss before put")
    for name, data in files.items():
        writer.put(name, data)
    check(reader.get(list(files) + ["kernel.llir"]) == files, "triton: mget returns every stored file, skips the missing")
    check(TritonLikeBackend("other", host, port).get(list(files)) == {}, "triton: another kernel key misses")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--unix", required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    inductor(lambda: InductorLikeCache("unix-run", url=f"unix://{args.unix}"))
    inductor(lambda: InductorLikeCache("url-run", url=f"redis://127.0.0.1:{args.port}"))
    inductor(lambda: InductorLikeCache("tcp-run", host="127.0.0.1", port=args.port))
    triton("127.0.0.1", args.port)
    print(f"framework_compat_check: {len(failures)} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
