"""Alembic environment: runs on the connection the caller hands over (``sleepmem migrate``,
the engine's start-up upgrade, tests), or on ``SLEEPMEM_DATABASE_URL`` for the alembic CLI."""

from __future__ import annotations

from typing import Any, Literal

from alembic import context
from sqlalchemy import Connection
from sqlmodel import SQLModel

import sleepmem.models  # noqa: F401  (registers the tables on SQLModel.metadata)

config = context.config
target_metadata = SQLModel.metadata


def render_item(kind: str, obj: Any, autogen_context: Any) -> str | Literal[False]:
    """Revisions spell column types in plain SQLAlchemy, so that an old revision never
    breaks when a model's Python type is renamed or moved."""
    if kind == "type" and type(obj).__name__ == "UTCDateTime":
        return "sa.DateTime(timezone=True)"
    if kind == "type" and type(obj).__name__ == "AutoString":
        length = getattr(obj, "length", None)
        return f"sa.String(length={length})" if length else "sa.String()"
    return False


def run_on(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things in place: batch mode rebuilds the table.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        render_item=render_item,
    )
    with context.begin_transaction():
        context.run_migrations()


def run() -> None:
    given = config.attributes.get("connection")
    if given is not None:
        run_on(given)
        return
    from sqlalchemy import create_engine

    from sleepmem.core.settings import Settings

    url = config.get_main_option("sqlalchemy.url") or Settings().sql_url
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            run_on(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported; run against a database")
run()
