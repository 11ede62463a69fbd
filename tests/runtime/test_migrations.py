"""Migrations: a database made by the release before migrations is adopted and upgraded
with its data intact, a fresh one is built by the revisions alone, and the models never
drift from the revisions (autogenerate finds nothing to do), on SQLite and PostgreSQL. An
empty database is created from the models instead, with exactly the schema the revisions
build."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from unittest import mock

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


@contextmanager
def an_empty_database(dialect: str, path: Path) -> Iterator[str]:
    """A database with nothing in it: a new SQLite file at ``path``, or a new PostgreSQL
    database."""
    if dialect == "sqlite":
        yield f"sqlite:///{path}"
    else:
        with scratch_pg_database("sleepmem_migrate") as url:
            yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with an_empty_database(request.param, tmp_path / "fresh.db") as url:
        yield url


@pytest.fixture
def other_empty_url(empty_url: str, tmp_path: Path) -> Iterator[str]:
    """A second empty database, of the same kind as ``empty_url``."""
    dialect = sa.make_url(empty_url).get_backend_name()
    with an_empty_database(dialect, tmp_path / "other.db") as url:
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
            assert upgrade(engine, from_models=False) == (None, head_revision())
            assert drift(engine) == []
            assert upgrade(engine) == (head_revision(), head_revision())  # nothing to do
        finally:
            engine.dispose()

    def test_downgrade_to_nothing_and_back(self, empty_url: str) -> None:
        engine = plain_engine(empty_url)
        try:
            upgrade(engine, from_models=False)
            with engine.begin() as conn:
                command.downgrade(alembic_config(conn), "base")
            with engine.connect() as conn:
                assert not sa.inspect(conn).has_table("memory")
            upgrade(engine)
            assert drift(engine) == []
        finally:
            engine.dispose()


def built_from_the_models(url: str) -> Engine:
    """``make_engine`` on an empty database, failing if it replays a single revision."""
    replay = mock.patch.object(
        command, "upgrade", side_effect=AssertionError("replayed the revisions")
    )
    with replay:
        return make_engine(url)


def schema_of(engine: Engine) -> list[str]:
    """All the inspector and the catalogue tell of a database's schema, one fact a line,
    so that a difference reads as the lines that differ.

    The only normalisation: tables, views, and a table's indexes and constraints are
    sorted by name, as they are unordered (PostgreSQL lists tables in no set order, SQLite
    indexes in creation order, which differs between a table created whole and one rebuilt
    by batch mode). Columns keep their order: it is physical (``SELECT *``, a dump's
    ``COPY``), and a column a revision added comes last.
    """
    with engine.connect() as conn:
        inspector = sa.inspect(conn)
        views = sorted(inspector.get_view_names())
        facts = [f"revision {current_revision(conn)}", f"views {views}"]
        for table in sorted(inspector.get_table_names()):
            facts += [f"{table}: {fact}" for fact in table_facts(inspector, table)]
        if conn.dialect.name == "sqlite":
            facts += sqlite_catalogue(conn)
        else:
            facts += pg_catalogue(conn)
    return facts


def table_facts(inspector: sa.Inspector, table: str) -> Iterator[str]:
    for position, column in enumerate(inspector.get_columns(table)):
        # repr, not str: str(TIMESTAMP(timezone=True)) is "TIMESTAMP", hiding the zone.
        yield f"column {position} {({**column, 'type': repr(column['type'])})}"
    yield f"primary key {inspector.get_pk_constraint(table)}"
    for kind, found in (
        ("foreign key", inspector.get_foreign_keys(table)),
        ("index", inspector.get_indexes(table)),
        ("unique constraint", inspector.get_unique_constraints(table)),
        ("check constraint", inspector.get_check_constraints(table)),
    ):
        for item in sorted(found, key=lambda item: str(item["name"])):
            yield f"{kind} {item}"
    yield f"options {inspector.get_table_options(table)}"


def sqlite_catalogue(conn: sa.Connection) -> list[str]:
    """What SQLite's inspector does not report: triggers, and AUTOINCREMENT (audit ids
    must never be reused, see AuditMemory)."""
    return rows(
        conn,
        "SELECT 'trigger', name, tbl_name, sql FROM sqlite_master WHERE type = 'trigger'",
        "SELECT 'autoincrement', name FROM sqlite_master "
        "WHERE type = 'table' AND sql LIKE '%AUTOINCREMENT%'",
    )


def pg_catalogue(conn: sa.Connection) -> list[str]:
    """Triggers with their functions, every function of the schema (one outlives a dropped
    trigger), and the sequences behind the serial columns."""
    return rows(
        conn,
        """SELECT 'trigger', c.relname, t.tgname, pg_get_triggerdef(t.oid),
                  pg_get_functiondef(t.tgfoid)
             FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
            WHERE NOT t.tgisinternal AND pg_table_is_visible(c.oid)""",
        """SELECT 'function', p.proname, pg_get_functiondef(p.oid)
             FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = current_schema()""",
        """SELECT 'sequence', sequencename, data_type::text, start_value, increment_by,
                  max_value, cycle
             FROM pg_sequences WHERE schemaname = current_schema()""",
    )


def rows(conn: sa.Connection, *queries: str) -> list[str]:
    return sorted(str(tuple(row)) for query in queries for row in conn.execute(sa.text(query)))


class TestAnEmptyDatabaseBuiltFromTheModels:
    def test_has_exactly_the_schema_the_revisions_build(
        self, empty_url: str, other_empty_url: str
    ) -> None:
        from_models = built_from_the_models(empty_url)
        replayed = plain_engine(other_empty_url)
        try:
            assert upgrade(replayed, from_models=False) == (None, head_revision())
            expected = schema_of(replayed)
            assert f"revision {head_revision()}" in expected
            assert any("audit_memory_links" in fact for fact in expected)
            assert schema_of(from_models) == expected
        finally:
            from_models.dispose()
            replayed.dispose()

    def test_is_downgraded_by_the_revisions_to_nothing_and_back(self, empty_url: str) -> None:
        engine = built_from_the_models(empty_url)
        try:
            with engine.begin() as conn:
                command.downgrade(alembic_config(conn), "base")
            with engine.connect() as conn:
                assert sa.inspect(conn).get_table_names() == ["alembic_version"]
            # No longer empty (alembic_version stays): the revisions build it this time.
            assert upgrade(engine) == (None, head_revision())
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
