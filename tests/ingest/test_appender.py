"""Group commit in the API: concurrent requests share Redis calls, and none is lost or mixed up."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson
import pytest
import redis as redis_lib
import redis.asyncio as aioredis
from support import REDIS_URL

from sleepmem.adapters.redis.appender import GroupAppender
from sleepmem.core.errors import TransientError
from sleepmem.core.keys import Keys
from sleepmem.ingest.validation import validate_events
from sleepmem.models.events import EventFields

T = TypeVar("T")


def run(make: Callable[[aioredis.Redis], Awaitable[T]], url: str = REDIS_URL) -> T:
    """Run a coroutine on a fresh loop with its own async client (closed afterwards)."""

    async def main() -> T:
        client = aioredis.Redis.from_url(url)
        try:
            return await asyncio.wait_for(make(client), timeout=30)
        finally:
            await client.aclose()

    return asyncio.run(main())


def batch(request: int, size: int) -> list[EventFields]:
    return validate_events(
        [{"tenant": "t", "agent": "a", "content": f"r{request} e{i}"} for i in range(size)]
    )


class CountingScript:
    """The real script object, with its calls counted."""

    def __init__(self, script: Any) -> None:
        self.script = script
        self.calls: list[int] = []

    async def __call__(self, *, keys: list[str], args: list[bytes]) -> Any:
        self.calls.append(len(args))
        return await self.script(keys=keys, args=args)


def stored(redis: redis_lib.Redis, keys: Keys) -> dict[str, str]:
    """Stream id -> content of every entry in the test's event stream."""
    return {
        mid.decode(): orjson.loads(fields[b"e"])["content"]
        for mid, fields in redis.xrange(keys.events)
    }


class TestConcurrentRequests:
    def test_each_request_gets_the_ids_of_its_own_events(
        self, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        sizes = [1, 3, 1, 7, 2, 1, 5, 1] * 4

        async def go(client: aioredis.Redis) -> list[list[str]]:
            appender = GroupAppender(client, keys)
            return list(
                await asyncio.gather(*(appender.append(batch(r, n)) for r, n in enumerate(sizes)))
            )

        answers = run(go)
        content = stored(redis, keys)
        assert len(content) == sum(sizes)
        for request, (size, ids) in enumerate(zip(sizes, answers, strict=True)):
            assert [content[i] for i in ids] == [f"r{request} e{i}" for i in range(size)]

    def test_requests_waiting_behind_a_call_in_flight_share_the_next_one(
        self, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        async def go(client: aioredis.Redis) -> list[int]:
            appender = GroupAppender(client, keys, in_flight=1)
            counting = CountingScript(appender._script)
            appender._script = counting  # type: ignore[assignment]
            await asyncio.gather(*(appender.append(batch(r, 2)) for r in range(20)))
            return counting.calls

        calls = run(go)
        assert sum(calls) == 40
        assert len(calls) < 20

    def test_a_request_larger_than_a_group_goes_alone_and_whole(
        self, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        async def go(client: aioredis.Redis) -> list[int]:
            appender = GroupAppender(client, keys, group_max=5, in_flight=1)
            counting = CountingScript(appender._script)
            appender._script = counting  # type: ignore[assignment]
            sizes = [3, 3, 8, 2]
            await asyncio.gather(*(appender.append(batch(r, n)) for r, n in enumerate(sizes)))
            return counting.calls

        calls = run(go)
        assert 8 in calls
        assert all(n <= 5 for n in calls if n != 8)
        assert len(stored(redis, keys)) == 16

    def test_bursts_after_quiet_moments_never_strand_a_request(
        self, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        async def go(client: aioredis.Redis) -> int:
            appender = GroupAppender(client, keys, in_flight=2)
            done = 0
            for burst in range(30):
                answers = await asyncio.gather(
                    *(appender.append(batch(burst * 10 + r, 1)) for r in range(burst % 7 + 1))
                )
                done += len(answers)
                await asyncio.sleep(0)
            return done

        assert run(go) == sum(b % 7 + 1 for b in range(30))


class TestFailures:
    def test_every_waiting_request_hears_that_redis_is_down(self, keys: Keys) -> None:
        async def go(client: aioredis.Redis) -> list[BaseException | list[str]]:
            appender = GroupAppender(client, keys, in_flight=1)
            return list(
                await asyncio.gather(
                    *(appender.append(batch(r, 1)) for r in range(5)), return_exceptions=True
                )
            )

        results = run(go, url="redis://127.0.0.1:1/0")
        assert all(isinstance(r, TransientError) for r in results)
        assert "event log unavailable" in str(results[0])

    def test_a_request_that_goes_away_still_has_its_events_written(
        self, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        async def go(client: aioredis.Redis) -> list[str]:
            appender = GroupAppender(client, keys, in_flight=1)
            first = asyncio.create_task(appender.append(batch(0, 1)))
            leaving = asyncio.create_task(appender.append(batch(1, 1)))
            await asyncio.sleep(0)
            leaving.cancel()
            staying = await appender.append(batch(2, 1))
            await first
            with pytest.raises(asyncio.CancelledError):
                await leaving
            return staying

        staying = run(go)
        content = stored(redis, keys)
        assert sorted(content.values()) == ["r0 e0", "r1 e0", "r2 e0"]
        assert content[staying[0]] == "r2 e0"
