"""Erasure reaches PostgreSQL's files: after a user is erased, the erasure job rewrites the
tables (VACUUM FULL) and moves the WAL past the segments that logged their rows, and a byte
grep of the server's data directory (tables and WAL) finds neither their words nor their id.

The data directory is the server's own (``SHOW data_directory``): the test needs to read it,
so it runs as the server's OS user or root, and skips with the reason otherwise. The same
grep is ``scripts/grep-pg-erasure`` for an operator.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from support import embedded_settings, wait_for

from sleepmem.adapters.sql import make_engine
from sleepmem.models import Scope
from sleepmem.runtime import Runtime
from sleepmem.sdk import MemoryClient


def _pg_files(url: str) -> tuple[Path, list[Path]]:
    """The data directory and the files that can hold this database's rows: its own
    directory under base/ and the WAL."""
    engine = make_engine(url)
    with engine.connect() as conn:
        data_dir = Path(str(conn.exec_driver_sql("SHOW data_directory").scalar()))
        oid = conn.exec_driver_sql(
            "SELECT oid FROM pg_database WHERE datname = current_database()"
        ).scalar()
    engine.dispose()
    if not os.access(data_dir, os.R_OK | os.X_OK):
        pytest.skip(f"cannot read PostgreSQL's data directory {data_dir} as this OS user; "
                    "run as the server's user (or root), or use scripts/grep-pg-erasure there")
    roots = [data_dir / "base" / str(oid), data_dir / "pg_wal"]
    return data_dir, [p for root in roots for p in root.rglob("*") if p.is_file()]


def _holding(files: list[Path], needle: bytes) -> list[str]:
    out = []
    for path in files:
        try:
            if needle in path.read_bytes():
                out.append(path.name)
        except FileNotFoundError:  # a segment removed while we read
            continue
    return out


@pytest.fixture
def wal_not_recycled(pg_database: str) -> Iterator[None]:
    """``wal_recycle = off``, as docs/operations.md asks of a server that erases: a recycled
    WAL segment is renamed and written over from its start, so the tail of a segment that
    logged a row would outlive every checkpoint. Reset afterwards (the setting only changes
    how segments are reused, never what any other database sees)."""
    engine = make_engine(pg_database)
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        if not conn.exec_driver_sql("SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
                                    ).scalar():
            pytest.skip("setting wal_recycle needs a superuser; run as one, or set it in "
                        "postgresql.conf and run scripts/grep-pg-erasure")
        was = conn.exec_driver_sql("SHOW wal_recycle").scalar()
        conn.exec_driver_sql("ALTER SYSTEM SET wal_recycle = off")
        conn.exec_driver_sql("SELECT pg_reload_conf()")
    try:
        yield
    finally:
        with engine.connect() as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            if was == "on":
                conn.exec_driver_sql("ALTER SYSTEM RESET wal_recycle")
                conn.exec_driver_sql("SELECT pg_reload_conf()")
        engine.dispose()


@pytest.mark.usefixtures("wal_not_recycled")
def test_no_table_or_wal_file_holds_the_erased_users_words_or_id(
    tmp_path: Path, pg_database: str
) -> None:
    tag = uuid.uuid4().hex[:8]
    words = (f"Quillfeather{tag}", f"Zanzibarite{tag}")
    user = f"zoe-{tag}"
    email = f"zoe.{tag}@example.com"  # a client's event id that names the person
    zoe = Scope(tenant="acme", agent="bot", user=user)
    settings = embedded_settings(tmp_path / "data").model_copy(
        update={"database_url": pg_database}
    )
    with Runtime(settings) as rt:
        assert rt.resources is not None
        engine = rt.resources.engine
        with MemoryClient(settings, tenant="acme", agent="bot") as client:
            client.emit_many([
                {"user": user, "session": "s1", "content": f"I live in {words[1]}."},
                {"user": user, "session": "s1", "content": f"My cat is {words[0]}.",
                 "event_id": email},
                {"user": user, "session": "s1", "kind": "session_end", "role": "system"},
            ])

        def consolidated() -> bool:
            with engine.connect() as conn:
                return bool(conn.execute(
                    sa.text("SELECT count(*) FROM memory WHERE scope_key = :k"), {"k": zoe.key}
                ).scalar())

        assert wait_for(consolidated, timeout=60), "zoe's events were not consolidated"
        with engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("CHECKPOINT")
        _data_dir, before = _pg_files(pg_database)
        assert _holding(before, words[0].encode()), "the grep cannot see the rows it looks for"

        resp = httpx.delete(f"{rt.api_url}/v1/memories", params={"scope": zoe.key}, timeout=120)
        assert resp.status_code == 200, resp.text
        receipt = resp.json()

    assert "VACUUM FULL" in receipt["stores"]["sql"], receipt["stores"]
    _data_dir, after = _pg_files(pg_database)
    for needle in (*words, user, email):
        assert _holding(after, needle.encode()) == [], (needle, receipt["stores"]["sql"])
