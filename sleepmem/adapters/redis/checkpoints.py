"""Session checkpoints in Redis: one atomic script call per write, compare-version-and-set.

A checkpoint is a hash ``{v: version, doc: JSON document, ended: ISO time}``. A write
names the version it replaces; the script compares, sets, pushes the document onto the
session's (trimmed) history list and marks the session dirty for the SQL mirror, all in
one round trip that either happens whole or not at all. Documents are redacted before
they get here; keys hold a hash of the scope, never its names.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis
import redis.asyncio as aioredis

from sleepmem.core.errors import TransientError
from sleepmem.core.keys import Keys

# KEYS: hash, history list, dirty zset.
# ARGV: base version, document, history length, dirty score, digest.
# Returns {1, new version} | {0, current version} (stale) | {-1, current version} (ended).
_PUT = """
local cur = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if cur ~= tonumber(ARGV[1]) then return {0, cur} end
if redis.call('HEXISTS', KEYS[1], 'ended') == 1 then return {-1, cur} end
redis.call('HSET', KEYS[1], 'v', cur + 1, 'doc', ARGV[2])
redis.call('LPUSH', KEYS[2], ARGV[2])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[3]) - 1)
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[5])
return {1, cur + 1}
"""

# Re-seed from the SQL mirror after Redis lost a checkpoint: only into an empty slot.
# KEYS: hash, history list. ARGV: version, document, ended ('' = live).
_SEED = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'doc', ARGV[2])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'ended', ARGV[3]) end
redis.call('RPUSH', KEYS[2], ARGV[2])
return 1
"""

# KEYS: hash, history list, dirty zset. ARGV: ended ISO time, ttl s, dirty score, digest.
# Returns the version ended, 0 when there is no checkpoint. Ending twice keeps the first time.
_END = """
local cur = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if cur == 0 then return 0 end
redis.call('HSETNX', KEYS[1], 'ended', ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[4])
return cur
"""

# Forget a dirty mark only if no write came after the mirror read it.
_CLEAN = """
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) == tonumber(ARGV[2]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
"""


@dataclass(frozen=True, slots=True)
class Stored:
    version: int
    doc: bytes
    ended: str | None


@dataclass(frozen=True, slots=True)
class PutOutcome:
    """``written`` True: ``version`` is the new version. Else ``version`` is the current one
    and ``ended`` tells whether the write was refused because the session ended."""

    written: bool
    version: int
    ended: bool = False


class CheckpointStore:
    def __init__(self, client: redis.Redis, keys: Keys, *, history: int) -> None:
        self._redis = client
        self._keys = keys
        self._history = max(1, history)
        self._put = client.register_script(_PUT)
        self._seed = client.register_script(_SEED)
        self._end = client.register_script(_END)
        self._clean = client.register_script(_CLEAN)

    def put(self, digest: str, *, base: int, doc: bytes, at: float) -> PutOutcome:
        k = self._keys
        try:
            ok, version = self._put(
                keys=[k.checkpoint(digest), k.checkpoint_history(digest),
                      k.checkpoints_dirty],
                args=[base, doc, self._history, repr(at), digest],
            )
        except redis.RedisError as exc:
            raise TransientError(f"checkpoint store unavailable: {exc}") from exc
        return PutOutcome(written=ok == 1, version=int(version), ended=ok == -1)

    def get(self, digest: str) -> Stored | None:
        try:
            v, doc, ended = self._redis.hmget(self._keys.checkpoint(digest), "v", "doc", "ended")
        except redis.RedisError as exc:
            raise TransientError(f"checkpoint store unavailable: {exc}") from exc
        if v is None or doc is None:
            return None
        return Stored(version=int(v), doc=doc, ended=ended.decode() if ended else None)

    def history(self, digest: str, *, limit: int) -> list[bytes]:
        try:
            docs = self._redis.lrange(self._keys.checkpoint_history(digest), 0, limit - 1)
        except redis.RedisError as exc:
            raise TransientError(f"checkpoint store unavailable: {exc}") from exc
        return list(docs)

    def seed(self, digest: str, *, version: int, doc: bytes, ended: str | None) -> bool:
        k = self._keys
        return bool(self._seed(keys=[k.checkpoint(digest), k.checkpoint_history(digest)],
                               args=[version, doc, ended or ""]))

    def end(self, digest: str, *, ended: str, ttl_s: int, at: float) -> int:
        k = self._keys
        return int(self._end(
            keys=[k.checkpoint(digest), k.checkpoint_history(digest), k.checkpoints_dirty],
            args=[ended, max(1, ttl_s), repr(at), digest],
        ))

    def dirty(self, *, limit: int) -> list[tuple[str, float]]:
        rows = self._redis.zrange(self._keys.checkpoints_dirty, 0, limit - 1, withscores=True)
        return [(d.decode(), float(s)) for d, s in rows]

    def clean(self, digest: str, score: float) -> None:
        self._clean(keys=[self._keys.checkpoints_dirty], args=[digest, repr(score)])

    def delete(self, digest: str) -> int:
        k = self._keys
        return int(self._redis.delete(k.checkpoint(digest), k.checkpoint_history(digest)))

    def read(self, digest: str) -> tuple[Stored | None, list[bytes]]:
        """The hash and the whole history list of one checkpoint, in one round trip."""
        pipe = self._redis.pipeline(transaction=False)
        pipe.hmget(self._keys.checkpoint(digest), "v", "doc", "ended")
        pipe.lrange(self._keys.checkpoint_history(digest), 0, -1)
        (v, doc, ended), docs = pipe.execute()
        stored = None
        if v is not None and doc is not None:
            stored = Stored(version=int(v), doc=doc, ended=ended.decode() if ended else None)
        return stored, list(docs)


class AsyncCheckpointStore:
    """The request-path half of :class:`CheckpointStore` for an event loop (the API)."""

    def __init__(self, client: aioredis.Redis, keys: Keys, *, history: int) -> None:
        self._redis = client
        self._keys = keys
        self._history = max(1, history)
        self._put = client.register_script(_PUT)

    async def put(self, digest: str, *, base: int, doc: bytes, at: float) -> PutOutcome:
        k = self._keys
        try:
            ok, version = await self._put(
                keys=[k.checkpoint(digest), k.checkpoint_history(digest), k.checkpoints_dirty],
                args=[base, doc, self._history, repr(at), digest],
            )
        except redis.RedisError as exc:
            raise TransientError(f"checkpoint store unavailable: {exc}") from exc
        return PutOutcome(written=ok == 1, version=int(version), ended=ok == -1)

    async def get(self, digest: str) -> Stored | None:
        try:
            v, doc, ended = await self._redis.hmget(
                self._keys.checkpoint(digest), "v", "doc", "ended"
            )
        except redis.RedisError as exc:
            raise TransientError(f"checkpoint store unavailable: {exc}") from exc
        if v is None or doc is None:
            return None
        return Stored(version=int(v), doc=doc, ended=ended.decode() if ended else None)
