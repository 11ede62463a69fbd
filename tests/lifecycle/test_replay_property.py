"""Live consolidation and re-consolidation replay share one stage sequence and one
versioning rule (write.versions): a replay of unchanged events under unchanged settings
rebuilds exactly the live result (an empty diff), for any stream of events and any way the
live side split it into batches. Not only the current set: every version, row by row
(statement, type, status, validity, the supersedes chain), and every audit action.

Real SQLite, Redis stream, drain and embedded index; the rules extractor and the hashing
embedder, as the other pipeline tests use.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path

import redis as redis_lib
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from lifecycle_support import T0, Clock, current, make_ports, say
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select
from support import REDIS_URL

from sleepmem.adapters.redis.stream import append
from sleepmem.adapters.sql import make_engine
from sleepmem.adapters.vectors.edge import EdgeIndex
from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.ingest.drain import drain_once
from sleepmem.ingest.validation import validate_events
from sleepmem.models import Audit, Event, Memory, Scope
from sleepmem.pipelines.decay import aware
from sleepmem.pipelines.lifecycle.reconsolidate import create_job, replay, run_job
from sleepmem.pipelines.lifecycle.shadow import Shadow
from sleepmem.pipelines.ports import Ports
from sleepmem.pipelines.write.consolidate import consolidate_scope

# What users say, in English and Chinese: facts, preferences, corrections and small talk.
SAID = [
    "I live in Lisbon.",
    "I work as a nurse at the city hospital.",
    "My sister is called Ana.",
    "I'm allergic to peanuts.",
    "I love listening to jazz while I work.",
    "I prefer tea over coffee.",
    "My favourite editor is Neovim.",
    "Actually, I moved to Porto last month.",
    "Correction: my favourite editor is Emacs now.",
    "I don't like jazz anymore.",
    "Lovely sunny weather today, isn't it?",
    "haha ok, thanks!",
    "我住在北京。",
    "我喜欢喝绿茶。",
    "我是一名软件工程师。",
    "其实我上个月搬到上海了。",
    "我不再喜欢喝绿茶了。",
    "今天天气真好啊。",
]
SESSION_END = "<session_end>"

streams = st.lists(st.sampled_from([*SAID, SESSION_END]), min_size=1, max_size=14)
# Replayed soon after, or once small talk and ended sessions are past their TTL (1 day).
delays = st.sampled_from([timedelta(minutes=5), timedelta(days=2)])


def remembered(memories: list[Memory]) -> list[tuple[object, ...]]:
    """What a memory says and how long it lives: the fields a drifted stage would change."""
    return sorted((m.type, m.subject, m.attribute, m.statement, m.status,
                   m.expires_at.replace(tzinfo=None) if m.expires_at else None)
                  for m in memories)


def _at(t: datetime | None) -> datetime | None:
    return None if t is None else aware(t)


def rows(memories: list[Memory], *, archived: Collection[str] = ()) -> list[tuple[object, ...]]:
    """Every version row by row: what it says, its status, its validity (event time and
    transaction time) and its place in the supersedes chain. Ids are deterministic (the
    scope, the slot, the first event and the statement), so the chain compares by id.
    ``archived``: fragments a session summary folded in, archived by the live run once the
    summary was indexed (a replay writes nothing, so it only names them)."""
    return sorted(
        (m.id, m.type, m.subject, m.attribute, m.statement,
         "archived" if m.id in archived else m.status,
         _at(m.valid_from), _at(m.valid_to), _at(m.invalidated_at),
         m.lineage, m.version, m.supersedes, m.superseded_by, m.conflict_set)
        for m in memories
    )


def actions(audits: list[tuple[str, list[str], list[str], str, list[str]]]
            ) -> list[tuple[object, ...]]:
    """Audit actions as (op, before, after, reason, events), sorted: how a batch's decisions
    interleave with its rejections depends on where the batches were cut, not what they
    decided."""
    return sorted((op, tuple(before), tuple(after), reason, tuple(sorted(events)))
                  for op, before, after, reason, events in audits)


def live_history(engine: Engine, scope_key: str) -> tuple[list[Memory], list[tuple[object, ...]]]:
    with Session(engine) as session:
        versions = list(session.exec(select(Memory).where(col(Memory.scope_key) == scope_key)))
        audits = [(a.op, a.memory_ids_before, a.memory_ids_after, a.reason, a.input_event_ids)
                  for a in session.exec(select(Audit).where(col(Audit.scope_key) == scope_key))]
    return versions, actions(audits)


def replayed_history(shadow: Shadow) -> tuple[list[Memory], list[tuple[object, ...]]]:
    """The replay's versions and audit drafts, with the ARCHIVE row live consolidation
    writes for each session summary once it is indexed."""
    drafts = [(d.op.value, d.before, d.after, d.reason, d.events) for d in shadow.audits]
    drafts += [("ARCHIVE", sorted(members), [summary], "compressed into a summary", [])
               for summary, members in shadow.folded.items()]
    return shadow.history, actions(drafts)


def events_of(said: list[str], scope: Scope) -> list[Event]:
    """One event a minute; a session_end closes the session and the next one opens."""
    out: list[Event] = []
    session = 0
    for i, text in enumerate(said):
        at = T0 + timedelta(minutes=i)
        if text == SESSION_END:
            out.append(say("", at=at, session=f"s{session}", scope=scope, kind="session_end"))
            session += 1
        else:
            out.append(say(text, at=at, session=f"s{session}", scope=scope))
    return out


@dataclass(slots=True)
class Run:
    engine: Engine
    ports: Ports
    cfg: Settings
    scope: Scope
    clock: Clock
    events: list[Event]
    batches: list[int]


@contextmanager
def consolidated_live(said: list[str], cuts: list[int], index: EdgeIndex) -> Iterator[Run]:
    """``said`` emitted, drained and consolidated live, in batches cut at ``cuts``."""
    scope = Scope(tenant="acme", agent="bot", user=f"u{uuid.uuid4().hex[:8]}")
    events = events_of(said, scope)
    batches = sorted({c for c in cuts if c < len(events)} | {0, len(events)})
    clock = Clock()
    ports = make_ports(index, clock)
    namespace = f"smtest-{uuid.uuid4().hex[:10]}"
    redis = redis_lib.Redis.from_url(REDIS_URL)
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(f"sqlite:///{Path(tmp) / 'sleepmem.db'}")
        cfg = Settings(data_dir=Path(tmp) / "data", redis_url=REDIS_URL,
                       database_url=str(engine.url), namespace=namespace, embedder="hashing",
                       _env_file=None)  # type: ignore[call-arg]
        keys = Keys(namespace)
        try:
            # Live: each batch arrives, is drained, and is consolidated a little later.
            for lo, hi in pairwise(batches):
                append(redis, keys, validate_events(events[lo:hi]))
                while drain_once(redis=redis, keys=keys, engine=engine, settings=cfg,
                                 consumer="t", block_ms=1).read:
                    pass
                clock.now = T0 + timedelta(minutes=hi, seconds=30)
                consolidate_scope(engine=engine, ports=ports, settings=cfg,
                                  scope=scope)
            yield Run(engine, ports, cfg, scope, clock, events, batches)
        finally:
            engine.dispose()
            for key in redis.scan_iter(match=f"{namespace}:*"):
                redis.delete(key)
            redis.close()


def assert_same_history(run: Run, shadow: Shadow) -> None:
    """The replay's versions and audit actions are the live ones, row by row."""
    live_rows, live_actions = live_history(run.engine, run.scope.key)
    replay_rows, replay_actions = replayed_history(shadow)
    folded = {m for members in shadow.folded.values() for m in members}
    assert rows(replay_rows, archived=folded) == rows(live_rows), f"batches {run.batches}"
    assert replay_actions == live_actions, f"batches {run.batches}"


