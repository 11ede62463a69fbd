"""Faster, cleaner recovery: dead drain consumers leave the group, killed tasks come back soon."""

from __future__ import annotations

import redis as redis_lib

from sleepmem.adapters.redis import stream
from sleepmem.core.keys import DRAIN_GROUP, Keys
from sleepmem.core.settings import Settings
from sleepmem.workers.app import celery_config


def _consumers(redis: redis_lib.Redis, keys: Keys) -> dict[str, int]:
    return {
        stream.text(c["name"]): int(c["pending"])
        for c in redis.xinfo_consumers(keys.events, DRAIN_GROUP)
    }


class TestDeadDrainConsumers:
    def test_idle_consumers_with_nothing_pending_are_removed_and_the_rest_kept(
        self, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        stream.ensure_group(redis, keys)
        for _ in range(3):
            redis.xadd(keys.events, {stream.FIELD: b"{}"})
        # Twenty restarts: each process read under a name of its own, then went away.
        for i in range(20):
            redis.xgroup_createconsumer(keys.events, DRAIN_GROUP, f"gone-{i}")
            stream.read_new(redis, keys, consumer=f"gone-{i}", count=1, block_ms=None)
        holding = _consumers(redis, keys)
        assert len(holding) == 20 and sum(holding.values()) == 3
        done = [
            e.id for e in stream.read_new(redis, keys, consumer="gone-x", count=10, block_ms=None)
        ]
        assert done == []  # nothing new: the three entries sit in three dead consumers' PELs
        removed = stream.prune_consumers(redis, keys, idle_ms=0, keep="me")
        left = _consumers(redis, keys)
        assert removed == 17 and len(left) == 3 and all(n == 1 for n in left.values())
        # Once a live consumer has claimed their entries, they go too.
        claimed = stream.claim_stale(redis, keys, consumer="me", min_idle_ms=0, count=10)
        stream.ack(redis, keys, [e.id for e in claimed])
        stream.prune_consumers(redis, keys, idle_ms=0, keep="me")
        assert set(_consumers(redis, keys)) == {"me"}


class TestKilledWorkRecovers:
    def test_a_killed_holders_scope_lease_lapses_within_a_minute(self) -> None:
        assert Settings(_env_file=None).lease_seconds <= 60  # type: ignore[call-arg]

    def test_an_unacknowledged_task_comes_back_in_minutes(self) -> None:
        config = celery_config(Settings(_env_file=None))  # type: ignore[call-arg]
        assert config["task_acks_late"] and config["task_reject_on_worker_lost"]
        assert config["broker_transport_options"]["visibility_timeout"] <= 600
