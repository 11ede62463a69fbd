"""The Redis side of erasure: what the request path keeps outside SQL for a scope.

Implements :class:`sleepmem.pipelines.ports.HotStore` over the ingest stream, the
retrieval-hit stream, the consolidation leases, the per-scope queued markers and the
session checkpoints.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, suppress

import orjson
import redis as redis_lib

from sleepmem.adapters.redis.hits import bump_hits_epoch
from sleepmem.adapters.redis.locks import Lease
from sleepmem.core.errors import LeaseHeldError
from sleepmem.core.keys import DRAIN_GROUP, Keys
from sleepmem.models import LEVELS

STREAM_PAGE = 1000
# A consolidation already running on a scope is given this long to finish.
LEASE_WAIT_S = 30.0
ERASE_LEASE_TTL_S = 600.0


class RedisHotStore:
    def __init__(self, redis: redis_lib.Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys

    def hold_scopes(self, scope_keys: Sequence[str]) -> AbstractContextManager[object]:
        """Hold every affected scope's consolidation lease, waiting a little for running ones."""
        stack = ExitStack()
        try:
            for scope_key in scope_keys:
                deadline = time.monotonic() + LEASE_WAIT_S
                while True:
                    try:
                        lease = Lease(self._redis, self._keys.lease(scope_key),
                                      ttl_s=ERASE_LEASE_TTL_S)
                        stack.enter_context(lease)
                        break
                    except LeaseHeldError:
                        if time.monotonic() >= deadline:
                            raise
                        time.sleep(0.2)
        except BaseException:
            stack.close()
            raise
        return stack

    def erase_pending_events(self, covers: Callable[[dict[str, str]], bool]) -> int:
        """Entries still waiting in the ingest stream (not drained yet) whose scope
        ``covers`` accepts."""
        doomed: list[bytes] = []
        for entry_id, fields in self._entries(self._keys.events):
            payload = fields.get(b"e", b"")
            try:
                data = orjson.loads(payload)
            except orjson.JSONDecodeError:
                continue
            if isinstance(data, dict) and covers(
                {lvl: str(data.get(lvl) or "") for lvl in LEVELS}
            ):
                doomed.append(entry_id)
        for i in range(0, len(doomed), STREAM_PAGE):
            chunk = doomed[i : i + STREAM_PAGE]
            with suppress(redis_lib.ResponseError):  # no consumer group yet: nothing delivered
                self._redis.xack(self._keys.events, DRAIN_GROUP, *chunk)
            self._redis.xdel(self._keys.events, *chunk)
        return len(doomed)

    def erase_hits(self, memory_ids: set[str]) -> int:
        """Hit entries naming erased memories; the other ids of an entry are re-added."""
        if not memory_ids:
            return 0
        # First: a search still in flight may have read these memories; its hits are now
        # refused instead of landing after this scan.
        bump_hits_epoch(self._redis, self._keys)
        n = 0
        for entry_id, fields in list(self._entries(self._keys.hits)):
            named = [i for i in fields.get(b"ids", b"").decode().split(",") if i]
            if not memory_ids & set(named):
                continue
            rest = [i for i in named if i not in memory_ids]
            if rest:
                self._redis.xadd(
                    self._keys.hits, {"ids": ",".join(rest), "at": fields.get(b"at", b"0")}
                )
            self._redis.xdel(self._keys.hits, entry_id)
            n += 1
        return n

    def erase_scope_markers(self, scope_keys: Sequence[str]) -> int:
        """Queued markers now; the leases go when the erasure releases them."""
        doomed = [self._keys.queued(k) for k in scope_keys]
        return int(self._redis.delete(*doomed)) if doomed else 0

    def erase_checkpoints(self, covers: Callable[[dict[str, str]], bool]) -> int:
        """Session checkpoints live under a hash of their scope; the document names it."""
        doomed: list[str] = []
        erased = 0
        for key in self._redis.scan_iter(match=f"{self._keys.namespace}:ckpt:*", count=1000):
            name = key.decode()
            digest = name.rsplit(":", 1)[-1]
            if name == self._keys.checkpoints_dirty or name != self._keys.checkpoint(digest):
                continue  # the dirty set, or a history list (it goes with its hash)
            doc = self._redis.hget(key, "doc")
            try:
                levels = orjson.loads(doc)["scope"] if doc else None
            except (orjson.JSONDecodeError, KeyError, TypeError):
                levels = None
            if levels is not None and covers(levels):
                doomed += [self._keys.checkpoint(digest), self._keys.checkpoint_history(digest)]
                self._redis.zrem(self._keys.checkpoints_dirty, digest)
                erased += 1
        if doomed:
            self._redis.delete(*doomed)
        return erased

    def _entries(self, key: str) -> Iterator[tuple[bytes, dict[bytes, bytes]]]:
        start = "-"
        while True:
            page = self._redis.xrange(key, min=start, max="+", count=STREAM_PAGE)
            if not page:
                return
            yield from page
            start = "(" + page[-1][0].decode()
            if len(page) < STREAM_PAGE:
                return


# How long an erasure waits for Redis to rewrite its files before reporting it unfinished.
REWRITE_WAIT_S = 120.0


def rewrite_persistence(
    client: redis_lib.Redis, *, timeout_s: float = REWRITE_WAIT_S
) -> dict[str, str]:
    """Rewrite Redis's files so that erased keys and stream entries leave the disk too.

    Deleting a key removes it from memory, but the append-only file still holds every
    command that wrote it (until Redis rewrites it on its own, at 64 MB by default) and an
    RDB snapshot holds the data as of its last save. ``BGREWRITEAOF`` then ``BGSAVE``, each
    waited on, leave only what is live now. The answer names each file's state.
    """
    out: dict[str, str] = {}
    try:
        info = client.info("persistence")
    except redis_lib.RedisError as exc:
        return {"redis_aof": f"not rewritten: {type(exc).__name__}"}
    if int(info.get("aof_enabled", 0)):
        out["redis_aof"] = _run_and_wait(
            client,
            "BGREWRITEAOF",
            "aof_rewrite_in_progress",
            "aof_last_bgrewrite_status",
            timeout_s,
            also="aof_rewrite_scheduled",
        )
    else:
        out["redis_aof"] = "off (append-only file disabled)"
    out["redis_rdb"] = _run_and_wait(
        client, "BGSAVE", "rdb_bgsave_in_progress", "rdb_last_bgsave_status", timeout_s
    )
    return out


def _run_and_wait(
    client: redis_lib.Redis,
    command: str,
    busy: str,
    status: str,
    timeout_s: float,
    *,
    also: str | None = None,
) -> str:
    deadline = time.monotonic() + timeout_s

    def running() -> bool:
        info = client.info("persistence")
        return bool(int(info.get(busy, 0)) or (also is not None and int(info.get(also, 0))))

    # One already running started before the erasure: wait for it, then start ours.
    while running():
        if time.monotonic() >= deadline:
            return f"not rewritten: a {command} already running did not finish in time"
        time.sleep(0.05)
    try:
        client.execute_command(command)
    except redis_lib.ResponseError as exc:
        return f"not rewritten: {exc}"
    while running():
        if time.monotonic() >= deadline:
            return f"rewrite started, not finished after {timeout_s:.0f} s"
        time.sleep(0.05)
    result = str(client.info("persistence").get(status, "ok"))
    return "rewritten" if result == "ok" else f"rewrite failed ({result})"
