"""One contract for every VectorIndex backend: same calls, same answers.

Runs against the embedded engine (qdrant-edge, on disk in tmp), qdrant-client's local
mode (on disk and in memory), which stands in for the server code path, and the in-memory
index the fast unit tests use in place of the engine.
"""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import structlog

from sleepmem.adapters import vectors as vectors_pkg
from sleepmem.adapters.vectors import edge as edge_mod
from sleepmem.adapters.vectors import open_index
from sleepmem.adapters.vectors import qdrant as qdrant_mod
from sleepmem.adapters.vectors.edge import EdgeIndex
from sleepmem.adapters.vectors.memory import MemoryIndex
from sleepmem.adapters.vectors.qdrant import QdrantIndex
from sleepmem.core.errors import ConfigurationError, ValidationError
from sleepmem.core.settings import Settings
from sleepmem.models.scope import Scope
from sleepmem.pipelines.lexical import sparse_document, sparse_query
from sleepmem.pipelines.ports import Hit, IndexFilter, IndexPoint, VectorIndex

DIM = 8
NOW = datetime(2026, 1, 1, tzinfo=UTC)
T = NOW.timestamp()
DAY = 86400.0
PERSISTENT = ["edge", "qdrant-local"]
BACKENDS = [*PERSISTENT, "qdrant-memory", "memory"]


def build(kind: str, where: Path) -> VectorIndex:
    if kind == "edge":
        return EdgeIndex(where / "index")
    if kind == "qdrant-local":
        return QdrantIndex(path=where / "qdrant", collection="contract")
    if kind == "memory":
        return MemoryIndex()
    return QdrantIndex(path=":memory:", collection="contract")


@pytest.fixture(params=BACKENDS)
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorIndex]:
    idx = build(request.param, tmp_path)
    idx.ensure(dim=DIM)
    yield idx
    idx.close()


def new_id() -> str:
    return uuid.uuid4().hex


def axis(i: int, tilt: float = 0.0) -> np.ndarray[Any, np.dtype[np.float32]]:
    """A unit vector along axis ``i``, tilted towards the next axis by ``tilt``."""
    v = np.zeros(DIM, dtype=np.float32)
    v[i % DIM] = 1.0
    v[(i + 1) % DIM] = tilt
    return v / np.linalg.norm(v)


def point(
    *, vector: Any = None, text: str = "note", id: str | None = None, **payload: Any
) -> IndexPoint:
    body: dict[str, Any] = {
        "tenant": "t1",
        "agent": "",
        "user": "",
        "project": "",
        "session": "",
        "scope_key": "k",
        "lineage": new_id(),
        "type": "fact",
        "status": "active",
        "hidden": False,
        "valid_from": T - 10 * DAY,
        "valid_to": None,
        "expires_at": None,
    }
    body.update(payload)
    return IndexPoint(
        id=id or new_id(),
        vector=axis(0) if vector is None else vector,
        sparse=sparse_document(text),
        payload=body,
    )


def where(scope: Scope | None = None, *, as_of: datetime | None = None, **kw: Any) -> IndexFilter:
    return IndexFilter(scope=scope or Scope(tenant="t1"), now=NOW, as_of=as_of, **kw)


def found(index: VectorIndex, flt: IndexFilter, limit: int = 100) -> set[str]:
    return {h.id for h in index.search_dense(axis(0), where=flt, limit=limit)}


USER_A = Scope(tenant="t1", agent="bot", user="alice")


