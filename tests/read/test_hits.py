"""A search's retrieval hits: written after it answers, never after an erasure of them."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest
import redis as redis_lib
from prometheus_client import REGISTRY

from sleepmem.adapters.redis.erase import RedisHotStore
from sleepmem.adapters.redis.hits import (
    EPOCH_MAX_AGE_S,
    HitRecorder,
    bump_hits_epoch,
    hits_epoch,
    read_hits,
)
from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.evals.harness import eval_instance

AT = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def hits_aged(redis: redis_lib.Redis, keys: Keys) -> Iterator[Callable[[float], HitRecorder]]:
    """A recorder whose searches start from an epoch value up to this many seconds old."""
    made: list[HitRecorder] = []

    def make(max_age_s: float) -> HitRecorder:
        made.append(HitRecorder(redis, keys, epoch_max_age_s=max_age_s))
        return made[-1]

    yield make
    for recorder in made:
        recorder.close()


@pytest.fixture
def hits(hits_aged: Callable[[float], HitRecorder]) -> HitRecorder:
    return hits_aged(EPOCH_MAX_AGE_S)


def recorded(redis: redis_lib.Redis, keys: Keys) -> list[list[str]]:
    return [ids for _e, ids, _at in read_hits(redis, keys)]


def not_recorded(reason: str) -> float:
    value = REGISTRY.get_sample_value("sleepmem_hits_not_recorded_total", {"reason": reason})
    return value or 0.0


class TestHitsAreWrittenAfterTheSearch:
    def test_they_reach_the_stream_once_the_writer_has_caught_up(
        self, hits: HitRecorder, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        hits.record(["m1", "m2"], at=AT, epoch=hits.epoch())
        hits.record(["m3"], at=AT, epoch=hits.epoch())
        assert hits.flush()
        assert recorded(redis, keys) == [["m1", "m2"], ["m3"]]
        assert read_hits(redis, keys)[0][2] == AT.timestamp()

    def test_closing_writes_what_is_still_queued(
        self, hits: HitRecorder, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        for i in range(50):
            hits.record([f"m{i}"], at=AT, epoch=hits.epoch())
        hits.close()
        assert recorded(redis, keys) == [[f"m{i}"] for i in range(50)]

    def test_a_search_that_returned_nothing_writes_nothing(
        self, hits: HitRecorder, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        hits.record([], at=AT, epoch=hits.epoch())
        assert hits.flush()
        assert recorded(redis, keys) == []


class TestAnErasureWhileASearchRuns:
    def test_drops_the_hits_of_a_search_that_read_before_it(
        self, hits: HitRecorder, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        before = not_recorded("erasure")
        epoch = hits.epoch()  # the search starts, then reads "gone" among its memories
        RedisHotStore(redis, keys).erase_hits({"gone"})
        hits.record(["gone", "kept"], at=AT, epoch=epoch)  # late: after the erasure
        assert hits.flush()
        assert recorded(redis, keys) == []
        assert not_recorded("erasure") - before == 2

    def test_removes_the_hits_written_before_it(
        self, hits: HitRecorder, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        hits.record(["gone", "kept"], at=AT, epoch=hits.epoch())
        assert hits.flush()
        RedisHotStore(redis, keys).erase_hits({"gone"})
        assert recorded(redis, keys) == [["kept"]]

    def test_leaves_the_hits_of_searches_begun_after_it(
        self, hits: HitRecorder, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        RedisHotStore(redis, keys).erase_hits({"gone"})
        hits.record(["kept"], at=AT, epoch=hits.epoch())
        assert hits.flush()
        assert recorded(redis, keys) == [["kept"]]


class TestTheEpochASearchStartsFrom:
    """Searches do not wait for Redis to learn the epoch: they take the last value read."""

    def test_is_the_last_value_read_while_that_is_fresh(
        self, hits_aged: Callable[[float], HitRecorder], redis: redis_lib.Redis, keys: Keys
    ) -> None:
        hits = hits_aged(60.0)
        first = hits.epoch()
        bump_hits_epoch(redis, keys)  # an erasure in another process
        assert hits.epoch() == first

    def test_is_read_again_once_older_than_its_max_age(
        self, hits_aged: Callable[[float], HitRecorder], redis: redis_lib.Redis, keys: Keys
    ) -> None:
        hits = hits_aged(0.05)
        first = hits.epoch()
        bump_hits_epoch(redis, keys)
        time.sleep(0.1)
        assert hits.epoch() != first
        assert hits.epoch() == hits_epoch(redis, keys)

    def test_an_erasure_since_it_was_read_drops_the_hits_and_the_writer_learns_the_new_one(
        self, hits_aged: Callable[[float], HitRecorder], redis: redis_lib.Redis, keys: Keys
    ) -> None:
        hits = hits_aged(60.0)
        before = not_recorded("erasure")
        stale = hits.epoch()
        RedisHotStore(redis, keys).erase_hits({"gone"})
        hits.record(["gone", "kept"], at=AT, epoch=hits.epoch())
        assert hits.flush()
        assert recorded(redis, keys) == []
        assert not_recorded("erasure") - before == 2
        # The failed batch brought the new epoch back, long before the value's max age.
        assert hits.epoch() != stale
        hits.record(["kept"], at=AT, epoch=hits.epoch())
        assert hits.flush()
        assert recorded(redis, keys) == [["kept"]]


class TestAnUnreachableRedis:
    def test_does_not_hold_up_the_search_and_the_lost_hits_are_counted(self, keys: Keys) -> None:
        # Port 9 (discard) has no Redis: every write is refused at once.
        down = redis_lib.Redis(host="127.0.0.1", port=9, socket_connect_timeout=0.5)
        hits = HitRecorder(down, keys)
        before = not_recorded("redis")
        try:
            started = time.perf_counter()
            for _ in range(20):
                hits.record(["m1", "m2"], at=AT, epoch="0")
            assert time.perf_counter() - started < 0.5
            assert hits.flush()
            assert not_recorded("redis") - before == 40
        finally:
            hits.close()


class TestAnEvalRunsCleanup:
    def test_leaves_no_hits_behind_even_with_a_backlog_queued(
        self, settings: Settings, redis: redis_lib.Redis, namespace: str
    ) -> None:
        # The writer thread would write its backlog after the run deleted its keys, unless
        # the cleanup stops it first.
        with eval_instance(settings, prefix="sleepmem-test-") as res:
            epoch = res.hits.epoch()
            for i in range(3000):
                res.hits.record([f"m{i}"], at=AT, epoch=epoch)
        assert list(redis.scan_iter(match=f"{namespace}-eval-*")) == []
