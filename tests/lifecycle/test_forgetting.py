"""The forgetting sweep: decay, expiry, capacity, retention; idempotent and resumable."""

from __future__ import annotations

from typing import Any

import pytest
from lifecycle_support import (
    DAY,
    T0,
    Clock,
    audit_ops,
    make_ports,
    memory,
    row,
    store,
)
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from sleepmem.adapters.vectors.edge import EdgeIndex
from sleepmem.core.settings import Settings
from sleepmem.models import Audit, Memory, RawEvent, Scope
from sleepmem.pipelines.lifecycle.forget import sweep
from sleepmem.pipelines.ports import Ports
from sleepmem.pipelines.write.index import reconcile


def lifecycle_settings(**kw: Any) -> Settings:
    return Settings(_env_file=None, embedder="hashing", **kw)


class TestDecay:
    def test_a_recently_used_memory_is_left_alone(
        self, engine: Engine, ports: Ports, clock: Clock
    ) -> None:
        (m,) = store(engine, ports, memory("I like green tea"))
        clock.advance(10 * DAY)
        report = sweep(engine=engine, ports=ports, settings=lifecycle_settings())
        assert report.counts()["demoted"] == 0 and report.scanned == 1
        got = row(engine, m.id)
        assert got is not None and got.status == "active" and not got.demoted

    def test_survival_under_demote_below_demotes_once(
        self, engine: Engine, ports: Ports, clock: Clock
    ) -> None:
        # 0.5 ** (100 / 90) * 0.5 = 0.23 < demote_below 0.25, > archive_below 0.05
        (m,) = store(engine, ports, memory("I like green tea", importance=0.5))
        clock.advance(100 * DAY)
        first = sweep(engine=engine, ports=ports, settings=lifecycle_settings())
        second = sweep(engine=engine, ports=ports, settings=lifecycle_settings())
        got = row(engine, m.id)
        assert got is not None and got.demoted and got.status == "active"
        assert (first.demoted, second.demoted) == (1, 0)
        assert audit_ops(engine).count(("DEMOTE", m.id)) == 1

    def test_the_same_age_keeps_an_important_memory_undemoted(
        self, engine: Engine, ports: Ports, clock: Clock
    ) -> None:
        # 0.5 ** (100 / 90) * 0.9 = 0.42: importance is half of survival
        (m,) = store(engine, ports, memory("I like green tea", importance=0.9))
        clock.advance(100 * DAY)
        sweep(engine=engine, ports=ports, settings=lifecycle_settings())
        got = row(engine, m.id)
        assert got is not None and not got.demoted

    def test_survival_under_archive_below_archives_out_of_search(
        self, engine: Engine, ports: Ports, clock: Clock
    ) -> None:
        # a task fact (half-life 7 d) unused for 40 d: 0.5 ** (40/7) * 0.5 = 0.009
        (m,) = store(engine, ports, memory("Order 1234 ships Friday", type="task"))
        clock.advance(40 * DAY)
        report = sweep(engine=engine, ports=ports, settings=lifecycle_settings())
        got = row(engine, m.id)
        assert report.archived == 1
        assert got is not None and got.status == "archived" and got.archived_at is not None
        assert got.index_state == "indexed"
        assert ports.index.payloads([m.id])[m.id]["status"] == "archived"

    def test_identity_procedures_and_rules_written_by_people_are_never_touched(
        self, engine: Engine, ports: Ports, clock: Clock
    ) -> None:
        old = T0 - 2000 * DAY
        kept = store(
            engine, ports,
            memory("I am allergic to peanuts", type="identity", importance=0.1, last_access=old,
                   expires_at=old),
            memory("When deploying: run the migrations first", type="procedure",
                   importance=0.1, last_access=old, expires_at=old),
            memory("Always answer in French", importance=0.1, last_access=old, expires_at=old,
                   details={"authored": True}),
        )
        clock.advance(400 * DAY)
        report = sweep(engine=engine, ports=ports,
                       settings=lifecycle_settings(scope_capacity=0))
        assert report.counts() | {"batches": 0} == {k: 0 for k in report.counts()}
        for m in kept:
            got = row(engine, m.id)
            assert got is not None and got.status == "active" and not got.demoted
        assert audit_ops(engine) == []


