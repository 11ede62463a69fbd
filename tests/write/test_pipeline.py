"""The whole consolidation pipeline against real Redis, SQLite/PostgreSQL and the index.

Events go in through the SDK and the drain; consolidation runs the task's code; memories
come back through search. The embedder is the fast hashing one: quality is not the
point here, plumbing and failure behaviour are.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from sleepmem.adapters.embedders import HashingEmbedder
from sleepmem.core.errors import ExtractionError, TransientError
from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.ingest.drain import drain_once
from sleepmem.models import CURRENT_STATUSES, Audit, Memory, RawEvent, Scope
from sleepmem.pipelines.ports import IndexPoint, Ports, VectorIndex
from sleepmem.pipelines.types import Extractor
from sleepmem.pipelines.write.consolidate import consolidate_scope
from sleepmem.pipelines.write.index import reconcile
from sleepmem.reader import build_request
from sleepmem.sdk import MemoryClient

SCOPE = {"tenant": "acme", "agent": "assistant", "user": "u1"}
OWNER_SCOPE = Scope(**SCOPE)
OWNER = OWNER_SCOPE.key
T0 = datetime(2026, 5, 1, 10, tzinfo=UTC)


class FlakyIndex:
    """A real index that fails its next upserts: a crash between SQL and the index."""

    def __init__(self, inner: VectorIndex, failures: int) -> None:
        self.inner = inner
        self.failures = failures

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise TransientError("index unavailable")
        self.inner.upsert(points)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def cfg(tmp_path: Path, namespace: str, engine: Engine) -> Settings:
    return Settings(
        data_dir=tmp_path / "data", redis_url="redis://127.0.0.1:6379/0",
        database_url=str(engine.url.render_as_string(hide_password=False)),
        namespace=namespace, embedder="hashing", _env_file=None,  # type: ignore[call-arg]
    )


def ports(index: Any, clock: datetime = T0, extractor: Extractor | None = None) -> Ports:
    return Ports(embedder=HashingEmbedder(), index=index, clock=lambda: clock,
                 extractor=extractor)


def emit_and_drain(cfg: Settings, redis: redis_lib.Redis, keys: Keys, engine: Engine,
                   contents: Sequence[str | Mapping[str, Any]]) -> None:
    """Each item is a message's text, or its event fields (``content`` and what else)."""
    with MemoryClient(cfg, client=redis, **SCOPE) as client:
        client.emit_many(
            [{"session": "s1", "at": T0.isoformat(),
              **({"content": c} if isinstance(c, str) else c)} for c in contents]
        )
    while drain_once(redis=redis, keys=keys, engine=engine, settings=cfg, consumer="t").read:
        pass


def tell(cfg: Settings, redis: redis_lib.Redis, keys: Keys, engine: Engine, p: Ports,
         turns: Sequence[tuple[str, str]]) -> None:
    """Each (speaker, text) turn of a shared scope, emitted and consolidated on its own."""
    for speaker, text in turns:
        emit_and_drain(cfg, redis, keys, engine, [{"content": text, "meta": {"speaker": speaker}}])
        consolidate_scope(engine=engine, ports=p, settings=cfg, scope=OWNER_SCOPE)


def memory_rows(engine: Engine) -> list[Memory]:
    with Session(engine) as s:
        return list(s.exec(select(Memory).order_by(col(Memory.id))))


def pending(engine: Engine) -> int:
    with Session(engine) as s:
        return int(s.exec(select(func.count()).select_from(RawEvent).where(
            col(RawEvent.consolidated).is_(False))).one())


