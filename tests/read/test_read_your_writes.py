"""Read your writes: an append answers its stream position, a scope is fresh up to a
position once every event of it up to there is consolidated and indexed, and a session end
that arrives while its scope is being consolidated runs next, at once."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select
from support import embedded_server

from sleepmem.client import AsyncClient, Client
from sleepmem.core.errors import ValidationError
from sleepmem.core.settings import Settings
from sleepmem.evals.harness import drain_all
from sleepmem.freshness import check, last_position, request_consolidation, wait
from sleepmem.models import RawEvent, Scope, ScopeState
from sleepmem.models.positions import (
    ORIGIN,
    EventId,
    EventIds,
    just_before,
    latest,
    position_key,
)
from sleepmem.pipelines.ports import Ports
from sleepmem.pipelines.types import EventView, Extraction
from sleepmem.pipelines.write.consolidate import ConsolidationReport, consolidate_scope
from sleepmem.pipelines.write.extract.rules import RulesExtractor
from sleepmem.resources import Resources
from sleepmem.runtime import Runtime
from sleepmem.schedules.triggers import due_scopes
from sleepmem.sdk import MemoryClient
from sleepmem.services import run_consolidation

ANN = {"tenant": "acme", "agent": "bot", "user": "ann"}
OWNER = Scope(**ANN).key


@pytest.fixture
def sdk(resources: Resources) -> Iterator[MemoryClient]:
    with MemoryClient(resources.settings, redis_url=resources.redis_url) as client:
        yield client


def said(session: str, *texts: str, end: bool = True) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {**ANN, "session": session, "role": "user", "content": t} for t in texts]
    if end:
        events.append({**ANN, "session": session, "kind": "session_end", "role": "system",
                       "content": ""})
    return events


def unconsolidated(engine: Engine, session: str) -> int:
    with Session(engine) as s:
        return len(s.exec(select(RawEvent.event_id).where(
            col(RawEvent.session) == session, col(RawEvent.consolidated).is_(False))).all())


class TestPositions:
    def test_positions_order_as_numbers_not_as_text(self) -> None:
        assert latest("1700000000000-9", "1700000000000-10") == "1700000000000-10"
        assert position_key("1700000000001-0") > position_key("1700000000000-99")

    def test_just_before_steps_back_one_sequence_or_one_millisecond(self) -> None:
        assert just_before("1700000000000-5") == "1700000000000-4"
        ms, seq = position_key(just_before("1700000000000-0"))
        assert ms == 1699999999999 and seq == 2**64 - 1
        assert just_before(ORIGIN) == ORIGIN

    def test_a_position_that_is_not_a_stream_id_is_refused(self) -> None:
        with pytest.raises(ValueError, match="not a stream position"):
            position_key("latest")

    def test_an_event_id_is_still_a_plain_string(self) -> None:
        ids = EventIds([EventId("e1", "5-0"), "e2"], "5-1")
        assert ids == ["e1", "e2"] and ids.position == "5-1"
        assert {"e1": 1}[EventId("e1", "5-0")] == 1


class TestEmitAnswersItsPosition:
    def test_emit_and_emit_many_answer_the_stream_position_of_their_append(
        self, sdk: MemoryClient, resources: Resources
    ) -> None:
        one = sdk.emit(**ANN, content="I prefer a window seat.")
        many = sdk.emit_many(said("s1", "I live in Berlin.", end=False) * 2)
        assert position_key(one.position) < position_key(many.position)
        assert many.position == last_position(resources.redis, resources.keys)


class TestFreshness:
    def test_a_scope_is_fresh_only_once_its_events_are_drained_consolidated_and_indexed(
        self, sdk: MemoryClient, resources: Resources
    ) -> None:
        ids = sdk.emit_many(said("s1", "I prefer a window seat."))
        before = check(resources, scope_key=OWNER, position=ids.position)
        assert not before.done and not before.drained
        assert position_key(before.reached) < position_key(ids.position)

        drain_all(resources)
        drained = check(resources, scope_key=OWNER, position=ids.position)
        assert drained.drained and not drained.done and drained.pending == len(ids)

        run_consolidation(resources, scope_key=OWNER, pipeline=consolidate_scope)
        after = check(resources, scope_key=OWNER, position=ids.position)
        assert after.done and after.reached == ids.position and after.pending == 0

    def test_events_after_the_position_do_not_hold_it_back(
        self, sdk: MemoryClient, resources: Resources
    ) -> None:
        first = sdk.emit_many(said("s1", "I prefer a window seat."))
        drain_all(resources)
        run_consolidation(resources, scope_key=OWNER, pipeline=consolidate_scope)
        later = sdk.emit(**ANN, session="s2", content="I live in Berlin.")
        drain_all(resources)
        assert check(resources, scope_key=OWNER, position=first.position).done
        assert not check(resources, scope_key=OWNER, position=later.position).done

    def test_another_scopes_pending_events_do_not_hold_a_scope_back(
        self, sdk: MemoryClient, resources: Resources
    ) -> None:
        mine = sdk.emit_many(said("s1", "I prefer a window seat."))
        sdk.emit(tenant="acme", agent="bot", user="bob", content="I live in Rome.")
        drain_all(resources)
        run_consolidation(resources, scope_key=OWNER, pipeline=consolidate_scope)
        assert check(resources, scope_key=OWNER,
                     position=last_position(resources.redis, resources.keys)).done
        assert check(resources, scope_key=OWNER, position=mine.position).done

    def test_wait_asks_for_the_consolidation_it_needs_and_says_when_it_is_done(
        self, sdk: MemoryClient, resources: Resources
    ) -> None:
        ids = sdk.emit_many(said("s1", "I prefer a window seat.", end=False))
        drain_all(resources)
        sent: list[str] = []

        def send(key: str) -> None:  # the worker, run in line
            sent.append(key)
            run_consolidation(resources, scope_key=key, pipeline=consolidate_scope)

        state = wait(resources, scope_key=OWNER, position=None, timeout_s=30, send=send)
        assert state.done and state.position == ids.position
        assert sent == [OWNER]

    def test_wait_gives_up_at_its_bound_and_says_how_far_memory_got(
        self, sdk: MemoryClient, resources: Resources
    ) -> None:
        ids = sdk.emit_many(said("s1", "I prefer a window seat."))
        drain_all(resources)
        state = wait(resources, scope_key=OWNER, position=ids.position, timeout_s=0)
        assert not state.done and state.pending == len(ids)
        assert position_key(state.reached) < position_key(ids.position)


class GatedExtractor:
    """The rules extractor, held at its first batch until the test lets it go: a
    consolidation that has loaded its events and not yet committed."""

    name = "rules"

    def __init__(self, inner: RulesExtractor) -> None:
        self.inner = inner
        self.loaded = threading.Event()
        self.go = threading.Event()

    def extract(self, events: list[EventView]) -> Extraction:
        self.loaded.set()
        assert self.go.wait(30), "the test never let the consolidation go on"
        return self.inner.extract(events)


class TestSessionEndDuringAConsolidation:
    @pytest.fixture
    def settings(self, settings: Settings) -> Settings:
        # Far from due by idleness: only the session end can make the scope run again.
        return settings.model_copy(update={"idle_seconds": 3600.0})

    def test_a_session_end_drained_mid_run_is_queued_as_soon_as_the_lease_frees(
        self, sdk: MemoryClient, resources: Resources
    ) -> None:
        gate = GatedExtractor(RulesExtractor(embedder=resources.embedder))

        def gated(**kw: Any) -> ConsolidationReport:
            ports: Ports = kw.pop("ports")
            return consolidate_scope(ports=replace(ports, extractor=gate), **kw)

        sent: queue.Queue[str] = queue.Queue()
        sdk.emit_many(said("s1", "I prefer a window seat."))
        drain_all(resources)
        first = threading.Thread(target=run_consolidation, args=(resources,), kwargs={
            "scope_key": OWNER, "pipeline": gated, "requeue": sent.put})
        first.start()
        assert gate.loaded.wait(30)
        sdk.emit_many(said("s2", "I live in Berlin."))  # the next session, ended meanwhile
        drain_all(resources)
        gate.go.set()
        first.join(30)

        assert sent.get(timeout=1) == OWNER  # queued by the run that held the lease
        assert unconsolidated(resources.engine, "s1") == 0
        assert unconsolidated(resources.engine, "s2") == 2
        with Session(resources.engine) as s:
            state = s.get(ScopeState, OWNER)
            assert state is not None and state.session_end and state.pending_count == 2
        run_consolidation(resources, scope_key=OWNER, pipeline=consolidate_scope,
                          requeue=sent.put)
        assert unconsolidated(resources.engine, "s2") == 0
        assert sent.empty()  # nothing arrived during the second run: nothing queued

    def test_without_a_requeue_the_scheduler_still_finds_the_ended_session_due(
        self, sdk: MemoryClient, resources: Resources
    ) -> None:
        gate = GatedExtractor(RulesExtractor(embedder=resources.embedder))

        def gated(**kw: Any) -> ConsolidationReport:
            kw["ports"] = replace(kw["ports"], extractor=gate)
            return consolidate_scope(**kw)

        sdk.emit_many(said("s1", "I prefer a window seat."))
        drain_all(resources)
        first = threading.Thread(target=run_consolidation, args=(resources,), kwargs={
            "scope_key": OWNER, "pipeline": gated})
        first.start()
        assert gate.loaded.wait(30)
        sdk.emit_many(said("s2", "I live in Berlin."))
        drain_all(resources)
        gate.go.set()
        first.join(30)
        due = due_scopes(engine=resources.engine, now=resources.ports().clock(),
                         settings=resources.settings)
        assert (OWNER, "session_end") in due

    def test_an_ask_during_a_run_is_kept_for_that_run_to_send_on_release(
        self, sdk: MemoryClient, resources: Resources
    ) -> None:
        gate = GatedExtractor(RulesExtractor(embedder=resources.embedder))

        def gated(**kw: Any) -> ConsolidationReport:
            kw["ports"] = replace(kw["ports"], extractor=gate)
            return consolidate_scope(**kw)

        sent: queue.Queue[str] = queue.Queue()
        res = resources
        sdk.emit_many(said("s1", "I prefer a window seat.", end=False))
        drain_all(res)
        # Queued the way a trigger queues it: the coalescing key is held for the run.
        assert request_consolidation(res.redis, res.keys, res.settings, OWNER, sent.put,
                                     reason="idle")
        assert sent.get_nowait() == OWNER
        first = threading.Thread(target=run_consolidation, args=(res,), kwargs={
            "scope_key": OWNER, "pipeline": gated, "requeue": sent.put})
        first.start()
        assert gate.loaded.wait(30)
        sdk.emit(**ANN, session="s2", content="I live in Berlin.")  # no session end
        drain_all(res)
        assert not request_consolidation(res.redis, res.keys, res.settings, OWNER, sent.put,
                                         reason="flush")  # coalesced into the running one
        gate.go.set()
        first.join(30)
        assert sent.get(timeout=1) == OWNER


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    # The scheduler's tick a minute apart: only the waits' own asks consolidate in time.
    with embedded_server(tmp_path_factory.mktemp("ryw"), tick_seconds=60.0) as runtime:
        yield runtime


def client(server: Runtime, user: str, session: str = "s1") -> Client:
    return Client(data_dir=server.settings.data_dir, tenant="default", agent="bot",
                  user=user, session=session)


class TestOverHttp:
    def test_flush_returns_once_what_was_emitted_is_searchable(self, server: Runtime) -> None:
        with client(server, "cleo") as mem:
            sent = mem.emit(role="user", content="I prefer an aisle seat.")
            state = mem.flush(position=sent.position, timeout=30)
            assert state.done and state.reached == sent.position and state.pending == 0
            found = [c.statement for c in mem.search("seat preference", k=3).flat()]
            assert any("aisle seat" in s for s in found), found

    def test_search_with_min_position_waits_for_the_event_and_says_it_is_fresh(
        self, server: Runtime
    ) -> None:
        with client(server, "dora") as mem:
            sent = mem.emit(role="user", content="I am allergic to peanuts.")
            result = mem.search("allergy", k=3, min_position=sent.position, wait=30)
            assert result.fresh is True and result.reached == sent.position
            assert any("peanut" in c.statement for c in result.flat())

    def test_context_with_min_position_answers_with_the_event_in_memory(
        self, server: Runtime
    ) -> None:
        with client(server, "emil") as mem:
            sent = mem.emit(role="user", content="I live in Lisbon.")
            ctx = mem.context("where do I live?", budget_tokens=200,
                              min_position=sent.position, wait=30)
            assert ctx.fresh is True and "Lisbon" in ctx.text

    def test_a_wait_of_zero_answers_at_once_and_says_it_is_not_fresh(
        self, server: Runtime
    ) -> None:
        with client(server, "finn") as mem:
            sent = mem.emit(role="user", content="I prefer tea to coffee.")
            result = mem.search("drinks", k=3, min_position=sent.position, wait=0)
            assert result.fresh is False
            assert result.reached is not None
            assert position_key(result.reached) < position_key(sent.position)
            assert mem.flush(timeout=30).done  # and nothing was lost by asking early

    def test_end_session_with_wait_returns_once_the_session_is_in_memory(
        self, server: Runtime
    ) -> None:
        async def run() -> list[str]:
            async with AsyncClient(data_dir=server.settings.data_dir, tenant="default",
                                   agent="bot", user="gina", session="s1") as mem:
                await mem.emit(role="user", content="My favourite colour is green.")
                await mem.end_session(wait=True)
                return [c.statement for c in (await mem.search("colour", k=3)).flat()]

        assert any("green" in s for s in asyncio.run(run()))

    def test_a_position_that_is_not_one_is_refused_naming_its_field(
        self, server: Runtime
    ) -> None:
        with client(server, "hana") as mem:
            with pytest.raises(ValidationError) as err:
                mem.search("anything", min_position="latest", wait=1)
            assert err.value.field == "min_position"
            with pytest.raises(ValidationError) as err:
                mem.flush(position="latest", timeout=1)
            assert err.value.field == "position"

    def test_the_ingest_answer_carries_the_position(self, server: Runtime) -> None:
        with client(server, "ivan") as mem:
            key = mem.target.key
        response = httpx.post(f"{server.api_url}/v1/events", headers={
            "Authorization": f"Bearer {key}"}, json=[
            {"tenant": "default", "agent": "bot", "user": "ivan", "content": "one"},
            {"tenant": "default", "agent": "bot", "user": "ivan", "content": "two"}])
        body = response.json()
        assert response.status_code == 202 and len(body["ids"]) == 2
        position_key(body["position"])
