"""The trigger that fills ``audit_memory`` from every insert into ``audit`` (revision 0001).

Autogenerate does not see triggers, so the revision that creates the tables installs it
from here, and adopting a pre-migrations database installs it if that database predates
it. Frozen: a changed definition needs a new trigger name and a new revision.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sleepmem.core.errors import ConfigurationError

NAME = "audit_memory_links"

SQLITE = f"""
CREATE TRIGGER {NAME} AFTER INSERT ON audit
BEGIN
  INSERT OR IGNORE INTO audit_memory (memory_id, audit_id)
  SELECT value, NEW.id FROM json_each(NEW.memory_ids_before)
  UNION SELECT value, NEW.id FROM json_each(NEW.memory_ids_after);
END
"""
SQLITE_BACKFILL = """
INSERT OR IGNORE INTO audit_memory (memory_id, audit_id)
SELECT j.value, a.id FROM audit AS a, json_each(a.memory_ids_before) AS j
UNION SELECT j.value, a.id FROM audit AS a, json_each(a.memory_ids_after) AS j
"""
# One INSERT per statement, not per row: bulk audit writes (a sweep writes thousands of
# rows at a time) cost a row-level plpgsql trigger 10x the insert itself, measured.
POSTGRES = (
    f"""
CREATE OR REPLACE FUNCTION {NAME}() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE TRIGGER {NAME} AFTER INSERT ON audit
REFERENCING NEW TABLE AS new_audit FOR EACH STATEMENT EXECUTE FUNCTION {NAME}()
""",
)
POSTGRES_BACKFILL = """
INSERT INTO audit_memory (memory_id, audit_id)
SELECT v, a.id
  FROM audit AS a, json_array_elements_text(COALESCE(a.memory_ids_before, '[]')) AS v
UNION SELECT v, a.id
  FROM audit AS a, json_array_elements_text(COALESCE(a.memory_ids_after, '[]')) AS v
ON CONFLICT DO NOTHING
"""
POSTGRES_DROP = (f"DROP TRIGGER IF EXISTS {NAME} ON audit", f"DROP FUNCTION IF EXISTS {NAME}()")
SQLITE_DROP = (f"DROP TRIGGER IF EXISTS {NAME}",)


def installed(conn: Connection) -> bool:
    dialect = _dialect(conn)
    if dialect == "sqlite":
        query = "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = :name"
    else:
        query = (
            "SELECT 1 FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "WHERE t.tgname = :name AND c.relname = 'audit' AND pg_table_is_visible(c.oid)"
        )
    return conn.execute(sa.text(query), {"name": NAME}).first() is not None


def install(conn: Connection, *, backfill: bool) -> None:
    sqlite = _dialect(conn) == "sqlite"
    for statement in (SQLITE,) if sqlite else POSTGRES:
        conn.execute(sa.text(statement))
    if backfill:
        conn.execute(sa.text(SQLITE_BACKFILL if sqlite else POSTGRES_BACKFILL))


def drop(conn: Connection) -> None:
    for statement in SQLITE_DROP if _dialect(conn) == "sqlite" else POSTGRES_DROP:
        conn.execute(sa.text(statement))


def _dialect(conn: Connection) -> str:
    name = conn.dialect.name
    if name not in ("sqlite", "postgresql"):
        raise ConfigurationError(
            f"unsupported database {name!r}: sleepmem runs on SQLite or PostgreSQL"
        )
    return name
