"""Django's Redis cache, with one Redis client per connection pool instead of one per call.

Django's client makes a new `redis.Redis` for every cache operation, and each one copies
redis-py's table of about 170 response callbacks: a third of a millisecond of CPU per `get`,
which an open job page's poll (jobs.polling) paid more than once. redis-py's clients are safe
to share between threads (each command takes a connection from the pool and gives it back),
and the pool itself notices a fork.
"""

from __future__ import annotations

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient


class SharedClientRedisCacheClient(RedisCacheClient):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, object] = {}

    def get_client(self, key=None, *, write: bool = False):
        index = self._get_connection_pool_index(write)
        client = self._clients.get(index)
        if client is None:
            client = self._client(connection_pool=self._get_connection_pool(write))
            self._clients[index] = client
        return client


class RedisCache(DjangoRedisCache):
    def __init__(self, server, params) -> None:
        super().__init__(server, params)
        self._class = SharedClientRedisCacheClient
