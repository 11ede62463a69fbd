"""Overflow and session end go through the event path; consolidation folds the final
checkpoint into memory, with the checkpoint's version as provenance."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest
import redis as redis_lib
from fastapi.testclient import TestClient
from sqlmodel import Session, col, select

from sleepmem.api.app import create_app
from sleepmem.core.errors import ConflictError
from sleepmem.core.keys import Keys
from sleepmem.evals.harness import consolidate_pending, drain_all, emit_all
from sleepmem.models import Memory, RawEvent, ScopeState
from sleepmem.resources import Resources
from sleepmem.working import WorkingMemory

SCOPE = {"tenant": "acme", "agent": "bot", "user": "ann", "session": "move-7"}
FINAL = {
    "goal": "Update Ann's address after her move",
    "plan": ["confirm the new address", "update billing", "update shipping"],
    "completed": [
        {"key": "confirm:addr", "step": "confirmed the new address with Ann"},
        {"key": "billing:addr", "step": "updated the billing address"},
    ],
    "current_step": "update shipping",
    "verified": ["The user lives in Munich."],
}


def stream_events(redis: redis_lib.Redis, keys: Keys) -> list[dict[str, object]]:
    return [orjson.loads(f[b"e"]) for _i, f in redis.xrange(keys.events)]


@pytest.fixture
def wm(resources: Resources) -> WorkingMemory:
    return WorkingMemory(resources)


class TestEvict:
    def test_evicted_messages_become_events_marked_as_evicted(
        self, wm: WorkingMemory, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        got = wm.evict({"scope": SCOPE, "messages": [
            {"role": "user", "content": "I moved to Munich last month."},
            {"role": "assistant", "content": "Noted, I will update your address."},
        ]})
        events = stream_events(redis, keys)
        assert [e["event_id"] for e in events] == got.ids
        assert [e["role"] for e in events] == ["user", "assistant"]
        assert all(e["meta"] == {"evicted": True} and e["session"] == "move-7"
                   for e in events)

    def test_a_message_evicted_with_the_id_it_was_emitted_with_is_stored_once(
        self, wm: WorkingMemory, resources: Resources
    ) -> None:
        emit_all(resources, [{**SCOPE, "event_id": "turn-1", "content": "I moved to Munich."}])
        wm.evict({"scope": SCOPE, "messages": [
            {"event_id": "turn-1", "content": "I moved to Munich."}]})
        drain_all(resources)
        with Session(resources.engine) as s:
            assert s.exec(select(RawEvent.event_id)).all() == ["turn-1"]


class TestEndSession:
    def test_ending_freezes_the_checkpoint(self, wm: WorkingMemory) -> None:
        wm.put(SCOPE, FINAL, base_version=0)
        ended = wm.end_session({"scope": SCOPE, "outcome": "shipping left for tomorrow"})
        assert ended.checkpoint_version == 1
        with pytest.raises(ConflictError, match="has ended"):
            wm.put(SCOPE, FINAL, base_version=1)
        assert wm.get(SCOPE).ended_at is not None

    def test_the_final_state_goes_to_the_event_log_with_its_version_as_provenance(
        self, wm: WorkingMemory, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        wm.put(SCOPE, {**FINAL, "completed": []}, base_version=0)
        wm.put(SCOPE, FINAL, base_version=1)
        wm.end_session({"scope": SCOPE, "outcome": "shipping left for tomorrow"})
        events = stream_events(redis, keys)
        assert [e["kind"] for e in events] == ["observation", "tool_result", "session_end"]
        assert all(e["meta"]["checkpoint"] == {"session": "move-7", "version": 2}
                   for e in events)
        summary = str(events[0]["content"])
        assert "updated the billing address" in summary and "update shipping" in summary
        assert events[1]["content"] == "The user lives in Munich."
        assert events[1]["meta"]["trusted"] is True

    def test_ending_twice_appends_events_with_the_same_ids_and_stores_them_once(
        self, wm: WorkingMemory, resources: Resources
    ) -> None:
        wm.put(SCOPE, FINAL, base_version=0)
        first = wm.end_session({"scope": SCOPE})
        second = wm.end_session({"scope": SCOPE})
        assert first.ids == second.ids
        drain_all(resources)
        with Session(resources.engine) as s:
            assert sorted(s.exec(select(RawEvent.event_id)).all()) == sorted(first.ids)

    def test_a_session_without_a_checkpoint_still_ends(
        self, wm: WorkingMemory, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        got = wm.end_session({"scope": SCOPE})
        assert got.checkpoint_version is None
        assert [e["kind"] for e in stream_events(redis, keys)] == ["session_end"]

    def test_consolidation_folds_the_checkpoint_into_an_episode_and_a_fact(
        self, wm: WorkingMemory, resources: Resources
    ) -> None:
        wm.put(SCOPE, FINAL, base_version=0)
        ended = wm.end_session({"scope": SCOPE, "outcome": "shipping left for tomorrow"})
        drain_all(resources)
        with Session(resources.engine) as s:
            state = s.exec(select(ScopeState)).one()
        assert state.session_end  # the trigger that consolidates the scope soon
        consolidate_pending(resources)
        with Session(resources.engine) as s:
            mems = s.exec(select(Memory).where(col(Memory.status) == "active")).all()
        from_checkpoint = [m for m in mems if set(m.provenance) & set(ended.ids)]
        assert from_checkpoint, [m.statement for m in mems]
        assert any(m.type == "event" and "billing address" in m.statement
                   for m in from_checkpoint)
        munich = [m for m in from_checkpoint if "Munich" in m.statement and m.type != "event"]
        assert munich and munich[0].trust == "high"


class TestHttp:
    @pytest.fixture
    def http(self, resources: Resources) -> Iterator[TestClient]:
        with TestClient(create_app(resources=resources)) as client:
            yield client

    def test_evict_and_end_answer_202_with_the_event_ids(
        self, http: TestClient, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        http.put("/v1/checkpoints", json={"scope": SCOPE, "state": FINAL, "base_version": 0})
        ev = http.post("/v1/sessions/evict", json={"scope": SCOPE, "messages": [
            {"role": "user", "content": "old turn"}]})
        assert ev.status_code == 202 and len(ev.json()["ids"]) == 1
        end = http.post("/v1/sessions/end", json={"scope": SCOPE, "outcome": "done"})
        assert end.status_code == 202
        assert end.json()["checkpoint_version"] == 1
        later = http.put("/v1/checkpoints", json={"scope": SCOPE, "state": FINAL,
                                                  "base_version": 1})
        assert later.status_code == 409
        assert len(stream_events(redis, keys)) == 1 + len(end.json()["ids"])
