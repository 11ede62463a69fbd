"""Schema migrations: bring a database to the newest revision, or say why not.

Every process that opens the database may call :func:`upgrade` (the embedded runtime does,
at start, and so does each child of a prefork worker): on PostgreSQL the work runs under an
advisory transaction lock, on a SQLite file under an exclusive lock on a file beside it, so
concurrent starters queue instead of racing DDL, and the second finds nothing to do. A database made
by a release before migrations existed (tables, no ``alembic_version``) is adopted: stamped
at the baseline revision whose schema it has, and upgraded from there. An empty database is
created from the models and stamped at head: replaying the revisions costs 0.07-0.25 s on
SQLite (alembic loads every revision file, batch mode copies tables), paid at every first
start and by every test database; tests/runtime/test_migrations.py proves both ways build
the same schema.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from importlib import resources as importlib_resources
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection, Engine
from sqlmodel import SQLModel

import sleepmem.models  # noqa: F401  (registers the tables on SQLModel.metadata)
from sleepmem.core.errors import ConfigurationError
from sleepmem.core.logs import get_logger

log = get_logger("sleepmem.migrate")

# The revision whose schema releases before migrations created with create_all.
BASELINE = "0001"
# Any table that release had: its presence without alembic_version means "adopt".
_LEGACY_MARKER = "raw_event"
SCHEMA_LOCK = 0x51EE93E3


@cache
def _script_location() -> str:
    return str(importlib_resources.files("sleepmem.adapters") / "migrations")


def alembic_config(connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", _script_location())
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


@cache
def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config())


@cache
def head_revision() -> str:
    heads = _scripts().get_heads()
    if len(heads) != 1:
        raise ConfigurationError(
            f"the migrations have {len(heads)} heads {heads}: merge them "
            "(alembic merge heads) before starting"
        )
    return str(heads[0])


def current_revision(conn: Connection) -> str | None:
    return MigrationContext.configure(conn).get_current_revision()


def upgrade(
    engine: Engine, *, revision: str = "head", from_models: bool = True
) -> tuple[str | None, str]:
    """Upgrade to ``revision``; returns (revision before, revision after). An empty database
    bound for head is created from the models unless ``from_models`` is false."""
    created = False
    with _sqlite_file_lock(engine), engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK})
        before = current_revision(conn)
        target = head_revision() if revision == "head" else revision
        if before != target:
            if from_models and target == head_revision() and _is_empty(conn):
                _create_from_models(conn)
                created = True
            else:
                if before is None and sa.inspect(conn).has_table(_LEGACY_MARKER):
                    command.stamp(alembic_config(conn), BASELINE)
                    log.info("migrate_adopted", baseline=BASELINE)
                    before = BASELINE
                command.upgrade(alembic_config(conn), revision)
        after = current_revision(conn)
        if after is not None:
            # Autogenerate cannot see a trigger, so a lost one would go unnoticed: a
            # database without it (older than it, or restored without it) gets it back.
            _ensure_audit_links(conn)
    if before != after:
        log.info("migrate", before=before, after=after, dialect=engine.dialect.name,
                 from_models=created)
    return before, str(after)


def _is_empty(conn: Connection) -> bool:
    # No table at all: anything else (a legacy schema, a half-made one) takes the revisions.
    return not sa.inspect(conn).get_table_names()


def _create_from_models(conn: Connection) -> None:
    """What the revisions build, in one step: the models' tables, then what the revisions
    add beyond the models (0001's audit-link trigger), then the stamp."""
    from sleepmem.adapters.migrations import audit_links

    # No checkfirst: the database was just found empty, and the lock keeps it so.
    SQLModel.metadata.create_all(conn, checkfirst=False)
    audit_links.install(conn, backfill=False)
    # Not command.stamp: that loads env.py and every revision file again, on each call.
    MigrationContext.configure(conn).stamp(_scripts(), "head")


@contextmanager
def _sqlite_file_lock(engine: Engine) -> Iterator[None]:
    """Hold an exclusive lock on ``<database>.migrate-lock`` while migrating a SQLite file.

    SQLite's driver runs DDL outside any transaction, so two starters would both find no
    schema and both create it ("table audit already exists"); a lock file serialises them
    across processes without touching the database's own locking.
    """
    database = engine.url.database if engine.dialect.name == "sqlite" else None
    if not database or database == ":memory:" or database.startswith("file:"):
        yield
        return
    with Path(f"{database}.migrate-lock").open("a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def check_current(engine: Engine) -> None:
    """Refuse to run on a schema other than this code's: the operator runs ``migrate``."""
    with engine.connect() as conn:
        found = current_revision(conn)
    if found != head_revision():
        raise ConfigurationError(
            f"the database schema is at revision {found or 'none'}, this release needs "
            f"{head_revision()}: run `sleepmem migrate` first (or set SLEEPMEM_AUTO_MIGRATE=true)"
        )


def _ensure_audit_links(conn: Connection) -> None:
    """The audit-link trigger, installed with a backfill when missing (only then: creating
    a trigger locks ``audit`` against the writers of processes already running)."""
    from sleepmem.adapters.migrations import audit_links

    if not audit_links.installed(conn):
        audit_links.install(conn, backfill=True)
