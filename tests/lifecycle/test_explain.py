"""explain(memory): raw events, every version, the audit trail, and why it is (not) current."""

from __future__ import annotations

import pytest
import redis as redis_lib
from lifecycle_support import DAY, T0, Clock, current, ingest, say
from sqlalchemy.engine import Engine

from sleepmem.core.errors import NotFoundError
from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.pipelines.lifecycle.explain import explain
from sleepmem.pipelines.lifecycle.forget import sweep
from sleepmem.pipelines.ports import Ports


@pytest.fixture
def moved(
    redis: redis_lib.Redis, keys: Keys, engine: Engine, settings: Settings, ports: Ports,
    clock: Clock,
) -> tuple[str, str]:
    """(Shanghai id, Beijing id) after a move was consolidated."""
    ingest(redis, keys, engine, settings, ports, [say("I live in Beijing.", at=T0)])
    clock.advance(30 * DAY)
    ingest(redis, keys, engine, settings, ports,
           [say("I moved to Shanghai last week.", at=T0 + 30 * DAY, session="s2")])
    (now,) = [m for m in current(engine) if "Shanghai" in m.statement]
    return now.id, str(now.supersedes)


class TestLineage:
    def test_a_current_memory_shows_its_events_versions_audits_and_why(
        self, engine: Engine, settings: Settings, clock: Clock, moved: tuple[str, str]
    ) -> None:
        new, old = moved
        ex = explain(engine=engine, memory_id=new, settings=settings, now=clock.now)
        assert ex.current and ex.status == "active"
        assert [v.id for v in ex.versions] == [old, new]
        assert [v.status for v in ex.versions] == ["superseded", "active"]
        assert [e.content for e in ex.events] == ["I live in Beijing.",
                                                 "I moved to Shanghai last week."]
        assert {a.op for a in ex.audits} >= {"ADD", "UPDATE"}
        assert ex.why.startswith("active: stated by the user on 2026-01-31")
        assert "never retrieved yet" in ex.why and "half-life 90 d" in ex.why
        assert ex.survives_until is not None and ex.survival == pytest.approx(0.5, abs=0.3)

    def test_a_superseded_version_says_by_what_when_and_why(
        self, engine: Engine, settings: Settings, clock: Clock, moved: tuple[str, str]
    ) -> None:
        new, old = moved
        ex = explain(engine=engine, memory_id=old, settings=settings, now=clock.now)
        assert not ex.current
        assert ex.why.startswith(f"superseded by {new} on 2026-01-31")
        assert "explicit change" in ex.why

    def test_an_archived_memory_says_when_it_left_search_and_when_it_will_be_deleted(
        self, engine: Engine, settings: Settings, ports: Ports, clock: Clock,
        moved: tuple[str, str],
    ) -> None:
        new, _old = moved
        clock.advance(400 * DAY)
        sweep(engine=engine, ports=ports, settings=settings)
        ex = explain(engine=engine, memory_id=new, settings=settings, now=clock.now)
        assert ex.status == "expired"
        assert ex.why.startswith("expired on")
        assert "deleted after" in ex.why
        assert ex.audits[-1].op == "EXPIRE"


class TestMissing:
    def test_an_unknown_id_is_not_found(self, engine: Engine, settings: Settings) -> None:
        with pytest.raises(NotFoundError, match="no such memory") as err:
            explain(engine=engine, memory_id="0" * 32, settings=settings, now=T0)
        assert "0" * 32 not in str(err.value)  # a 404 does not repeat the id it was asked
