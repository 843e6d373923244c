"""Triton 3.7.1's RedisRemoteCacheBackend cannot be constructed: its
__init__ reads knobs.cache.redis, but the Redis knobs live at knobs.redis
(AttributeError: 'cache_knobs' object has no attribute 'redis'). This is the
same backend with that one lookup fixed; everything else (the key format
triton:{key}:{filename}, MGET/SET) is Triton's own. CCPOOL_TEST_REDIS_PROTOCOL
(a test knob) holds the client to one RESP version; by default redis-py
chooses (8.x: RESP3)."""
import os

from triton import knobs
from triton.runtime.cache import RedisRemoteCacheBackend


class RedisBackend(RedisRemoteCacheBackend):
    def __init__(self, key):
        import redis
        self._key = key
        self._key_fmt = knobs.redis.key_format
        protocol = os.environ.get("CCPOOL_TEST_REDIS_PROTOCOL")
        self._redis = redis.Redis(host=knobs.redis.host, port=knobs.redis.port,
                                  protocol=int(protocol) if protocol else None)