class TestDenseSearch:
    def test_hits_come_best_first_with_cosine_scores(self, index: VectorIndex) -> None:
        near, mid, far = (
            point(vector=axis(0, 0.1)),
            point(vector=axis(0, 1.0)),
            point(vector=axis(3)),
        )
        index.upsert([far, near, mid])
        hits = index.search_dense(axis(0), where=where(), limit=10)
        assert [h.id for h in hits] == [near.id, mid.id, far.id]
        assert hits[0].score == pytest.approx(float(axis(0) @ axis(0, 0.1)), abs=1e-4)
        assert hits[2].score == pytest.approx(0.0, abs=1e-4)

    def test_limit_caps_the_number_of_hits(self, index: VectorIndex) -> None:
        index.upsert([point(vector=axis(0, i / 10)) for i in range(6)])
        assert len(index.search_dense(axis(0), where=where(), limit=4)) == 4
        assert index.search_dense(axis(0), where=where(), limit=0) == []

    def test_upserting_an_existing_id_replaces_the_point(self, index: VectorIndex) -> None:
        p = point(vector=axis(2))
        index.upsert([p])
        index.upsert([point(id=p.id, vector=axis(0))])
        assert index.count() == 1
        assert index.search_dense(axis(0), where=where(), limit=1)[0].score > 0.99

    def test_a_vector_of_the_wrong_size_is_refused(self, index: VectorIndex) -> None:
        bad = IndexPoint(new_id(), np.ones(DIM + 1, dtype=np.float32), {}, point().payload)
        with pytest.raises(ValidationError):
            index.upsert([bad])


class TestSentenceSearch:
    def test_a_point_is_scored_by_its_best_matching_sentence(self, index: VectorIndex) -> None:
        # The whole statement's vector points between its two sentences; the query matches
        # the second sentence exactly.
        mixed = replace(point(vector=axis(0, 1.0)), sentences=[axis(0), axis(1)])
        other = replace(point(vector=axis(1, 0.5)), sentences=[axis(1, 0.5), axis(3)])
        index.upsert([other, mixed])
        hits = index.search_sentences(axis(1), where=where(), limit=10)
        assert [h.id for h in hits] == [mixed.id, other.id]
        assert hits[0].score == pytest.approx(1.0, abs=1e-4)
        # The statement's own vector ranks them the other way round.
        dense = index.search_dense(axis(1), where=where(), limit=10)
        assert [h.id for h in dense] == [other.id, mixed.id]

    def test_points_without_sentences_are_not_candidates(self, index: VectorIndex) -> None:
        single = point(vector=axis(1))
        several = replace(point(vector=axis(2)), sentences=[axis(2), axis(1, 0.2)])
        index.upsert([single, several])
        hits = index.search_sentences(axis(1), where=where(), limit=10)
        assert [h.id for h in hits] == [several.id]

    def test_the_filter_applies_to_sentences_too(self, index: VectorIndex) -> None:
        gone = replace(point(vector=axis(2), status="superseded"), sentences=[axis(1), axis(2)])
        alice = replace(point(vector=axis(2), agent="bot", user="alice"),
                        sentences=[axis(1), axis(2)])
        index.upsert([gone, alice])
        assert [h.id for h in index.search_sentences(axis(1), where=where(), limit=10)] == []
        hits = index.search_sentences(axis(1), where=where(USER_A), limit=10)
        assert [h.id for h in hits] == [alice.id]


class TestSparseSearch:
    def test_the_statement_sharing_the_query_words_ranks_first(self, index: VectorIndex) -> None:
        peanut = point(text="The user is allergic to peanuts")
        tea = point(text="The user drinks green tea every morning")
        chinese = point(text="我对花生过敏")
        index.upsert([peanut, tea, chinese])
        hits = index.search_sparse(sparse_query("peanut allergy?"), where=where(), limit=10)
        assert hits[0].id == peanut.id
        assert tea.id not in {h.id for h in hits}
        zh = index.search_sparse(sparse_query("花生"), where=where(), limit=10)
        assert [h.id for h in zh] == [chinese.id]

    def test_rarer_terms_weigh_more_through_idf(self, index: VectorIndex) -> None:
        common = [point(text=f"user likes coffee {i}") for i in range(5)]
        rare = point(text="user likes durian")
        index.upsert([*common, rare])
        hits = index.search_sparse(sparse_query("likes durian coffee"), where=where(), limit=10)
        assert hits[0].id == rare.id
        assert all(hits[0].score > h.score for h in hits[1:])

    def test_an_empty_query_finds_nothing(self, index: VectorIndex) -> None:
        index.upsert([point(text="anything at all")])
        assert index.search_sparse({}, where=where(), limit=10) == []

    def test_token_ids_outside_u32_are_refused(self, index: VectorIndex) -> None:
        bad = IndexPoint(new_id(), axis(0), {2**32: 1.0}, point().payload)
        with pytest.raises(ValidationError):
            index.upsert([bad])

    def test_a_point_without_lexical_terms_is_still_stored(self, index: VectorIndex) -> None:
        p = point(text="the of and")
        index.upsert([p])
        assert found(index, where()) == {p.id}