class TestExpiry:
    def test_a_memory_past_expires_at_becomes_expired(
        self, engine: Engine, ports: Ports, clock: Clock
    ) -> None:
        (m,) = store(engine, ports, memory("Order 88231 is on its way", type="task",
                                           importance=0.9, expires_at=T0 + 7 * DAY))
        clock.advance(6 * DAY)
        assert sweep(engine=engine, ports=ports, settings=lifecycle_settings()).expired == 0
        clock.advance(2 * DAY)
        report = sweep(engine=engine, ports=ports, settings=lifecycle_settings())
        got = row(engine, m.id)
        assert report.expired == 1 and got is not None and got.status == "expired"
        assert ports.index.payloads([m.id])[m.id]["status"] == "expired"
        assert ("EXPIRE", m.id) in audit_ops(engine)

    def test_gone_past_the_retention_window_is_deleted_with_its_point_but_not_its_events(
        self, engine: Engine, ports: Ports, clock: Clock
    ) -> None:
        (m,) = store(engine, ports, memory("Order 88231 is on its way", type="task",
                                           expires_at=T0 + DAY))
        with Session(engine) as s:
            s.add(RawEvent(event_id=m.provenance[0], tenant="acme", agent="bot", user="ann",
                           scope_key=m.scope_key, kind="message", role="user",
                           content="Order 88231 is on its way", at=T0))
            s.commit()
        settings = lifecycle_settings(delete_after_s=30 * 86400.0)
        clock.advance(2 * DAY)
        sweep(engine=engine, ports=ports, settings=settings)
        clock.advance(29 * DAY)
        assert sweep(engine=engine, ports=ports, settings=settings).deleted == 0
        clock.advance(2 * DAY)
        report = sweep(engine=engine, ports=ports, settings=settings)
        assert report.deleted == 1 and row(engine, m.id) is None
        assert ports.index.payloads([m.id]) == {}
        with Session(engine) as s:
            deletion = s.exec(select(Audit).where(col(Audit.op) == "DELETE")).one()
            assert s.get(RawEvent, (m.tenant, m.provenance[0])) is not None  # the replay log stays
        assert deletion.memory_ids_before == [m.id] and len(deletion.content_hash) == 64
        assert "88231" not in deletion.model_dump_json()


class TestCapacity:
    def test_a_scope_over_capacity_archives_its_lowest_survivors_first(
        self, engine: Engine, ports: Ports, clock: Clock
    ) -> None:
        mems = store(engine, ports, *[
            memory(f"fact number {i}", type="fact", importance=0.3 + 0.1 * i) for i in range(5)
        ])
        other = Scope(tenant="acme", agent="bot", user="bob")
        store(engine, ports, *[memory(f"bob fact {i}", scope=other) for i in range(3)])
        clock.advance(DAY)
        report = sweep(engine=engine, ports=ports, settings=lifecycle_settings(scope_capacity=3))
        statuses = [row(engine, m.id).status for m in mems]  # type: ignore[union-attr]
        assert report.evicted == 2
        assert statuses == ["archived", "archived", "active", "active", "active"]
        assert {op for op, _ in audit_ops(engine)} == {"EVICT"}


def _dataset() -> list[Memory]:
    """Many memories of every fate: fresh, fading, expiring, long gone."""
    out = []
    for i in range(60):
        kind = ("preference", "task", "event", "fact", "identity")[i % 5]
        out.append(memory(
            f"memory {i} of kind {kind}", type=kind, importance=0.2 + (i % 7) / 10,
            scope=Scope(tenant="acme", agent="bot", user=f"u{i % 3}"),
            last_access=T0 - (i * 3) * DAY,
            expires_at=T0 + ((i % 11) - 5) * 10 * DAY if kind != "identity" else None,
        ))
    return out


