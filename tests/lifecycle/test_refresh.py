"""The importance refresh: hits, mentions, emphasis, corrections, feedback, strong reminders."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
import redis as redis_lib
from lifecycle_support import (
    DAY,
    T0,
    Clock,
    audit_ops,
    memory,
    row,
    store,
)
from sqlalchemy.engine import Engine

from sleepmem.adapters.redis.hits import read_hits, record_hits
from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.pipelines.decay import aware
from sleepmem.pipelines.lifecycle.refresh import refresh
from sleepmem.pipelines.ports import Ports

SETTINGS = Settings(_env_file=None, embedder="hashing")


def hit(at: datetime, *ids: str) -> tuple[str, list[str], float]:
    return ("0-1", list(ids), at.timestamp())


def run(engine: Engine, ports: Ports, hits: list[Any] | None = None, **kw: Any) -> Any:
    settings = SETTINGS.model_copy(update=kw) if kw else SETTINGS
    return refresh(engine=engine, ports=ports, settings=settings, hits=hits or [])


class TestHits:
    def test_a_hit_counts_moves_recency_and_slides_expiry_in_sql_and_index(
        self, engine: Engine, ports: Ports, clock: Clock
    ) -> None:
        (m,) = store(engine, ports, memory("I love jazz", expires_at=T0 + 90 * DAY))
        clock.advance(60 * DAY)
        report = run(engine, ports, [hit(T0 + 60 * DAY, m.id), hit(T0 + 59 * DAY, m.id)])
        got = row(engine, m.id)
        assert got is not None and report.memories_hit == 1 and report.hits == 2
        assert got.access_count == 2
        assert aware(got.last_access) == T0 + 60 * DAY
        assert got.expires_at is not None
        assert aware(got.expires_at) == T0 + 150 * DAY
        assert ports.index.payloads([m.id])[m.id]["expires_at"] == (T0 + 150 * DAY).timestamp()
        assert got.index_state == "indexed"
        assert ("REFRESH", m.id) in audit_ops(engine)

    def test_expiry_never_slides_backward_and_identity_never_gets_one(
        self, engine: Engine, ports: Ports
    ) -> None:
        a, b = store(engine, ports, memory("I love jazz", expires_at=T0 + 300 * DAY),
                     memory("My name is Ann", type="identity"))
        run(engine, ports, [hit(T0 + DAY, a.id, b.id)])
        got_a, got_b = row(engine, a.id), row(engine, b.id)
        assert got_a is not None and got_a.expires_at is not None
        assert aware(got_a.expires_at) == T0 + 300 * DAY
        assert got_b is not None and got_b.expires_at is None and got_b.access_count == 1

    def test_a_used_memory_stops_being_demoted_and_unknown_ids_are_counted(
        self, engine: Engine, ports: Ports
    ) -> None:
        (m,) = store(engine, ports, memory("I love jazz", demoted=True))
        report = run(engine, ports, [hit(T0 + DAY, m.id, "f" * 32)])
        got = row(engine, m.id)
        assert got is not None and not got.demoted and report.unknown_ids == 1

    def test_hits_recorded_in_redis_are_read_back_in_order(
        self, redis: redis_lib.Redis, keys: Keys, engine: Engine, ports: Ports
    ) -> None:
        (m,) = store(engine, ports, memory("I love jazz"))
        record_hits(redis, keys, [m.id], at=T0 + DAY)
        record_hits(redis, keys, [m.id], at=T0 + 2 * DAY)
        hits = read_hits(redis, keys)
        report = run(engine, ports, hits)
        got = row(engine, m.id)
        assert report.entries == 2 and got is not None and got.access_count == 2


class TestImportance:
    def test_three_mentions_raise_importance_to_the_mention_floor_once(
        self, engine: Engine, ports: Ports
    ) -> None:
        a, b = store(engine, ports, memory("I love jazz", mention_count=3, importance=0.5),
                     memory("I like tea", mention_count=2, importance=0.5))
        first, second = run(engine, ports), run(engine, ports)
        assert row(engine, a.id).importance == pytest.approx(0.7)  # type: ignore[union-attr]
        assert row(engine, b.id).importance == pytest.approx(0.5)  # type: ignore[union-attr]
        assert (first.importance_raised, second.importance_raised) == (1, 0)

    def test_emphasis_and_corrections_raise_importance_and_never_lower_it(
        self, engine: Engine, ports: Ports
    ) -> None:
        emphatic, corrected, high = store(
            engine, ports,
            memory("Never call me before 9", importance=0.4, details={"emphasis": True}),
            memory("I live in Shanghai", type="fact", attribute="residence", importance=0.4,
                   supersedes="a" * 32, version=2),
            memory("I love jazz", importance=0.95, mention_count=9),
        )
        run(engine, ports)
        assert row(engine, emphatic.id).importance == pytest.approx(0.8)  # type: ignore[union-attr]
        assert row(engine, corrected.id).importance == pytest.approx(0.7)  # type: ignore[union-attr]
        assert row(engine, high.id).importance == pytest.approx(0.95)  # type: ignore[union-attr]


class TestFeedback:
    def test_negative_feedback_on_a_just_used_memory_halves_confidence_once_and_flags_it(
        self, engine: Engine, ports: Ports, clock: Clock
    ) -> None:
        used, unused = store(
            engine, ports,
            memory("I am vegan", type="fact", confidence=0.9),
            memory("I like tea", confidence=0.9),
        )
        run(engine, ports, [hit(T0 + 10 * DAY, used.id)])
        store(engine, ports, memory(
            "No, that's wrong", type="event", at=T0 + 10 * DAY + timedelta(minutes=1),
            details={"feedback": "negative"},
        ))
        first, second = run(engine, ports), run(engine, ports)
        got, other = row(engine, used.id), row(engine, unused.id)
        assert got is not None and got.confidence == pytest.approx(0.45)
        assert got.needs_verification and got.details["negative_feedback"] == 1
        assert other is not None and other.confidence == pytest.approx(0.9)
        assert not other.needs_verification
        assert (first.feedback_applied, second.feedback_applied) == (1, 0)


class TestStrongReminder:
    def test_an_important_never_retrieved_memory_gets_one_reminder_as_it_would_fade(
        self, engine: Engine, ports: Ports, clock: Clock
    ) -> None:
        # importance 0.8, half-life 90 d: survival crosses 0.25 at 90 * log2(3.2) = 151 d
        (m,) = store(engine, ports, memory("My daughter's school is Elm Park", importance=0.8))
        clock.advance(150 * DAY)
        assert run(engine, ports).reminded == 0
        clock.advance(2 * DAY)
        assert run(engine, ports).reminded == 1
        got = row(engine, m.id)
        assert got is not None and got.reminded
        assert aware(got.last_access) == clock.now
        clock.advance(200 * DAY)
        assert run(engine, ports).reminded == 0  # one reminder, never two
        assert audit_ops(engine).count(("REMIND", m.id)) == 1

    def test_unimportant_retrieved_or_protected_memories_get_no_reminder(
        self, engine: Engine, ports: Ports, clock: Clock
    ) -> None:
        store(engine, ports, memory("I like tea", importance=0.5),
              memory("I love jazz", importance=0.9, access_count=1),
              memory("When deploying: migrate first", type="procedure", importance=0.9))
        clock.advance(400 * DAY)
        assert run(engine, ports).reminded == 0

    def test_a_memory_about_to_expire_is_reminded_the_day_before(
        self, engine: Engine, ports: Ports, clock: Clock
    ) -> None:
        (m,) = store(engine, ports, memory("I love jazz", importance=0.9,
                                           expires_at=T0 + 90 * DAY))
        clock.advance(88 * DAY)
        assert run(engine, ports).reminded == 0
        clock.advance(DAY + DAY / 2)
        assert run(engine, ports).reminded == 1
        got = row(engine, m.id)
        assert got is not None and got.expires_at is not None
        assert aware(got.expires_at) == clock.now + 90 * DAY
        payload = ports.index.payloads([m.id])[m.id]
        assert payload["expires_at"] == (clock.now + 90 * DAY).timestamp()