class TestScopeNesting:
    def test_a_search_sees_its_own_scope_and_every_broader_one(self, index: VectorIndex) -> None:
        tenant_wide = point()
        agent_wide = point(agent="bot")
        own = point(agent="bot", user="alice")
        index.upsert([tenant_wide, agent_wide, own])
        assert found(index, where(USER_A)) == {tenant_wide.id, agent_wide.id, own.id}

    def test_siblings_and_narrower_scopes_stay_invisible(self, index: VectorIndex) -> None:
        own = point(agent="bot", user="alice")
        sibling = point(agent="bot", user="bob")
        other_agent = point(agent="other", user="alice")
        narrower = point(agent="bot", user="alice", project="p1")
        session = point(agent="bot", user="alice", session="s1")
        index.upsert([own, sibling, other_agent, narrower, session])
        assert found(index, where(USER_A)) == {own.id}
        in_session = Scope(tenant="t1", agent="bot", user="alice", session="s1")
        assert found(index, where(in_session)) == {own.id, session.id}

    def test_a_searcher_without_a_level_sees_only_points_without_it(
        self, index: VectorIndex
    ) -> None:
        tenant_wide, user_level = point(), point(user="alice")
        index.upsert([tenant_wide, user_level])
        assert found(index, where(Scope(tenant="t1"))) == {tenant_wide.id}

    def test_another_tenant_is_never_reached(self, index: VectorIndex) -> None:
        mine, theirs = point(tenant="t1"), point(tenant="t2")
        index.upsert([mine, theirs])
        assert found(index, where(Scope(tenant="t1"))) == {mine.id}
        assert found(index, where(Scope(tenant="t2"))) == {theirs.id}
        assert found(index, where(Scope(tenant="t3"))) == set()


class TestTypeStatusAndHidden:
    def test_a_types_filter_keeps_only_those_types(self, index: VectorIndex) -> None:
        fact, pref, task = point(type="fact"), point(type="preference"), point(type="task")
        index.upsert([fact, pref, task])
        assert found(index, where(types=("fact", "task"))) == {fact.id, task.id}
        assert found(index, where(types=())) == set()

    def test_only_current_statuses_are_searched_by_default(self, index: VectorIndex) -> None:
        active = point(status="active")
        pending = point(status="pending_confirmation")
        old = point(status="superseded")
        archived = point(status="archived")
        index.upsert([active, pending, old, archived])
        assert found(index, where()) == {active.id, pending.id}
        assert found(index, where(statuses=("archived",))) == {archived.id}

    def test_hidden_points_are_never_returned(self, index: VectorIndex) -> None:
        shown, hidden = point(type="procedure"), point(type="procedure", hidden=True)
        index.upsert([shown, hidden])
        assert found(index, where()) == {shown.id}
        assert found(index, where(as_of=NOW)) == {shown.id}


class TestExpiry:
    def test_a_point_past_its_expiry_is_gone_before_any_sweep(self, index: VectorIndex) -> None:
        expired = point(expires_at=T - 1)
        at_now = point(expires_at=T)
        later = point(expires_at=T + DAY)
        never = point(expires_at=None)
        index.upsert([expired, at_now, later, never])
        assert found(index, where()) == {later.id, never.id}

    def test_pushing_expiry_forward_brings_a_point_back(self, index: VectorIndex) -> None:
        p = point(expires_at=T - 1)
        index.upsert([p])
        index.set_payload([p.id], {"expires_at": T + DAY})
        assert found(index, where()) == {p.id}