# The whole path once on the embedded engine itself; elsewhere the in-memory index.
@pytest.mark.real_index
class TestEndToEnd:
    def test_emitted_facts_come_back_from_search_and_events_are_consumed(
        self, cfg: Settings, redis: redis_lib.Redis, keys: Keys, engine: Engine,
        index: VectorIndex,
    ) -> None:
        emit_and_drain(cfg, redis, keys, engine, ["I live in Lisbon.", "I'm vegetarian."])
        report = consolidate_scope(engine=engine, ports=ports(index), settings=cfg,
                                   scope=OWNER_SCOPE)
        assert report.events == 2 and report.ops.get("ADD", 0) >= 2
        assert pending(engine) == 0
        from sleepmem.pipelines.read.retrieve import RankWeights, search

        result = search(engine=engine, ports=ports(index),
                        request=build_request("Where does the user live?", scope=SCOPE),
                        weights=RankWeights())
        assert any("Lisbon" in c.statement for c in result.flat())
        assert all(m.index_state == "indexed" for m in memory_rows(engine))


@pytest.mark.real_index
class TestCrashBetweenSqlAndIndex:
    def test_the_reconciler_converges_without_duplicates(
        self, cfg: Settings, redis: redis_lib.Redis, keys: Keys, engine: Engine,
        index: VectorIndex,
    ) -> None:
        emit_and_drain(cfg, redis, keys, engine, ["I live in Lisbon.", "I work as a nurse."])
        with pytest.raises(TransientError):
            consolidate_scope(engine=engine, ports=ports(FlakyIndex(index, failures=1)),
                              settings=cfg, scope=OWNER_SCOPE)
        rows = memory_rows(engine)
        assert rows and {m.index_state for m in rows} == {"pending"}
        assert index.count() == 0
        reconcile(engine=engine, index=index, embedder=HashingEmbedder())
        reconcile(engine=engine, index=index, embedder=HashingEmbedder())
        assert {m.index_state for m in memory_rows(engine)} == {"indexed"}
        assert sorted(index.all_ids()) == sorted(m.id for m in rows)


class TestRetries:
    def test_a_batch_retried_after_a_failure_gives_the_same_memories(
        self, cfg: Settings, redis: redis_lib.Redis, keys: Keys, engine: Engine,
        index: VectorIndex, tmp_path: Path,
    ) -> None:
        emit_and_drain(cfg, redis, keys, engine, ["I live in Lisbon.", "My cat is Miso."])

        class Exploding:
            name = "rules"

            def extract(self, events: Any) -> Any:
                raise ExtractionError("model went away")

        broken = ports(index, extractor=Exploding())
        with pytest.raises(ExtractionError):
            consolidate_scope(engine=engine, ports=broken, settings=cfg, scope=OWNER_SCOPE)
        assert memory_rows(engine) == [] and pending(engine) == 2
        consolidate_scope(engine=engine, ports=ports(index), settings=cfg, scope=OWNER_SCOPE)
        first = [(m.id, m.statement, m.status) for m in memory_rows(engine)]
        again = consolidate_scope(engine=engine, ports=ports(index), settings=cfg,
                                  scope=OWNER_SCOPE)
        assert again.events == 0
        assert [(m.id, m.statement, m.status) for m in memory_rows(engine)] == first

    def test_memory_ids_are_deterministic_for_the_same_events(
        self, cfg: Settings, redis: redis_lib.Redis, keys: Keys, engine: Engine,
        index: VectorIndex,
    ) -> None:
        emit_and_drain(cfg, redis, keys, engine, ["I live in Lisbon."])
        consolidate_scope(engine=engine, ports=ports(index), settings=cfg, scope=OWNER_SCOPE)
        ids = [m.id for m in memory_rows(engine)]
        # Replaying the same raw events into a fresh memory table yields the same ids.
        with Session(engine) as s:
            for m in s.exec(select(Memory)):
                s.delete(m)
            for e in s.exec(select(RawEvent)):
                e.consolidated = False
                s.add(e)
            s.commit()
        consolidate_scope(engine=engine, ports=ports(index), settings=cfg, scope=OWNER_SCOPE)
        assert [m.id for m in memory_rows(engine)] == ids


