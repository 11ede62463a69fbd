"""SQL engine per process; tables created on first use (migrations would go via alembic)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import OperationalError
from sqlmodel import Session, SQLModel, create_engine

import models  # noqa: F401  (registers the tables on SQLModel.metadata)
from sleepmem.errors import ConfigurationError, TransientError


def make_engine(url: str, *, echo: bool = False) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(
            url, echo=echo, connect_args={"check_same_thread": False, "timeout": 30}
        )
        event.listen(engine, "connect", _sqlite_pragmas)
    else:
        engine = create_engine(url, echo=echo, pool_pre_ping=True, pool_size=10, max_overflow=10)
    try:
        SQLModel.metadata.create_all(engine)
    except OperationalError as exc:
        engine.dispose()
        raise _unusable(url, exc) from None
    return engine


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


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """One transaction: commit on success, roll back on any error."""
    with Session(engine, expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