class TestAsOf:
    def test_as_of_returns_what_was_valid_then_whatever_its_status(
        self, index: VectorIndex
    ) -> None:
        old = point(status="superseded", valid_from=T - 10 * DAY, valid_to=T - 5 * DAY)
        new = point(status="active", valid_from=T - 5 * DAY, valid_to=None)
        index.upsert([old, new])
        assert found(index, where(as_of=NOW - timedelta(days=7))) == {old.id}
        assert found(index, where(as_of=NOW - timedelta(days=5))) == {new.id}
        assert found(index, where(as_of=NOW - timedelta(days=20))) == set()
        assert found(index, where()) == {new.id}

    def test_as_of_ignores_expiry(self, index: VectorIndex) -> None:
        expired = point(valid_from=T - 10 * DAY, expires_at=T - DAY)
        index.upsert([expired])
        assert found(index, where()) == set()
        assert found(index, where(as_of=NOW - timedelta(days=2))) == {expired.id}

    def test_as_of_still_applies_scope_and_types(self, index: VectorIndex) -> None:
        sibling = point(agent="bot", user="bob", status="superseded", valid_to=T)
        other_type = point(type="task", status="superseded", valid_to=T)
        index.upsert([sibling, other_type])
        past = NOW - timedelta(days=1)
        assert found(index, where(USER_A, as_of=past, types=("fact",))) == set()
        assert found(index, where(as_of=past, types=("task",))) == {other_type.id}

    def test_naive_datetimes_are_read_as_utc(self, index: VectorIndex) -> None:
        p = point(valid_from=T - DAY, valid_to=T)
        index.upsert([p])
        naive = (NOW - timedelta(hours=1)).replace(tzinfo=None)
        assert found(index, where(as_of=naive)) == {p.id}


class TestValidBetween:
    def test_the_time_window_keeps_points_that_became_valid_inside_it(
        self, index: VectorIndex
    ) -> None:
        before = point(valid_from=T - 3 * DAY)
        at_start = point(valid_from=T - 2 * DAY)
        inside = point(valid_from=T - 1.5 * DAY)
        at_end = point(valid_from=T - DAY)
        index.upsert([before, at_start, inside, at_end])
        window = (NOW - timedelta(days=2), NOW - timedelta(days=1))
        assert found(index, where(valid_between=window)) == {at_start.id, inside.id}


class TestPartialUpdatesAndDeletes:
    def test_a_status_flip_takes_a_point_out_of_search_and_back(self, index: VectorIndex) -> None:
        p, other = point(), point()
        index.upsert([p, other])
        index.set_payload([p.id], {"status": "superseded", "valid_to": T - 1})
        assert found(index, where()) == {other.id}
        index.set_payload([p.id], {"status": "active", "valid_to": None})
        assert found(index, where()) == {p.id, other.id}

    def test_set_payload_changes_only_the_keys_given(self, index: VectorIndex) -> None:
        p = point(agent="bot", user="alice", type="preference")
        index.upsert([p])
        index.set_payload([p.id], {"status": "archived"})
        stored = index.payloads([p.id])[p.id]
        assert stored["status"] == "archived"
        assert (stored["agent"], stored["user"], stored["type"]) == ("bot", "alice", "preference")

    def test_delete_removes_points_from_search_payloads_and_count(self, index: VectorIndex) -> None:
        gone, kept = point(text="peanut"), point(text="peanut")
        index.upsert([gone, kept])
        index.delete([gone.id])
        assert index.count() == 1
        assert found(index, where()) == {kept.id}
        lexical = index.search_sparse(sparse_query("peanut"), where=where(), limit=5)
        assert [h.id for h in lexical] == [kept.id]
        assert index.payloads([gone.id]) == {}

    def test_deleting_an_unknown_id_is_harmless(self, index: VectorIndex) -> None:
        index.upsert([point()])
        index.delete([new_id()])
        assert index.count() == 1


