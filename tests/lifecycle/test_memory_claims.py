"""The memory semantics of docs/semantics.md, each through the public consolidation pipeline.

The candidates come from a scripted extractor (each event's content is the candidate it
stands for), so these tests pin what the gate, the judgement and the store do with a
candidate, whatever a particular extractor makes of a sentence. Everything after the
extractor is the production pipeline on real SQL and the embedded index.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib
from lifecycle_support import DAY, SCOPE, T0, Clock, current, ingest, say
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from sleepmem.adapters.redis.erase import RedisHotStore
from sleepmem.adapters.sql import make_engine
from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.models import Audit, Memory, RawEvent, SearchRequest
from sleepmem.pipelines.lifecycle.erase import erase_memory
from sleepmem.pipelines.lifecycle.refresh import refresh
from sleepmem.pipelines.ports import Ports
from sleepmem.pipelines.read.rank import RankWeights
from sleepmem.pipelines.read.retrieve import search
from sleepmem.pipelines.types import Candidate, EventView, Extraction
from sleepmem.pipelines.write.consolidate import consolidate_scope

SESSION = "s1"


@dataclass
class ScriptedExtractor:
    """Each event's content is a JSON object: the candidate the event stands for."""

    name: str = "scripted"

    def extract(self, events: list[EventView]) -> Extraction:
        out = []
        for ev in events:
            spec: dict[str, Any] = json.loads(ev.content)
            out.append(Candidate(provenance=[ev.event_id], valid_from=ev.at, scope=ev.scope,
                                 **spec))
        return Extraction(candidates=out, extractor=self.name)


def fact(statement: str, **kw: Any) -> str:
    return json.dumps({"type": "fact", "statement": statement, **kw})


def consolidate(engine: Engine, ports: Ports, settings: Settings, *specs: str,
                session: str = "", at_step: timedelta = timedelta(minutes=1)) -> None:
    """Store one raw event per spec (as the drain would) and consolidate the scope."""
    scope = SCOPE.model_copy(update={"session": session})
    now = ports.clock()
    with Session(engine) as s:
        n = len(s.exec(select(RawEvent)).all())
        for i, spec in enumerate(specs):
            s.add(RawEvent(event_id=f"ev-{n + i}", scope_key=SCOPE.owner.key, tenant=scope.tenant,
                           agent=scope.agent, user=scope.user, session=session,
                           kind="message", role="user", content=spec, at=now + i * at_step,
                           meta={}))
        s.commit()
    consolidate_scope(engine=engine, ports=replace(ports, extractor=ScriptedExtractor()),
                      settings=settings, scope=SCOPE.owner)


def rows(engine: Engine) -> list[Memory]:
    with Session(engine, expire_on_commit=False) as s:
        return list(s.exec(select(Memory).order_by(col(Memory.valid_from))))


def ops(engine: Engine) -> list[str]:
    with Session(engine) as s:
        return [a.op for a in s.exec(select(Audit).order_by(col(Audit.id)))]


class TestOnlyTheSameSlotCanBeReplaced:
    def test_a_new_value_for_the_same_subject_and_attribute_supersedes_the_old(
        self, engine: Engine, ports: Ports, settings: Settings, clock: Clock
    ) -> None:
        consolidate(engine, ports, settings,
                    fact("The user lives in Porto.", attribute="residence", value="porto"))
        clock.advance(DAY)
        consolidate(engine, ports, settings,
                    fact("The user lives in Graz.", attribute="residence", value="graz",
                         change=True))
        old, new = rows(engine)
        assert (old.status, new.status) == ("superseded", "active")
        assert old.superseded_by == new.id and new.supersedes == old.id
        assert old.valid_to is not None and old.invalidated_at is not None
        assert ops(engine) == ["ADD", "UPDATE"]

    @pytest.mark.parametrize(
        "other",
        [
            {"attribute": "workplace", "value": "graz"},  # same subject, other attribute
            {"subject": "sister", "attribute": "residence", "value": "graz"},  # other subject
        ],
    )
    def test_a_change_to_another_slot_leaves_the_memory_current(
        self, engine: Engine, ports: Ports, settings: Settings, clock: Clock,
        other: dict[str, str],
    ) -> None:
        consolidate(engine, ports, settings,
                    fact("The user lives in Porto.", attribute="residence", value="porto"))
        clock.advance(DAY)
        consolidate(engine, ports, settings,
                    fact("Something about Graz changed.", change=True, **other))
        assert sorted(m.status for m in rows(engine)) == ["active", "active"]
        assert ops(engine) == ["ADD", "ADD"]


class TestConflicts:
    def test_two_trusted_values_without_a_change_are_a_conflict_op_and_one_search_group(
        self, engine: Engine, ports: Ports, settings: Settings, clock: Clock
    ) -> None:
        consolidate(engine, ports, settings,
                    fact("The user's phone is a Fairphone.", attribute="phone",
                         value="fairphone"))
        clock.advance(DAY)
        consolidate(engine, ports, settings,
                    fact("The user's phone is a Pixel.", attribute="phone", value="pixel"))
        a, b = rows(engine)
        assert ops(engine) == ["ADD", "CONFLICT"]
        assert a.status == b.status == "pending_confirmation"
        assert a.conflict_set is not None and a.conflict_set == b.conflict_set
        assert a.invalidated_at is None and b.invalidated_at is None  # nothing was closed
        result = search(engine=engine, ports=ports, weights=RankWeights(), request=SearchRequest(
            query="which phone does the user have", scope=SCOPE, k=5))
        [group] = [c for c in result.cards if hasattr(c, "sides")]
        assert {s.id for s in group.sides} == {a.id, b.id}  # type: ignore[union-attr]


