"""SQL engine per process: schema set-up and the translation of driver failures.

The schema comes from the alembic migrations (:mod:`sleepmem.adapters.migrate`): an
engine upgrades its database at start unless told only to check it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine, ExceptionContext, make_url
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlmodel import create_engine

import sleepmem.models  # noqa: F401  (registers the tables on SQLModel.metadata)
from sleepmem.core.errors import ConfigurationError, TransientError


def plain_engine(url: str, *, echo: bool = False) -> Engine:
    """An engine with the per-connection settings, and nothing run on the database yet."""
    if url.startswith("sqlite"):
        engine = create_engine(
            url, echo=echo, connect_args={"check_same_thread": False, "timeout": 30}
        )
        event.listen(engine, "connect", _sqlite_pragmas)
    else:
        engine = create_engine(url, echo=echo, pool_pre_ping=True, pool_size=10, max_overflow=10)
    return engine


def make_engine(url: str, *, echo: bool = False, migrate: bool = True) -> Engine:
    """The process's engine, its schema at this release's revision: upgraded to it
    (``migrate``), or checked and refused with a hint to run ``sleepmem migrate``."""
    engine = plain_engine(url, echo=echo)
    try:
        _prepare_schema(engine, migrate=migrate)
    except OperationalError as exc:
        engine.dispose()
        raise _unusable(url, exc) from None
    except BaseException:
        engine.dispose()
        raise
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
        # The driver's message, on one line (psycopg spreads one over several).
        reason = " ".join(str(ctx.original_exception).split())
        raise TransientError(
            f"database unavailable: {reason or type(ctx.original_exception).__name__}"
        ) from exc


def _prepare_schema(engine: Engine, *, migrate: bool) -> None:
    # Imported here: alembic's script loading is start-up work, not import-time work.
    from sleepmem.adapters.migrate import check_current, upgrade

    if migrate:
        upgrade(engine)
    else:
        check_current(engine)


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
