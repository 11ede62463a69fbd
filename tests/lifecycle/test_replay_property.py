"""Live consolidation and re-consolidation replay share one stage sequence: a replay of
unchanged events under unchanged settings rebuilds exactly the live result (an empty diff),
for any stream of events and any way the live side split it into batches.

Real SQLite, Redis stream, drain and embedded index; the rules extractor and the hashing
embedder, as the other pipeline tests use.
"""

from __future__ import annotations

import tempfile
import uuid
from datetime import timedelta
from itertools import pairwise
from pathlib import Path

import redis as redis_lib
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lifecycle_support import T0, Clock, current, make_ports, say
from support import REDIS_URL

from sleepmem.adapters.redis.stream import append
from sleepmem.adapters.sql import make_engine
from sleepmem.adapters.vectors.edge import EdgeIndex
from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.ingest.drain import drain_once
from sleepmem.ingest.validation import validate_events
from sleepmem.models import Event, Memory, Scope
from sleepmem.pipelines.lifecycle.reconsolidate import create_job, replay, run_job
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


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(said=streams, cuts=st.lists(st.integers(min_value=1, max_value=13), max_size=3),
       delay=delays)
def test_a_replay_of_unchanged_events_rebuilds_the_live_memories(
    said: list[str], cuts: list[int], delay: timedelta, index: EdgeIndex
) -> None:
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
                                  scope_key=scope.key)
            clock.advance(delay)
            live = [m for m in current(engine, scope.key)
                    if m.expires_at is None or m.expires_at.replace(tzinfo=None)
                    > clock.now.replace(tzinfo=None)]
            shadow = replay(engine=engine, ports=ports, settings=cfg, scope_key=scope.key)
            assert remembered(shadow.current) == remembered(live), f"batches {batches}"
            job = create_job(engine=engine, scope_key=scope.key, now=clock.now)
            done = run_job(engine=engine, ports=ports, settings=cfg, job_id=job.id)
            assert done.status == "done"
            assert done.total == len(events)
            counts = done.result["counts"]
            assert (counts["added"], counts["removed"], counts["changed"]) == (0, 0, 0), (
                f"batches {batches}: {done.result['diff']}"
            )
            assert counts["unchanged"] == len(live)
        finally:
            engine.dispose()
            for key in redis.scan_iter(match=f"{namespace}:*"):
                redis.delete(key)
            redis.close()
