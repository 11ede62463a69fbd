"""The audit-to-memory links that ``explain`` reads: every writer's rows are linked."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select
from support import all_at_once, scratch_pg_database

from sleepmem.adapters.sql import make_engine
from sleepmem.models import Audit, AuditMemory
from sleepmem.pipelines.lifecycle.explain import audits_naming


def links(engine: Engine, audit_id: int | None = None) -> set[tuple[str, int]]:
    with Session(engine) as s:
        stmt = select(AuditMemory)
        if audit_id is not None:
            stmt = stmt.where(col(AuditMemory.audit_id) == audit_id)
        return {(row.memory_id, row.audit_id) for row in s.exec(stmt)}


def audit_ids(engine: Engine) -> list[int]:
    with Session(engine) as s:
        return [a.id for a in s.exec(select(Audit).order_by(col(Audit.id))) if a.id is not None]


def drop_link_trigger(engine: Engine) -> None:
    """Make the database look like one from before the trigger existed."""
    with engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            conn.execute(sa.text("DROP TRIGGER audit_memory_links"))
        else:
            conn.execute(sa.text("DROP TRIGGER audit_memory_links ON audit"))
        conn.execute(sa.delete(AuditMemory))


def url_of(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=False)


class TestEveryWriterIsLinked:
    def test_a_row_added_through_the_orm_links_its_before_and_after_ids(
        self, engine: Engine
    ) -> None:
        with Session(engine) as s:
            row = Audit(op="UPDATE", memory_ids_before=["m-old"], memory_ids_after=["m-new"])
            s.add(row)
            s.commit()
            assert row.id is not None
            assert links(engine, row.id) == {("m-old", row.id), ("m-new", row.id)}

    def test_bulk_core_inserts_are_linked_row_by_row(self, engine: Engine) -> None:
        rows = [
            {"op": "DEMOTE", "memory_ids_before": ["a", "b"], "memory_ids_after": ["a", "b"]},
            {"op": "ERASE", "memory_ids_before": ["c"], "memory_ids_after": []},
            {"op": "ERROR", "memory_ids_before": [], "memory_ids_after": []},
        ]
        with engine.begin() as conn:
            conn.execute(sa.insert(Audit), rows)
        first, second, third = audit_ids(engine)[-3:]
        assert links(engine, first) == {("a", first), ("b", first)}  # named twice, linked once
        assert links(engine, second) == {("c", second)}
        assert links(engine, third) == set()


class TestADatabaseFromBeforeTheLinks:
    def test_is_backfilled_and_linked_from_then_on(self, engine: Engine) -> None:
        drop_link_trigger(engine)
        try:
            with Session(engine) as s:
                old = Audit(op="ADD", memory_ids_after=["m-1"])
                s.add(old)
                s.commit()
                old_id = old.id
            assert old_id is not None
            assert links(engine, old_id) == set()
        finally:
            reopened = make_engine(url_of(engine))
        try:
            assert links(reopened, old_id) == {("m-1", old_id)}
            with Session(reopened) as s:
                new = Audit(op="ADD", memory_ids_after=["m-2"])
                s.add(new)
                s.commit()
                assert new.id is not None
                assert links(reopened, new.id) == {("m-2", new.id)}
        finally:
            reopened.dispose()


class TestProcessesStartingTogether:
    def test_create_the_schema_on_postgresql_once_without_failing(self) -> None:
        with scratch_pg_database("sleepmem_schema") as url:
            engines, errors = all_at_once(4, lambda: make_engine(url))
            try:
                assert errors == []
                assert len(engines) == 4
                with engines[0].connect() as conn:
                    triggers = conn.execute(
                        sa.text(
                            "SELECT count(*) FROM pg_trigger WHERE tgname = 'audit_memory_links'"
                        )
                    ).scalar_one()
                assert triggers == 1
            finally:
                for e in engines:
                    e.dispose()


class TestPurgingAuditRows:
    def test_leaves_nothing_that_explain_would_show(self, engine: Engine) -> None:
        with Session(engine) as s:
            purged = Audit(op="ADD", memory_ids_after=["m-purged"])
            s.add(purged)
            s.commit()
            s.delete(purged)
            s.commit()
            later = Audit(op="ADD", memory_ids_after=["m-later"])
            s.add(later)
            s.commit()
            assert later.id != purged.id  # ids are never reused, so no link can mislead
            assert audits_naming(s, ["m-purged"]) == []
            assert [a.id for a in audits_naming(s, ["m-later"])] == [later.id]