class TestIdsAndPayloads:
    def test_payloads_come_back_as_written(self, index: VectorIndex) -> None:
        p = point(agent="bot", expires_at=T + DAY, valid_to=None)
        index.upsert([p])
        stored = index.payloads([p.id, new_id()])
        assert list(stored) == [p.id]
        assert stored[p.id] == {**p.payload, "valid_from": pytest.approx(T - 10 * DAY)}

    def test_all_ids_lists_every_point_or_one_tenants(
        self, index: VectorIndex, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Small pages make the scroll cross several of them.
        monkeypatch.setattr(edge_mod, "_SCROLL_PAGE", 3)
        monkeypatch.setattr(qdrant_mod, "_SCROLL_PAGE", 3)
        ones = [point(tenant="t1") for _ in range(7)]
        twos = [point(tenant="t2") for _ in range(2)]
        index.upsert([*ones, *twos])
        assert sorted(index.all_ids()) == sorted(p.id for p in ones + twos)
        assert sorted(index.all_ids(tenant="t2")) == sorted(p.id for p in twos)

    def test_ids_that_are_not_32_hex_digits_are_refused(self, index: VectorIndex) -> None:
        for bad in ("not-a-uuid", str(uuid.uuid4()), uuid.uuid4().hex.upper()):
            with pytest.raises(ValidationError):
                index.upsert([point(id=bad)])

    def test_memory_content_is_refused_in_a_payload(self, index: VectorIndex) -> None:
        p = point()
        with pytest.raises(ValidationError):
            index.upsert([point(statement="I am allergic to peanuts")])
        index.upsert([p])
        with pytest.raises(ValidationError):
            index.set_payload([p.id], {"content": "I am allergic to peanuts"})

    def test_a_payload_without_a_tenant_is_refused(self, index: VectorIndex) -> None:
        with pytest.raises(ValidationError):
            index.upsert([point(tenant="")])


@pytest.mark.parametrize("kind", PERSISTENT)
class TestPersistence:
    def test_points_and_filters_survive_close_and_reopen(self, kind: str, tmp_path: Path) -> None:
        first = build(kind, tmp_path)
        first.ensure(dim=DIM)
        kept = point(agent="bot", user="alice", text="allergic to peanuts")
        hidden = point(agent="bot", user="alice", status="superseded")
        first.upsert([kept, hidden])
        first.set_payload([kept.id], {"expires_at": T + DAY})
        first.close()

        again = build(kind, tmp_path)
        again.ensure(dim=DIM)
        again.ensure(dim=DIM)  # idempotent
        try:
            assert again.count() == 2
            assert found(again, where(USER_A)) == {kept.id}
            sparse = again.search_sparse(sparse_query("peanuts"), where=where(USER_A), limit=5)
            assert [h.id for h in sparse] == [kept.id]
            assert again.payloads([kept.id])[kept.id]["expires_at"] == pytest.approx(T + DAY)
        finally:
            again.close()

    def test_reopening_with_another_dimension_is_refused(self, kind: str, tmp_path: Path) -> None:
        first = build(kind, tmp_path)
        first.ensure(dim=DIM)
        first.upsert([point()])
        first.close()
        again = build(kind, tmp_path)
        with pytest.raises(ConfigurationError):
            again.ensure(dim=DIM * 2)
        again.close()


class TestEdgeEngine:
    def test_maintain_keeps_every_point_searchable(self, tmp_path: Path) -> None:
        idx = EdgeIndex(tmp_path / "index")
        idx.ensure(dim=DIM)
        pts = [point(vector=axis(i, 0.3), user=f"u{i % 3}") for i in range(300)]
        idx.upsert(pts)
        before = idx.search_dense(axis(1), where=where(Scope(tenant="t1", user="u1")), limit=5)
        idx.maintain()
        after = idx.search_dense(axis(1), where=where(Scope(tenant="t1", user="u1")), limit=5)
        assert idx.count() == 300
        assert [h.id for h in after] == [h.id for h in before]
        idx.close()

    def test_threads_can_search_while_another_writes(self, tmp_path: Path) -> None:
        idx = EdgeIndex(tmp_path / "index")
        idx.ensure(dim=DIM)
        idx.upsert([point(vector=axis(i)) for i in range(50)])
        errors: list[BaseException] = []
        counts: list[int] = []

        def search() -> None:
            try:
                for _ in range(100):
                    counts.append(len(idx.search_dense(axis(0), where=where(), limit=10)))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        readers = [threading.Thread(target=search) for _ in range(3)]
        for t in readers:
            t.start()
        for i in range(20):
            idx.upsert([point(vector=axis(i)) for _ in range(10)])
        for t in readers:
            t.join()
        idx.close()
        assert errors == []
        assert counts and all(c == 10 for c in counts)

    def test_a_second_opener_is_refused_until_the_first_closes(self, tmp_path: Path) -> None:
        first = EdgeIndex(tmp_path / "index")
        first.ensure(dim=DIM)
        first.upsert([point()])
        second = EdgeIndex(tmp_path / "index")
        with pytest.raises(ConfigurationError):
            second.ensure(dim=DIM)
        first.close()
        second.ensure(dim=DIM)
        assert second.count() == 1
        second.close()

    def test_a_shard_from_before_sentence_vectors_is_rewritten_with_them(
        self, tmp_path: Path
    ) -> None:
        old = EdgeIndex(tmp_path / "index")
        old.path.mkdir(parents=True)
        # The layout an earlier release created: dense and lexical vectors only.
        shard = edge_mod.qe.EdgeShard.create(str(old.path), old._config(DIM, sentences=False))
        kept = point(vector=axis(0), text="allergic to peanuts")
        shard.update(edge_mod.qe.UpdateOperation.upsert_points([edge_mod.qe.Point(
            vectors_pkg.payload.point_id(kept.id),
            {vectors_pkg.payload.DENSE: axis(0).tolist(),
             vectors_pkg.payload.LEXICAL: edge_mod._sparse(kept.sparse)},
            vectors_pkg.payload.encode(kept.payload),
        )]))
        shard.flush()
        shard.close()

        idx = EdgeIndex(tmp_path / "index")
        with structlog.testing.capture_logs() as logs:
            idx.ensure(dim=DIM)
        try:
            events = [e["event"] for e in logs]
            assert events.count("index_upgrading") == 1
            assert events.count("index_compacted") == 1
            assert events.count("index_opened") == 1
            assert found(idx, where()) == {kept.id}
            assert [h.id for h in idx.search_sparse(sparse_query("peanuts"), where=where(),
                                                    limit=5)] == [kept.id]
            added = replace(point(vector=axis(2)), sentences=[axis(2), axis(1)])
            idx.upsert([added])
            hits = idx.search_sentences(axis(1), where=where(), limit=5)
            assert [h.id for h in hits] == [added.id]
        finally:
            idx.close()
        assert not (tmp_path / "index.erased").exists()

    def test_using_the_index_before_ensure_is_a_configuration_error(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigurationError):
            EdgeIndex(tmp_path / "index").count()


class TestMemoryIndex:
    def test_a_closed_index_refuses_use_and_keeps_its_points_for_the_next_ensure(
        self,
    ) -> None:
        idx = MemoryIndex()
        idx.ensure(dim=DIM)
        kept = point()
        idx.upsert([kept])
        idx.close()
        with pytest.raises(ConfigurationError):
            idx.count()
        with pytest.raises(ConfigurationError):
            idx.ensure(dim=DIM * 2)
        idx.ensure(dim=DIM)
        assert found(idx, where()) == {kept.id}

    def test_a_payload_for_an_unknown_point_is_refused_like_the_engine_refuses_it(
        self, tmp_path: Path
    ) -> None:
        for idx in (MemoryIndex(), EdgeIndex(tmp_path / "index")):
            idx.ensure(dim=DIM)
            try:
                with pytest.raises(ValidationError):
                    idx.set_payload([new_id()], {"status": "archived"})
            finally:
                idx.close()


class TestOpenIndex:
    def test_the_backend_setting_picks_the_index(self, settings: Settings) -> None:
        cases = {"edge": EdgeIndex, "qdrant-local": QdrantIndex}
        for backend, cls in cases.items():
            idx = open_index(settings.model_copy(update={"index_backend": backend}))
            try:
                assert isinstance(idx, cls)
                idx.ensure(dim=DIM)
                assert idx.count() == 0
            finally:
                idx.close()
        assert (settings.data_dir / "index" / "edge_config.json").exists()
        assert (settings.data_dir / "qdrant").is_dir()

    def test_a_server_backend_without_a_url_is_a_configuration_error(
        self, settings: Settings
    ) -> None:
        with pytest.raises(ConfigurationError):
            vectors_pkg.open_index(settings.model_copy(update={"index_backend": "qdrant"}))


# -- the filter semantics, checked against a direct reading of the rules ----------------


def reference_visible(payload: dict[str, Any], flt: IndexFilter) -> bool:
    """IndexFilter's rules written plainly over the point's payload: an oracle independent
    of the engine translation and of the production ``Scope.sees``."""
    searcher = flt.scope
    if payload["tenant"] != searcher.tenant:
        return False
    # Each narrower level of the point is unset (broader, visible) or the searcher's own.
    for level in ("agent", "user", "project", "session"):
        if payload[level] not in ("", getattr(searcher, level)):
            return False
    if payload["hidden"]:
        return False
    if flt.types is not None and payload["type"] not in flt.types:
        return False
    if flt.as_of is None:
        exp = payload["expires_at"]
        return payload["status"] in flt.statuses and (exp is None or exp > flt.now.timestamp())
    at = flt.as_of.timestamp()
    valid_to = payload["valid_to"]
    return bool(payload["valid_from"] <= at and (valid_to is None or valid_to > at))


class TestAgreesWithTheReferenceRules:
    def test_random_points_and_filters_select_exactly_what_the_rules_say(
        self, index: VectorIndex
    ) -> None:
        rng = random.Random(7)
        pick = rng.choice
        points = []
        for i in range(150):
            start = T - rng.randint(0, 20) * DAY
            points.append(
                point(
                    vector=axis(i, rng.random()),
                    tenant=pick(["t1", "t2"]),
                    agent=pick(["", "a1", "a2"]),
                    user=pick(["", "u1", "u2"]),
                    project=pick(["", "", "p1"]),
                    session=pick(["", "", "s1"]),
                    type=pick(["fact", "preference", "task"]),
                    status=pick(["active", "pending_confirmation", "superseded", "archived"]),
                    hidden=rng.random() < 0.1,
                    valid_from=start,
                    valid_to=pick([None, start + rng.randint(1, 10) * DAY]),
                    expires_at=pick([None, T + rng.randint(-5, 5) * DAY]),
                )
            )
        index.upsert(points)
        for _ in range(40):
            scope = Scope(
                tenant=pick(["t1", "t2"]),
                agent=pick(["", "a1"]),
                user=pick(["", "u1", "u2"]),
                project=pick(["", "p1"]),
                session=pick(["", "s1"]),
            )
            flt = IndexFilter(
                scope=scope,
                now=NOW,
                types=pick([None, ("fact",), ("preference", "task")]),
                as_of=pick([None, None, NOW - timedelta(days=rng.randint(0, 15))]),
            )
            expected = {p.id for p in points if reference_visible(p.payload, flt)}
            dense: list[Hit] = index.search_dense(axis(0), where=flt, limit=500)
            assert {h.id for h in dense} == expected, flt
