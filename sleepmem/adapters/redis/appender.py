"""Group commit for the API: events of concurrent requests reach Redis in one script call.

Under load, the round trip through redis-py's async client was a quarter of an ingest
request's cost. A few calls may be in flight at once (so that large batches still overlap
their transfers); appends that arrive while all of them are busy wait and go together in
the next call: one round trip for many requests, and no added wait on a quiet server,
where every append leaves at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import redis
import redis.asyncio as aioredis

from sleepmem.adapters.redis.stream import (
    APPEND_SCRIPT,
    APPEND_TRACED_SCRIPT,
    encode_many,
    text,
)
from sleepmem.core.errors import TransientError
from sleepmem.core.keys import Keys
from sleepmem.core.tracing import current_traceparent
from sleepmem.models.events import EventFields

# Events per shared call: bounds how long one script call holds the server (~1-2 ms).
GROUP_MAX = 1000


@dataclass(slots=True)
class _Append:
    payloads: list[bytes]
    traceparent: bytes = b""
    ids: asyncio.Future[list[str]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class GroupAppender:
    """Appends for one event loop; each request's events land together or not at all."""

    def __init__(
        self,
        client: aioredis.Redis,
        keys: Keys,
        *,
        group_max: int = GROUP_MAX,
        in_flight: int = 4,
    ) -> None:
        self._keys = keys
        self._script = client.register_script(APPEND_SCRIPT)
        self._traced_script = client.register_script(APPEND_TRACED_SCRIPT)
        self._group_max = group_max
        self._in_flight = in_flight
        self._waiting: list[_Append] = []
        self._flushers: set[asyncio.Task[None]] = set()

    async def append(self, events: Sequence[EventFields]) -> list[str]:
        """XADD the events (redacted) with whatever else is waiting; returns their stream ids.

        If the caller goes away while waiting, its events are still written: they were
        accepted, and the drain stores a resent copy once (event ids are idempotency keys).
        """
        item = _Append(encode_many(events), current_traceparent().encode())
        self._waiting.append(item)
        if len(self._flushers) < self._in_flight:
            self._flushers.add(asyncio.create_task(self._flush()))
        return await item.ids

    async def _flush(self) -> None:
        try:
            while self._waiting:
                await self._send(self._take())
        finally:
            # Here, not in a done callback: that runs a loop turn later, and an append made
            # in between would see a full set of flushers that are all leaving.
            task = asyncio.current_task()
            if task is not None:
                self._flushers.discard(task)

    def _take(self) -> list[_Append]:
        # Whole requests only, so that one script call (atomic in Redis) holds each of them;
        # a request larger than the group goes alone.
        size = 0
        count = 0
        for item in self._waiting:
            if count and size + len(item.payloads) > self._group_max:
                break
            size += len(item.payloads)
            count += 1
        group, self._waiting = self._waiting[:count], self._waiting[count:]
        return group

    async def _send(self, group: list[_Append]) -> None:
        if any(item.traceparent for item in group):
            script = self._traced_script
            args = [x for item in group for p in item.payloads for x in (p, item.traceparent)]
        else:
            script = self._script
            args = [p for item in group for p in item.payloads]
        try:
            ids = [text(i) for i in await script(keys=[self._keys.events], args=args)]
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            _fail(group, TransientError(f"event log unavailable: {type(exc).__name__}"))
        except Exception as exc:
            _fail(group, exc)
        else:
            start = 0
            for item in group:
                end = start + len(item.payloads)
                if not item.ids.done():  # done = its request was cancelled
                    item.ids.set_result(ids[start:end])
                start = end


def _fail(group: list[_Append], exc: BaseException) -> None:
    for item in group:
        if not item.ids.done():
            item.ids.set_exception(exc)
