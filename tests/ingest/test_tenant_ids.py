"""Ids are per tenant: two tenants may use the same event ids and job ids, and both land.

Before, ``raw_event`` was keyed by ``event_id`` alone: a tenant that posted an id first made
another tenant's later event with that id vanish as a "duplicate" behind a 202.
"""

from __future__ import annotations

import redis as redis_lib
from sqlalchemy.engine import Engine
from test_drain import drain_all, rows

from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.sdk import MemoryClient

IDS = [f"evt-{i}" for i in range(5)]


def _emit(cfg: Settings, tenant: str, words: str) -> None:
    with MemoryClient(cfg, tenant=tenant, agent="bot", user="u1") as client:
        client.emit_many([{"event_id": i, "content": f"{words} {i}"} for i in IDS])


class TestSameEventIdsInTwoTenants:
    def test_both_tenants_events_land_and_keep_their_own_content(
        self, settings: Settings, sql_url: str, redis: redis_lib.Redis, keys: Keys, engine: Engine
    ) -> None:
        cfg = settings.model_copy(update={"database_url": sql_url})
        _emit(cfg, "acme", "acme says")
        drain_all(redis, keys, engine, cfg)
        _emit(cfg, "globex", "globex says")  # later, in another batch: not a duplicate
        report = drain_all(redis, keys, engine, cfg)
        assert report.inserted == len(IDS) and report.duplicates == 0
        stored = {(r["tenant"], r["event_id"]): r["content"] for r in rows(engine)}
        for i in IDS:
            assert stored[("acme", i)] == f"acme says {i}"
            assert stored[("globex", i)] == f"globex says {i}"

    def test_the_same_ids_in_one_batch_are_two_rows_and_a_resend_is_still_one(
        self, settings: Settings, sql_url: str, redis: redis_lib.Redis, keys: Keys, engine: Engine
    ) -> None:
        cfg = settings.model_copy(update={"database_url": sql_url})
        _emit(cfg, "acme", "a")
        _emit(cfg, "globex", "g")
        _emit(cfg, "acme", "a")  # a resend: idempotent within the tenant
        report = drain_all(redis, keys, engine, cfg)
        assert report.inserted == 2 * len(IDS)
        assert len(rows(engine)) == 2 * len(IDS)