def _snapshot(engine: Engine, ports: Ports) -> tuple[object, ...]:
    with Session(engine) as s:
        rows = sorted((m.id, m.status, m.demoted, m.archived_at, m.index_state)
                      for m in s.exec(select(Memory)))
    ids = [r[0] for r in rows]
    payloads = {k: v["status"] for k, v in ports.index.payloads(ids).items()}
    return rows, payloads, audit_ops(engine)


def _wipe(engine: Engine) -> None:
    with Session(engine) as s:
        for model in (Memory, Audit):
            for r in s.exec(select(model)):
                s.delete(r)
        s.commit()


class TestResumable:
    def test_a_sweep_killed_halfway_then_run_again_ends_as_one_uninterrupted_run(
        self, engine: Engine, index: EdgeIndex, clock: Clock
    ) -> None:
        settings = lifecycle_settings(scope_capacity=12, delete_after_s=5 * 86400.0)

        class Killed(Exception):
            pass

        def kill_after_two(name: str, n: int) -> None:
            if name == "decay" and n == 2:
                raise Killed()

        results = []
        for attempt in ("killed", "whole"):
            ports = make_ports(index, clock)
            clock.now = T0
            store(engine, ports, *_dataset())
            clock.now = T0 + 3 * DAY
            if attempt == "killed":
                with pytest.raises(Killed):
                    sweep(engine=engine, ports=ports, settings=settings, batch=7,
                          after_batch=kill_after_two)
                half = _snapshot(engine, ports)
            sweep(engine=engine, ports=ports, settings=settings, batch=7)
            # A crash can leave the last batch's rows index_state=pending: the reconciler,
            # which runs on schedule, finishes them; here it must find nothing else to do.
            reconcile(engine=engine, index=ports.index, embedder=ports.embedder)
            results.append(_snapshot(engine, ports))
            _wipe(engine)
        assert half != results[0]  # the kill did land halfway
        assert results[0] == results[1]

    def test_a_second_sweep_at_the_same_time_changes_nothing(
        self, engine: Engine, ports: Ports, clock: Clock
    ) -> None:
        store(engine, ports, *_dataset())
        clock.advance(3 * DAY)
        settings = lifecycle_settings(scope_capacity=12, delete_after_s=5 * 86400.0)
        first = sweep(engine=engine, ports=ports, settings=settings, batch=7)
        before = _snapshot(engine, ports)
        second = sweep(engine=engine, ports=ports, settings=settings, batch=7)
        assert sum(first.counts()[k] for k in ("expired", "demoted", "archived", "evicted")) > 5
        assert {k: v for k, v in second.counts().items() if k not in ("scanned", "batches")} == {
            "expired": 0, "demoted": 0, "archived": 0, "evicted": 0, "deleted": 0,
            "index_deferred": 0,
        }
        assert _snapshot(engine, ports) == before


class TestIndexFailures:
    def test_a_row_whose_point_is_missing_is_left_pending_for_the_reconciler(
        self, engine: Engine, ports: Ports, clock: Clock
    ) -> None:
        a, b = store(engine, ports, memory("Order 1 ships", type="task"),
                     memory("Order 2 ships", type="task"))
        ports.index.delete([a.id])
        clock.advance(40 * DAY)
        report = sweep(engine=engine, ports=ports, settings=lifecycle_settings())
        assert report.index_deferred == 1
        assert row(engine, a.id).index_state == "pending"  # type: ignore[union-attr]
        assert row(engine, b.id).index_state == "indexed"  # type: ignore[union-attr]
        # The reconciler then writes the swept state into the index.
        reconcile(engine=engine, index=ports.index, embedder=ports.embedder)
        swept = row(engine, a.id)
        assert swept is not None and swept.index_state == "indexed"
        assert ports.index.payloads([a.id])[a.id]["status"] == swept.status