class TestInvalidation:
    def test_an_update_stamps_invalidated_at_with_the_consolidation_time(
        self, engine: Engine, ports: Ports, settings: Settings, clock: Clock
    ) -> None:
        consolidate(engine, ports, settings,
                    fact("The user drives a van.", attribute="car", value="van"))
        clock.advance(3 * DAY)
        stated = clock.now
        consolidate(engine, ports, settings,
                    fact("The user drives a tram now.", attribute="car", value="tram",
                         change=True))
        old, _ = rows(engine)
        # valid_to: when the world changed (the statement's time); invalidated_at: when we
        # learnt it (the run's clock).
        assert old.valid_to is not None and old.invalidated_at is not None
        assert old.valid_to.replace(tzinfo=None) == stated.replace(tzinfo=None)
        assert old.invalidated_at.replace(tzinfo=None) == clock.now.replace(tzinfo=None)


class TestInferenceThreshold:
    @pytest.mark.parametrize(("confidence", "kept"), [(0.59, False), (0.6, True), (0.61, True)])
    def test_an_inference_becomes_a_memory_only_from_confidence_0_6(
        self, engine: Engine, ports: Ports, settings: Settings, confidence: float, kept: bool
    ) -> None:
        consolidate(engine, ports, settings,
                    fact("The user probably owns a cat.", attribute="pet", value="cat",
                         inferred=True, confidence=confidence))
        assert len(current(engine)) == (1 if kept else 0)
        assert ops(engine) == (["ADD"] if kept else ["REJECT"])


class TestJustThisTime:
    def test_a_one_off_instruction_lives_one_day_in_its_session(
        self, engine: Engine, ports: Ports, settings: Settings, clock: Clock
    ) -> None:
        consolidate(engine, ports, settings,
                    json.dumps({"type": "preference", "statement": "Answer in French today.",
                                "attribute": "answer_language", "value": "french",
                                "one_off": True}),
                    session=SESSION)
        [m] = current(engine)
        assert m.session == SESSION
        assert m.expires_at is not None
        assert m.expires_at.replace(tzinfo=None) - T0.replace(tzinfo=None) == timedelta(days=1)

    def test_a_one_off_instruction_outside_a_session_is_refused(
        self, engine: Engine, ports: Ports, settings: Settings
    ) -> None:
        consolidate(engine, ports, settings,
                    json.dumps({"type": "preference", "statement": "Answer in French today.",
                                "attribute": "answer_language", "value": "french",
                                "one_off": True}))
        assert current(engine) == []


class TestHitsNotWritesRefreshRecency:
    def test_a_repeated_mention_leaves_last_access_and_a_retrieval_hit_moves_it(
        self, engine: Engine, ports: Ports, settings: Settings, clock: Clock
    ) -> None:
        spec = fact("The user collects stamps.", attribute="hobby", value="stamps")
        consolidate(engine, ports, settings, spec)
        [m] = rows(engine)
        first_access = m.last_access
        clock.advance(10 * DAY)
        consolidate(engine, ports, settings, spec)  # written again: a NOOP mention
        [m] = rows(engine)
        assert m.mention_count == 2
        assert m.last_access == first_access
        clock.advance(DAY)
        refresh(engine=engine, ports=ports, settings=settings,
                hits=[("0-1", [m.id], clock.now.timestamp())])
        [m] = rows(engine)
        assert m.last_access.replace(tzinfo=None) == clock.now.replace(tzinfo=None)


class TestRepliesKeepTheirTurn:
    def test_a_short_reply_is_stored_with_the_question_it_answers_and_found_by_it(
        self, redis: redis_lib.Redis, keys: Keys, engine: Engine, settings: Settings,
        ports: Ports,
    ) -> None:
        ingest(redis, keys, engine, settings, ports, [
            say("How many years did you spend sailing around Chile?", at=T0,
                role="assistant"),
            say("Eleven, give or take!", at=T0 + timedelta(seconds=20)),
        ])
        pair = [m for m in current(engine) if "Eleven" in m.statement]
        assert pair, [m.statement for m in current(engine)]
        [m] = pair
        assert "sailing around Chile" in m.statement
        with Session(engine) as s:
            ids = [e.event_id for e in s.exec(select(RawEvent).order_by(col(RawEvent.at)))]
        assert m.provenance == ids  # question first, then the reply
        result = search(engine=engine, ports=ports, weights=RankWeights(), request=SearchRequest(
            query="how many years sailing around Chile", scope=SCOPE, k=3))
        assert m.id in [c.id for c in result.flat()]


class TestSecureDelete:
    def test_erased_content_is_not_left_in_the_sqlite_file(
        self, tmp_path: Path, ports: Ports, settings: Settings, redis: redis_lib.Redis,
        keys: Keys,
    ) -> None:
        db = tmp_path / "erase.db"
        engine = make_engine(f"sqlite:///{db}")
        marker = "Zanzibarquux"
        try:
            # Some SQLite builds default to it; ours must not depend on which one is installed.
            with engine.connect() as conn:
                assert conn.execute(text("PRAGMA secure_delete")).scalar() == 1
            consolidate(engine, ports, settings,
                        fact(f"The user's secret garden is in {marker}.", attribute="garden",
                             value=marker.lower()))
            [m] = rows(engine)
            with engine.begin() as conn:
                conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
            assert marker.encode() in db.read_bytes()  # the scan below can see it
            erase_memory(engine=engine, ports=replace(ports, hot=RedisHotStore(redis, keys)),
                         memory_id=m.id)
            with engine.begin() as conn:
                conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
            leftovers = [p.name for p in tmp_path.glob("erase.db*")
                         if marker.encode() in p.read_bytes()]
            assert leftovers == []
        finally:
            engine.dispose()