# Corrections in both languages, told across batches: their versions form chains.
CHAINS = ["I live in Lisbon.", "My favourite editor is Neovim.", "我住在北京。",
          "Actually, I moved to Porto last month.", SESSION_END,
          "Correction: my favourite editor is Emacs now.", "其实我上个月搬到上海了。",
          "Lovely sunny weather today, isn't it?"]


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(said=streams, cuts=st.lists(st.integers(min_value=1, max_value=13), max_size=3),
       delay=delays)
@example(said=CHAINS, cuts=[2, 5], delay=timedelta(minutes=5))
def test_a_replay_of_unchanged_events_rebuilds_the_live_memories(
    said: list[str], cuts: list[int], delay: timedelta, index: EdgeIndex
) -> None:
    with consolidated_live(said, cuts, index) as run:
        engine, ports, cfg, scope, clock = run.engine, run.ports, run.cfg, run.scope, run.clock
        clock.advance(delay)
        live = [m for m in current(engine, scope.key)
                if m.expires_at is None or m.expires_at.replace(tzinfo=None)
                > clock.now.replace(tzinfo=None)]
        shadow = replay(engine=engine, ports=ports, settings=cfg, scope_key=scope.key)
        assert remembered(shadow.current) == remembered(live), f"batches {run.batches}"
        assert_same_history(run, shadow)
        job = create_job(engine=engine, scope_key=scope.key, now=clock.now)
        done = run_job(engine=engine, ports=ports, settings=cfg, job_id=job.id)
        assert done.status == "done"
        assert done.total == len(run.events)
        counts = done.result["counts"]
        assert (counts["added"], counts["removed"], counts["changed"]) == (0, 0, 0), (
            f"batches {run.batches}: {done.result['diff']}"
        )
        assert counts["unchanged"] == len(live)


def test_a_replay_rebuilds_the_supersedes_chains_and_audit_actions_of_corrections(
    index: EdgeIndex,
) -> None:
    """The row-by-row comparison is no empty one: "Lisbon" and "北京" meet as a conflict
    set, "Porto" supersedes both (its chain goes on from one of them), "上海" supersedes
    "Porto"; the editor changes once."""
    with consolidated_live(CHAINS, [2, 5], index) as run:
        shadow = replay(engine=run.engine, ports=run.ports, settings=run.cfg,
                        scope_key=run.scope.key)
        assert_same_history(run, shadow)
        versions, audits = live_history(run.engine, run.scope.key)
        by_id = {m.id: m for m in versions}
        chains = {(by_id[m.supersedes].statement, m.statement): (by_id[m.supersedes], m)
                  for m in versions if m.supersedes}
        assert len(chains) == 3, sorted(chains)
        for old, new in chains.values():
            assert (old.status, old.superseded_by, new.version) == (
                "superseded", new.id, old.version + 1)
            assert old.valid_to is not None and aware(old.valid_to) == aware(new.valid_from)
            assert old.conflict_set is None and new.lineage == old.lineage
        (porto,) = [m for m in versions if "Porto" in m.statement]
        (beijing,) = [m for m in versions if "北京" in m.statement]
        assert (beijing.status, beijing.superseded_by) == ("superseded", porto.id)
        assert any("上海" in new.statement and new.supersedes == porto.id
                   for _old, new in chains.values())
        assert [op for op, *_ in audits].count("UPDATE") == 3
        assert "CONFLICT" in {op for op, *_ in audits}