class TestRefusedExtraction:
    def test_a_refused_llm_batch_leaves_events_pending_and_is_audited(
        self, cfg: Settings, redis: redis_lib.Redis, keys: Keys, engine: Engine,
        index: VectorIndex,
    ) -> None:
        from sleepmem.pipelines.write.extract.llm import LLMExtractor

        class NonsenseModel:
            model = "scripted"

            def complete_json(self, *, system: str, user: str, schema: dict[str, Any]) -> Any:
                from sleepmem.pipelines.ports import LLMUsage

                return {"candidates": [{"event_ids": ["e999"], "type": "fact",
                                        "statement": "x"}]}, LLMUsage(1, 10, 5)

        # A turn the rules cannot structure: the rules-first route asks the model about it.
        emit_and_drain(cfg, redis, keys, engine,
                       ["Saturdays usually mean the flea market with Grandpa."])
        p = ports(index, extractor=LLMExtractor(NonsenseModel(), batch_events=10))
        with pytest.raises(ExtractionError):
            consolidate_scope(engine=engine, ports=p, settings=cfg, scope=OWNER_SCOPE)
        assert pending(engine) == 1 and memory_rows(engine) == []
        with Session(engine) as s:
            errors = list(s.exec(select(Audit).where(col(Audit.op) == "ERROR")))
        assert len(errors) == 1 and "ExtractionError" in errors[0].reason


class ReadsEmployers:
    """A scripted chat model (the hosted API is what cannot run here): a turn holding a
    word of ``employers`` is read as the user's employer, a name the turn need not say."""

    model = "scripted"

    def __init__(self, employers: dict[str, str]) -> None:
        self.employers = employers

    def complete_json(self, *, system: str, user: str, schema: dict[str, Any]) -> Any:
        from sleepmem.pipelines.ports import LLMUsage

        found = []
        for line in user.splitlines()[1:]:
            row = json.loads(line)
            for word, employer in self.employers.items():
                if word in row["text"]:
                    found.append({"event_ids": [row["id"]], "type": "fact",
                                  "attribute": "employer", "value": employer,
                                  "statement": f"The user works at {employer}."})
        return {"candidates": found}, LLMUsage(1, 10, 5)


class TestATurnOutlivesTheFactDrawnFromIt:
    """Rules first, the model's facts sit beside a turn's episode: when a later turn
    supersedes a fact the model drew, the turn it was drawn from stays in current memory
    (an episode naming the superseded value itself would retire with it)."""

    @pytest.mark.parametrize("first, second, employers", [
        ("Another night shift; the ward was quiet until three.",
         "These days I work at a design studio downtown.",
         {"ward": "City Hospital", "studio": "a design studio"}),
        ("又是一个夜班，病房到三点才安静下来。", "如今我在市中心的一家设计工作室上班。",
         {"病房": "市立医院", "工作室": "设计工作室"}),
    ])
    def test_a_superseded_employer_leaves_its_turn_current(
        self, cfg: Settings, redis: redis_lib.Redis, keys: Keys, engine: Engine,
        index: VectorIndex, first: str, second: str, employers: dict[str, str],
    ) -> None:
        from sleepmem.pipelines.write.extract.llm import LLMExtractor

        p = ports(index, extractor=LLMExtractor(ReadsEmployers(employers), batch_events=10))
        for turn in (first, second):
            emit_and_drain(cfg, redis, keys, engine, [turn])
            consolidate_scope(engine=engine, ports=p, settings=cfg, scope=OWNER_SCOPE)
        rows = memory_rows(engine)
        old_job, new_job = (name.lower() for name in employers.values())
        jobs = {m.statement.lower(): m.status for m in rows if m.attribute == "employer"}
        (new_status,) = [st for text, st in jobs.items() if new_job in text]
        (old_status,) = [st for text, st in jobs.items() if old_job in text]
        assert new_status in CURRENT_STATUSES and old_status not in CURRENT_STATUSES
        with Session(engine) as s:
            first_event = s.exec(select(RawEvent.event_id).where(
                col(RawEvent.content) == first)).one()
        assert any(first_event in m.provenance and m.type == "event"
                   and m.status in CURRENT_STATUSES for m in rows)


