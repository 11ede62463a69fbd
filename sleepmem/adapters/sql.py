"""SQL engine per process: schema set-up and the translation of driver failures.

Tables are created on first use (migrations would go via alembic).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine, ExceptionContext, make_url
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlmodel import SQLModel, create_engine

import sleepmem.models  # noqa: F401  (registers the tables on SQLModel.metadata)
from sleepmem.core.errors import ConfigurationError, TransientError


def make_engine(url: str, *, echo: bool = False) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(
            url, echo=echo, connect_args={"check_same_thread": False, "timeout": 30}
        )
        event.listen(engine, "connect", _sqlite_pragmas)
    else:
        engine = create_engine(url, echo=echo, pool_pre_ping=True, pool_size=10, max_overflow=10)
    try:
        _prepare_schema(engine)
    except OperationalError as exc:
        engine.dispose()
        raise _unusable(url, exc) from None
    # Only now: a missing database at start-up is a configuration error, not a blip.
    event.listen(engine, "handle_error", _transient_driver_errors)
    return engine


# SQLite's OperationalError also means "no such table"; only these are worth a retry.
_SQLITE_TRANSIENT = ("database is locked", "database table is locked", "disk i/o error")


def _transient_driver_errors(ctx: ExceptionContext) -> None:
    """Turn a lost or refused database connection into TransientError, so every task,
    the API (503) and the CLI treat a database blip as retryable instead of as a bug."""
    exc = ctx.sqlalchemy_exception
    if ctx.is_disconnect or isinstance(exc, InterfaceError):
        transient = True
    elif isinstance(exc, OperationalError):
        reason = str(ctx.original_exception).lower()
        transient = ctx.dialect is None or ctx.dialect.name != "sqlite" or any(
            part in reason for part in _SQLITE_TRANSIENT
        )
    else:
        transient = False
    if transient:
        lines = str(ctx.original_exception).strip().splitlines()
        raise TransientError(
            f"database unavailable: {lines[-1] if lines else type(ctx.original_exception)}"
        ) from exc


# Every process runs this at start-up; on PostgreSQL, DDL racing DDL fails, so they queue.
_SCHEMA_LOCK = 0x51EE93E3
_LINK_TRIGGER = "audit_memory_links"
_SQLITE_LINKS = f"""
CREATE TRIGGER {_LINK_TRIGGER} AFTER INSERT ON audit
BEGIN
  INSERT OR IGNORE INTO audit_memory (memory_id, audit_id)
  SELECT value, NEW.id FROM json_each(NEW.memory_ids_before)
  UNION SELECT value, NEW.id FROM json_each(NEW.memory_ids_after);
END
"""
_SQLITE_BACKFILL = """
INSERT OR IGNORE INTO audit_memory (memory_id, audit_id)
SELECT j.value, a.id FROM audit AS a, json_each(a.memory_ids_before) AS j
UNION SELECT j.value, a.id FROM audit AS a, json_each(a.memory_ids_after) AS j
"""
# One INSERT per statement, not per row: bulk audit writes (a sweep writes thousands of
# rows at a time) cost a row-level plpgsql trigger 10x the insert itself, measured.
_PG_LINKS = (
    f"""
CREATE OR REPLACE FUNCTION {_LINK_TRIGGER}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO audit_memory (memory_id, audit_id)
  SELECT v, n.id
    FROM new_audit AS n, json_array_elements_text(COALESCE(n.memory_ids_before, '[]')) AS v
  UNION SELECT v, n.id
    FROM new_audit AS n, json_array_elements_text(COALESCE(n.memory_ids_after, '[]')) AS v
  ON CONFLICT DO NOTHING;
  RETURN NULL;
END $$
""",
    f"""
CREATE TRIGGER {_LINK_TRIGGER} AFTER INSERT ON audit
REFERENCING NEW TABLE AS new_audit FOR EACH STATEMENT EXECUTE FUNCTION {_LINK_TRIGGER}()
""",
)
_PG_BACKFILL = """
INSERT INTO audit_memory (memory_id, audit_id)
SELECT v, a.id
  FROM audit AS a, json_array_elements_text(COALESCE(a.memory_ids_before, '[]')) AS v
UNION SELECT v, a.id
  FROM audit AS a, json_array_elements_text(COALESCE(a.memory_ids_after, '[]')) AS v
ON CONFLICT DO NOTHING
"""


def _prepare_schema(engine: Engine) -> None:
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SCHEMA_LOCK})
        SQLModel.metadata.create_all(conn)
        _install_audit_links(conn)


def _install_audit_links(conn: Connection) -> None:
    """The trigger that fills ``audit_memory``; a database from before it is backfilled."""
    dialect = conn.dialect.name
    if dialect == "sqlite":
        found = conn.execute(
            sa.text("SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = :name"),
            {"name": _LINK_TRIGGER},
        ).first()
        if found is None:
            conn.execute(sa.text(_SQLITE_LINKS))
            conn.execute(sa.text(_SQLITE_BACKFILL))
    elif dialect == "postgresql":
        found = conn.execute(
            sa.text(
                "SELECT 1 FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                "WHERE t.tgname = :name AND c.relname = 'audit' "
                "AND pg_table_is_visible(c.oid)"
            ),
            {"name": _LINK_TRIGGER},
        ).first()
        # Only when missing: creating a trigger locks the audit table against the writers
        # of processes already running. (A changed definition needs a new trigger name.)
        if found is None:
            for statement in _PG_LINKS:
                conn.execute(sa.text(statement))
            conn.execute(sa.text(_PG_BACKFILL))
    else:
        raise ConfigurationError(
            f"unsupported database {dialect!r}: sleepmem runs on SQLite or PostgreSQL"
        )


def _unusable(url: str, exc: OperationalError) -> ConfigurationError | TransientError:
    where = make_url(url).render_as_string(hide_password=True)
    reason = str(exc.orig).strip().splitlines()[-1] if exc.orig else str(exc)
    if "does not exist" in reason:
        name = make_url(url).database or ""
        return ConfigurationError(
            f"cannot open the database at {where}: {reason}. Create it (createdb {name}) "
            "or use the URL of one that exists (SLEEPMEM_DATABASE_URL)"
        )
    return TransientError(f"cannot reach the database at {where}: {reason}")


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # WAL lets the API read while a worker writes; NORMAL sync is durable across app crashes.
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    # Erasure must be physical: overwrite deleted content instead of leaving free pages.
    cur.execute("PRAGMA secure_delete=ON")
    cur.close()
