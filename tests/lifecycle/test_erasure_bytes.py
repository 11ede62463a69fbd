"""Erasure reaches every byte: after a user is erased over HTTP, no file of the data directory
(SQLite and its WAL, Redis's AOF and snapshot, the vector index's WAL and segments) holds
their words or their id: the audit keeps its rows, naming the scope by a keyed pseudonym.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import sqlalchemy as sa
from sqlmodel import SQLModel
from support import embedded_settings, wait_for

from sleepmem.adapters.sql import make_engine
from sleepmem.core.auditkey import audit_key
from sleepmem.models import Scope
from sleepmem.pipelines.lifecycle.pseudonyms import pseudonym
from sleepmem.runtime import Runtime
from sleepmem.sdk import MemoryClient

WORDS = ("Quillfeather", "Zanzibarite", "Brontevale")


def _files(data_dir: Path) -> dict[str, bytes]:
    return {
        p.relative_to(data_dir).as_posix(): p.read_bytes()
        for p in sorted(data_dir.rglob("*"))
        if p.is_file()
    }


def _sql_rows(url: str) -> dict[str, list[str]]:
    engine = make_engine(url)
    out: dict[str, list[str]] = {}
    with engine.connect() as conn:
        for table in SQLModel.metadata.sorted_tables:
            out[table.name] = [repr(tuple(r)) for r in conn.execute(sa.select(table))]
    engine.dispose()
    return out


class TestEraseReachesEveryByte:
    def test_no_file_holds_the_erased_users_words_or_id(self, tmp_path: Path) -> None:
        data_dir = tmp_path / "data"
        settings = embedded_settings(data_dir)
        user = f"zoe-{uuid.uuid4().hex[:8]}"
        zoe = Scope(tenant="acme", agent="bot", user=user)
        with Runtime(settings) as rt:
            assert rt.resources is not None
            with MemoryClient(settings, tenant="acme", agent="bot") as client:
                client.emit_many(
                    [
                        {"user": user, "session": "s1", "content": f"I live in {WORDS[1]}."},
                        {"user": user, "session": "s1", "content": f"My cat is {WORDS[0]}."},
                        {"user": user, "session": "s1", "content": f"I work at {WORDS[2]}."},
                        {"user": user, "session": "s1", "kind": "session_end", "role": "system"},
                        {"user": "ann", "session": "s1", "content": "I live in Oslo."},
                        {"user": "ann", "session": "s1", "kind": "session_end", "role": "system"},
                    ]
                )
            engine = rt.resources.engine

            def consolidated() -> bool:
                with engine.connect() as conn:
                    return bool(
                        conn.execute(
                            sa.text("SELECT count(*) FROM memory WHERE scope_key = :k"),
                            {"k": zoe.key},
                        ).scalar()
                    )

            assert wait_for(consolidated, timeout=60), "zoe's events were not consolidated"
            before = b"".join(_files(data_dir).values())
            assert WORDS[0].encode() in before and user.encode() in before  # the scan can see

            resp = httpx.delete(
                f"{rt.api_url}/v1/memories", params={"scope": zoe.key}, timeout=120
            )
            assert resp.status_code == 200, resp.text
            receipt = resp.json()
            rows = _sql_rows(settings.sql_url)

        stores = receipt["stores"]
        assert stores["redis_aof"] == "rewritten" and stores["redis_rdb"] == "rewritten"
        assert stores["vector_index"] == "compacted"
        assert stores["sql"].startswith("deleted")

        files = _files(data_dir)
        for word in WORDS:
            holding = [name for name, blob in files.items() if word.encode() in blob]
            assert holding == [], (word, holding)
        # The id: nowhere, not even in the audit and the erasure's job row, which name the
        # scope by its keyed pseudonym (docs/security.md "Erasure").
        holding_id = [name for name, blob in files.items() if user.encode() in blob]
        assert holding_id == []
        for table, table_rows in rows.items():
            with_id = [r for r in table_rows if user in r]
            assert with_id == [], (table, with_id[:2])
        hidden = pseudonym(zoe.key, key=audit_key(settings))
        assert receipt["scope_key"] == hidden
        assert sum(hidden in r for r in rows["audit"]) >= 2  # its memories' rows and the erasure
        assert any(hidden in r for r in rows["job"])
        assert all(word not in r for rs in rows.values() for r in rs for word in WORDS)
        assert any("Oslo" in r for r in rows["raw_event"])  # the sibling user stays