class TestEachPersonInAGroupChatKeepsTheirOwnFacts:
    """Where several people talk in one scope (``meta.speaker``), what one of them says
    about themself is theirs: it fills their own slots, is changed only by them, retires
    only their own episodes when it changes and is never a repeat of the same words from
    someone else."""

    @pytest.mark.parametrize("ann, mel, later, employers", [
        ("Another night shift; the ward was quiet until three.",
         "The studio had three clients in before lunch.",
         "These days I bake bread at a corner bakery.",
         {"ward": "City Hospital", "studio": "a design studio", "bakery": "a corner bakery"}),
        ("又是一个夜班，病房到三点才安静下来。", "工作室午饭前来了三个客户。",
         "如今我在街角的面包店烤面包。",
         {"病房": "市立医院", "工作室": "设计工作室", "面包店": "街角面包店"}),
    ])
    def test_a_persons_new_employer_supersedes_only_their_own(
        self, cfg: Settings, redis: redis_lib.Redis, keys: Keys, engine: Engine,
        index: VectorIndex, ann: str, mel: str, later: str, employers: dict[str, str],
    ) -> None:
        from sleepmem.pipelines.write.extract.llm import LLMExtractor

        p = ports(index, extractor=LLMExtractor(ReadsEmployers(employers), batch_events=10))
        tell(cfg, redis, keys, engine, p, [("Ann", ann), ("Mel", mel), ("Ann", later)])
        jobs = {m.statement.lower(): m for m in memory_rows(engine) if m.attribute == "employer"}
        hospital, studio, bakery = (
            next(m for text, m in jobs.items() if name.lower() in text)
            for name in employers.values())
        assert (hospital.subject, studio.subject, bakery.subject) == ("ann", "mel", "ann")
        assert hospital.status not in CURRENT_STATUSES
        assert hospital.superseded_by == bakery.id
        assert studio.status in CURRENT_STATUSES and bakery.status in CURRENT_STATUSES

    @pytest.mark.parametrize("said", [
        "I love painting landscapes by the lake on Sunday mornings.",
        "我很喜欢周日早上在湖边画风景画。",
    ])
    def test_the_same_words_from_two_people_stay_two_memories(
        self, cfg: Settings, redis: redis_lib.Redis, keys: Keys, engine: Engine,
        index: VectorIndex, said: str,
    ) -> None:
        tell(cfg, redis, keys, engine, ports(index), [("Ann", said), ("Mel", said)])
        with Session(engine) as s:
            events = {e.event_id: e.meta["speaker"] for e in s.exec(select(RawEvent))}
        current = [m for m in memory_rows(engine) if m.status in CURRENT_STATUSES]
        for speaker in ("Ann", "Mel"):
            (own,) = [m for m in current if m.statement.startswith(speaker)]
            assert {events[e] for e in own.provenance} >= {speaker}

    @pytest.mark.parametrize("ann, mel, moved, old_place", [
        ("I live in Oslo now.", "We spent a week in Oslo last summer and loved the fjords.",
         "I moved to Bergen last month.", "oslo"),
        ("我现在住在杭州。", "我们去年夏天在杭州玩了一周，西湖太美了。",
         "我上个月搬到苏州了。", "杭州"),
    ])
    def test_a_persons_move_retires_their_own_episodes_not_anothers(
        self, cfg: Settings, redis: redis_lib.Redis, keys: Keys, engine: Engine,
        index: VectorIndex, ann: str, mel: str, moved: str, old_place: str,
    ) -> None:
        tell(cfg, redis, keys, engine, ports(index), [("Ann", ann), ("Mel", mel), ("Ann", moved)])
        rows = memory_rows(engine)
        with Session(engine) as s:
            mels = s.exec(select(RawEvent.event_id).where(col(RawEvent.content) == mel)).one()
        (residence,) = [m for m in rows if m.attribute == "residence" and old_place in
                        m.statement.lower()]
        assert residence.subject == "ann" and residence.status not in CURRENT_STATUSES
        assert any(mels in m.provenance and m.status in CURRENT_STATUSES for m in rows)

    @pytest.mark.parametrize("question, answer, change, old_job", [
        ("How is Acme treating you these days?", "Busy week, lots of overtime.",
         "I left Acme, I work at Globex now.", "acme"),
        ("你在华星公司还好吗？", "这周很忙，加了好几天班。",
         "我现在在云帆公司上班了。", "华星公司"),
    ])
    def test_a_change_retires_an_episode_only_for_the_persons_own_words(
        self, cfg: Settings, redis: redis_lib.Redis, keys: Keys, engine: Engine,
        index: VectorIndex, question: str, answer: str, change: str, old_job: str,
    ) -> None:
        """Ann's reply is remembered with Mel's question in front: the old employer named
        there is Mel's words, not Ann's, so Ann's reply stays when she changes jobs."""
        first = "I work at Acme." if old_job == "acme" else "我在华星公司上班。"
        talk = [{"content": text, "meta": {"speaker": speaker},
                 "at": (T0 + timedelta(minutes=i)).isoformat()}
                for i, (speaker, text) in enumerate(
                    [("Ann", first), ("Mel", question), ("Ann", answer)])]
        later = T0 + timedelta(days=30)
        for batch, at in ((talk, T0), ([{"content": change, "meta": {"speaker": "Ann"},
                                         "at": later.isoformat()}], later)):
            emit_and_drain(cfg, redis, keys, engine, batch)
            consolidate_scope(engine=engine, ports=ports(index, at), settings=cfg,
                              scope=OWNER_SCOPE)
        rows = memory_rows(engine)
        with Session(engine) as s:
            reply_event = s.exec(select(RawEvent.event_id).where(
                col(RawEvent.content) == answer)).one()
        (job,) = [m for m in rows
                  if m.attribute == "employer" and m.details.get("value") == old_job]
        assert job.status not in CURRENT_STATUSES
        assert any(reply_event in m.provenance and m.type == "event"
                   and m.status in CURRENT_STATUSES for m in rows)

    @pytest.mark.parametrize("person, before, change, old, new", [
        ("Ann", "I work at Acme.", "I left Acme, I work at Globex now.", "Acme", "Globex"),
        ("Ann", "I live in Oslo.", "Oslo got too expensive, so I moved to Bergen.",
         "Oslo", "Bergen"),
        ("小美", "我在华星公司上班。", "我离开华星公司了，现在在云帆公司上班。", "华星", "云帆"),
        ("小美", "我在华星公司上班。", "我从华星公司辞职了，现在我在云帆公司工作。",
         "华星", "云帆"),
        ("小美", "我住在杭州。", "杭州房租太贵了，我现在住在苏州。", "杭州", "苏州"),
        ("小美", "我住在杭州。", "杭州房租太贵，上个月搬到苏州了。", "杭州", "苏州"),
        ("小美", "我在华星公司上班。", "上个月跳槽了，现在在云帆公司上班。", "华星", "云帆"),
        ("Ann", "I live in Oslo.", "Moved to Bergen in May, still unpacking.", "Oslo", "Bergen"),
    ])
    def test_a_change_told_in_a_later_clause_names_only_the_person(
        self, cfg: Settings, redis: redis_lib.Redis, keys: Keys, engine: Engine,
        index: VectorIndex, person: str, before: str, change: str, old: str, new: str,
    ) -> None:
        """The rules read the new state from the clause that tells it, for a named person as
        for a lone user, and every "I" of it becomes the person, not "the user"."""
        tell(cfg, redis, keys, engine, ports(index), [(person, before), (person, change)])
        facts = [m for m in memory_rows(engine) if m.type == "fact"]
        (was,) = [m for m in facts if old in m.statement and new not in m.statement]
        (now,) = [m for m in facts if new in m.statement]
        assert was.status not in CURRENT_STATUSES and was.superseded_by == now.id
        assert now.status in CURRENT_STATUSES and now.subject == person.lower()
        assert person in now.statement
        assert "user" not in now.statement.lower() and "用户" not in now.statement

    @pytest.mark.parametrize("talk", [
        "我每天早上上班前都会画鸟。",
    ])
    def test_a_persons_talk_that_fills_no_known_slot_stays_their_episode(
        self, cfg: Settings, redis: redis_lib.Redis, keys: Keys, engine: Engine,
        index: VectorIndex, talk: str, monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """Alone, a user's first-person words no matcher knows are kept as a low-importance
        fact; in a shared scope, with named speakers' words not read as facts
        (turns.NAMED_SPEAKERS_AS_FACTS off), they are conversation, the speaker's episode."""
        from sleepmem.pipelines.write.extract import turns
        monkeypatch.setattr(turns, "NAMED_SPEAKERS_AS_FACTS", False)
        tell(cfg, redis, keys, engine, ports(index), [("小美", talk)])
        (episode,) = memory_rows(engine)
        assert episode.type == "event" and episode.statement == f"小美: {talk}"

    @pytest.mark.parametrize("talk", [
        "我每天早上上班前都会画鸟。",
    ])
    def test_a_persons_lasting_talk_is_their_own_fact_with_the_episode_beside(
        self, cfg: Settings, redis: redis_lib.Redis, keys: Keys, engine: Engine,
        index: VectorIndex, talk: str, monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """With named speakers' words read as facts (the default), a person's lasting
        words that no matcher knows are a fact of theirs, named; the turn's episode keeps
        their words as said, for the replies and passages that read the conversation."""
        tell(cfg, redis, keys, engine, ports(index), [("小美", talk)])
        rows = memory_rows(engine)
        (episode,) = [m for m in rows if m.type == "event"]
        assert episode.statement == f"小美: {talk}"
        (fact,) = [m for m in rows if m.type != "event"]
        assert fact.subject == "小美" and fact.statement.startswith("小美")
        assert "用户" not in fact.statement


class TestForgetRequestReachesRedis:
    def test_the_retrieval_hits_of_what_a_forget_request_erased_go_too(
        self, cfg: Settings, redis: redis_lib.Redis, keys: Keys, engine: Engine,
        index: VectorIndex,
    ) -> None:
        from sleepmem.adapters.redis.erase import RedisHotStore
        from sleepmem.adapters.redis.hits import read_hits, record_hits

        emit_and_drain(cfg, redis, keys, engine,
                       ["I'm going through a divorce.", "I work as a nurse."])
        consolidate_scope(engine=engine, ports=ports(index), settings=cfg, scope=OWNER_SCOPE)
        ids = {m.id: m.statement for m in memory_rows(engine)}
        (divorce,) = [i for i, s in ids.items() if "divorce" in s]
        others = [i for i in ids if i != divorce]
        record_hits(redis, keys, [divorce, *others], at=T0)
        emit_and_drain(cfg, redis, keys, engine,
                       ["Please forget everything I told you about my divorce."])
        hot = Ports(embedder=HashingEmbedder(), index=index, clock=lambda: T0,
                    hot=RedisHotStore(redis, keys))
        consolidate_scope(engine=engine, ports=hot, settings=cfg, scope=OWNER_SCOPE)
        named = {i for _e, hit_ids, _t in read_hits(redis, keys) for i in hit_ids}
        assert divorce not in named
        assert set(others) <= named
