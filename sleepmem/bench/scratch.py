"""Where a benchmark writes: its own SQLite file, or a scratch PostgreSQL database.

A bench never writes into a database that may hold real memories: on a PostgreSQL server
it creates a database of its own and drops it afterwards, whatever database the URL names.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa


@contextmanager
def scratch_database(server_url: str | None, tmp: Path, *, name: str = "bench") -> Iterator[str]:
    """SQLite in ``tmp``, or a scratch database on the named PostgreSQL server, dropped after."""
    if server_url is None or server_url.startswith("sqlite"):
        yield server_url or f"sqlite:///{tmp / f'{name}.db'}"
        return
    url = sa.engine.make_url(server_url)
    database = f"sleepmem_{name}_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{database}"'))
        try:
            yield url.set(database=database).render_as_string(hide_password=False)
        finally:
            with admin.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
    finally:
        admin.dispose()
