"""Migrations: a database made by the release before migrations is adopted and upgraded
with its data intact, a fresh one is built by the revisions alone, and the models never
drift from the revisions (autogenerate finds nothing to do), on SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel, col, select
from support import all_at_once, scratch_pg_database

from sleepmem.adapters.migrate import alembic_config, current_revision, head_revision, upgrade
from sleepmem.adapters.sql import make_engine, plain_engine
from sleepmem.core.errors import ConfigurationError
from sleepmem.models import Audit, AuditMemory, Job, Memory, RawEvent

LEGACY = Path(__file__).parent.parent / "fixtures" / "schema_252873e"
AT = "2026-05-01 10:00:00+00:00"


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with nothing in it: a new SQLite file, or a new PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
    else:
        with scratch_pg_database("sleepmem_migrate") as url:
            yield url


def create_legacy_schema(url: str) -> None:
    """What release 252873e's create_all (and its trigger) left in a database."""
    dialect = "sqlite" if url.startswith("sqlite") else "postgresql"
    ddl = (LEGACY / f"{dialect}.sql").read_text(encoding="utf-8")
    if dialect == "sqlite":
        with sqlite3.connect(sa.make_url(url).database or "") as conn:
            conn.executescript(ddl)
        return
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(ddl)
    finally:
        engine.dispose()


def fill_like_the_old_release(url: str) -> None:
    """Rows as that release wrote them: plain SQL, nothing from today's models."""
    engine = sa.create_engine(url)
    rows = {
        "raw_event": dict(
            tenant="acme", agent="bot", user="ann", project="", session="s1", event_id="e-1",
            scope_key="t=acme/a=bot/u=ann/p=/s=s1", kind="message", role="user",
            content="I live in Lisbon.", at=AT, meta="{}", stream_id="1-0", received_at=AT,
            consolidated=True, consolidated_at=AT,
        ),
        "memory": dict(
            tenant="acme", agent="bot", user="ann", project="", session="", id="m-1",
            lineage="m-1", scope_key="t=acme/a=bot/u=ann/p=/s=", type="identity",
            subject="user", attribute="home_city", statement="Ann lives in Lisbon.",
            source="user", trust="high", confidence=0.9, importance=0.8, valid_from=AT,
            recorded_at=AT, version=1, mention_count=1, access_count=0, last_access=AT,
            provenance='["e-1"]', status="active", demoted=False, needs_verification=False,
            reminded=False, details="{}", pipeline_version="1", extractor="rules",
            index_state="indexed",
        ),
        "job": dict(
            id="j-1", kind="reconsolidate", tenant="acme", scope_key="t=acme/a=bot/u=ann/p=/s=",
            status="done", params="{}", done=3, total=3, rate=1.5, result='{"counts": {}}',
            error="", created_at=AT,
        ),
        "audit": dict(
            at=AT, op="ADD", tenant="acme", scope_key="t=acme/a=bot/u=ann/p=/s=",
            memory_ids_before="[]", memory_ids_after='["m-1"]', reason="stated",
            task_id="t-1", worker="w", pipeline_version="1", extractor="rules", model="",
            input_event_ids='["e-1"]', content_hash="h", llm_calls=0, llm_tokens=0,
        ),
    }
    try:
        with engine.begin() as conn:
            for table, values in rows.items():
                names = ", ".join(f'"{k}"' for k in values)
                marks = ", ".join(f":{k}" for k in values)
                conn.execute(sa.text(f"INSERT INTO {table} ({names}) VALUES ({marks})"), values)
    finally:
        engine.dispose()


def drift(engine: Engine) -> list[object]:
    with engine.connect() as conn:
        return list(compare_metadata(MigrationContext.configure(conn), SQLModel.metadata))


class TestADatabaseFromTheReleaseBeforeMigrations:
    def test_is_adopted_upgraded_and_keeps_its_rows(self, empty_url: str) -> None:
        create_legacy_schema(empty_url)
        fill_like_the_old_release(empty_url)

        engine = make_engine(empty_url)  # what every process does at start
        try:
            with engine.connect() as conn:
                assert current_revision(conn) == head_revision()
            with Session(engine) as s:
                event = s.get(RawEvent, ("acme", "e-1"))
                memory = s.get(Memory, "m-1")
                job = s.get(Job, "j-1")
                assert event is not None and event.content == "I live in Lisbon."
                assert event.at == datetime(2026, 5, 1, 10, tzinfo=UTC)
                assert memory is not None and memory.statement == "Ann lives in Lisbon."
                assert memory.provenance == ["e-1"]
                assert job is not None and job.result == {"counts": {}} and job.done == 3
                (old,) = s.exec(select(Audit)).all()
                # The link the old trigger made survives, and the trigger still links.
                assert {(a.memory_id, a.audit_id) for a in s.exec(select(AuditMemory))} == {
                    ("m-1", old.id)
                }
                s.add(Audit(op="UPDATE", memory_ids_before=["m-1"], memory_ids_after=["m-2"]))
                s.commit()
                linked = s.exec(select(AuditMemory.memory_id).where(
                    col(AuditMemory.audit_id) != old.id)).all()
                assert sorted(linked) == ["m-1", "m-2"]
            assert drift(engine) == []
        finally:
            engine.dispose()


class TestTheRevisionsAlone:
    def test_build_a_fresh_database_that_matches_the_models(self, empty_url: str) -> None:
        engine = plain_engine(empty_url)
        try:
            assert upgrade(engine) == (None, head_revision())
            assert drift(engine) == []
            assert upgrade(engine) == (head_revision(), head_revision())  # nothing to do
        finally:
            engine.dispose()

    def test_downgrade_to_nothing_and_back(self, empty_url: str) -> None:
        engine = plain_engine(empty_url)
        try:
            upgrade(engine)
            with engine.begin() as conn:
                command.downgrade(alembic_config(conn), "base")
            with engine.connect() as conn:
                assert not sa.inspect(conn).has_table("memory")
            upgrade(engine)
            assert drift(engine) == []
        finally:
            engine.dispose()


class TestStartingWithoutMigrating:
    def test_refuses_an_old_schema_and_says_to_run_migrate(self, tmp_path: Path) -> None:
        url = f"sqlite:///{tmp_path / 'old.db'}"
        create_legacy_schema(url)
        with pytest.raises(ConfigurationError, match="sleepmem migrate"):
            make_engine(url, migrate=False)

    def test_accepts_a_migrated_one(self, tmp_path: Path) -> None:
        url = f"sqlite:///{tmp_path / 'new.db'}"
        make_engine(url).dispose()
        make_engine(url, migrate=False).dispose()


def assert_four_starters_all_start(url: str) -> None:
    engines, errors = all_at_once(4, lambda: make_engine(url))
    try:
        assert errors == []
        assert len(engines) == 4
        with engines[0].connect() as conn:
            assert current_revision(conn) == head_revision()
    finally:
        for engine in engines:
            engine.dispose()


class TestConcurrentStarters:
    def test_on_a_sqlite_file_queue_on_the_lock_file_and_all_start(self, tmp_path: Path) -> None:
        # Each child of a prefork worker migrates at start; without the lock two of them
        # both found no schema and one failed on "table audit already exists".
        assert_four_starters_all_start(f"sqlite:///{tmp_path / 'sleepmem.db'}")

    def test_on_postgresql_queue_on_the_lock_and_all_start(self) -> None:
        with scratch_pg_database("sleepmem_migrate") as url:
            assert_four_starters_all_start(url)
