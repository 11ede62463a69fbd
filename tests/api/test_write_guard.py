"""Every write path is guarded: each write operation of the API's OpenAPI document is sent a
known secret in every free-text string field, and the secret is then looked for in every
SQL table, every Redis key and value of the namespace, and the vector index files.

The operations come from the OpenAPI document, not from a list here: a new write route
fails this test until it is given a body below or a reason in NO_TEXT.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib
import sqlalchemy as sa
from fastapi.testclient import TestClient
from sqlmodel import Session, SQLModel

from sleepmem.api.app import create_app
from sleepmem.bench.secrets import leaked
from sleepmem.core.settings import Settings
from sleepmem.models import Memory, Scope
from sleepmem.resources import Resources

# Two shapes the current redactor surely catches: an AWS access key id and a PEM key.
AWS = "AKIAQ3VX9MT2LPA8WZR5"
PEM_BODY = "MIIEowIBAAKCAQEAq3vX9mT2LpA8wZr5Kd7YbN1cQ3vX9mT2LpA8wZr5Kd7YbN1c"
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----"
TEXT = f"the deploy key is {AWS} and the cert is {PEM}"
NEEDLES = (AWS, PEM_BODY)

OWNER = Scope(tenant="acme", agent="bot", user="ann")
SESSION = {**OWNER.levels(), "session": "s1"}
MEMORY = "a" * 32
NOTED = "d" * 32  # feedback goes to another memory: the edit supersedes MEMORY
SIDES = ("b" * 32, "c" * 32)

Body = Callable[[], dict[str, Any]]

# Each write operation with a body, as (METHOD, path template) -> a valid body whose every
# free-text field holds TEXT. Ids stay ids: one holding a secret is refused with a 422
# (tests/api/test_api_edges.py), never stored.
BODIES: dict[tuple[str, str], tuple[str, Body]] = {
    ("POST", "/v1/events"): ("/v1/events", lambda: {
        **SESSION, "content": TEXT, "meta": {"note": TEXT, "dbPassword": "hunter22x",
                                             "tool": {"output": TEXT}}}),
    ("POST", "/v1/search"): ("/v1/search", lambda: {"query": TEXT, "scope": OWNER.levels()}),
    ("POST", "/v1/jobs/reconsolidate"): ("/v1/jobs/reconsolidate",
                                         lambda: {"scope": OWNER.levels()}),
    ("POST", "/v1/jobs/consolidate"): ("/v1/jobs/consolidate", lambda: {"scope": OWNER.key}),
    ("PATCH", "/v1/memories/{memory_id}"): (f"/v1/memories/{MEMORY}", lambda: {
        "statement": TEXT, "reason": TEXT}),
    ("POST", "/v1/memories/{memory_id}/feedback"): (f"/v1/memories/{NOTED}/feedback",
                                                    lambda: {"verdict": "wrong", "note": TEXT}),
    ("PUT", "/v1/checkpoints"): ("/v1/checkpoints", lambda: {
        "scope": SESSION, "base_version": 0, "state": {
            "goal": TEXT, "plan": [TEXT], "current_step": TEXT,
            "completed": [{"key": "k1", "step": TEXT, "result": {"out": TEXT}}],
            "variables": {"argv": ["deploy", "--token", TEXT], "cfg": {"x": TEXT}},
            "tool_results": [{"tool": "shell", "result": TEXT}], "verified": [TEXT]}}),
    ("POST", "/v1/sessions/evict"): ("/v1/sessions/evict", lambda: {
        "scope": SESSION, "messages": [{"content": TEXT}]}),
    ("POST", "/v1/sessions/end"): ("/v1/sessions/end", lambda: {
        "scope": SESSION, "outcome": TEXT}),
    ("POST", "/v1/context"): ("/v1/context", lambda: {
        "scope": SESSION, "query": TEXT, "budget_tokens": 512}),
    ("POST", "/v1/conflicts/{conflict_set}/resolve"): ("/v1/conflicts/cs-1/resolve", lambda: {
        "keep": SIDES[0], "reason": TEXT}),
    ("PUT", "/v1/store/items"): ("/v1/store/items", lambda: {
        "scope": OWNER.levels(), "namespace": ["bot", "ann"], "key": "creds", "value": {
            "note": TEXT, "dbPassword": "hunter22x", "list": [TEXT, {"deep": TEXT}],
            TEXT: "a secret as a field name"}}),
    ("POST", "/v1/store/search"): ("/v1/store/search", lambda: {
        "scope": OWNER.levels(), "query": TEXT, "filter": {"note": TEXT}}),
}

# Write operations that carry no text a caller chooses, and why.
NO_TEXT: dict[tuple[str, str], str] = {
    ("POST", "/v1/jobs/{name}/run"): "a job name from a fixed set; no body",
    ("POST", "/v1/jobs/{job_id}/cancel"): "an id only; no body",
    ("DELETE", "/v1/memories"): "a scope key only (ids with secrets are refused)",
    ("DELETE", "/v1/memories/{memory_id}"): "an id only; no body",
    ("POST", "/v1/memories/{memory_id}/pin"): "an id only; no body",
    ("POST", "/v1/memories/{memory_id}/unpin"): "an id only; no body",
    ("POST", "/v1/flush"): "a scope, a stream position and a timeout; it stores nothing",
    ("DELETE", "/v1/store/items"): "a scope, a namespace and a key; it stores nothing",
}


def _memory(mid: str, statement: str, **values: object) -> Memory:
    now = datetime.now(UTC)
    base: dict[str, Any] = dict(
        id=mid, lineage=mid, scope_key=OWNER.key, tenant="acme", agent="bot", user="ann",
        project="", session="", type="fact", subject="user", attribute=mid,
        statement=statement, source="user", trust="high", confidence=0.9, importance=0.5,
        valid_from=now, recorded_at=now, last_access=now, provenance=[],
        expires_at=now + timedelta(days=90),
    )
    base.update(values)
    return Memory(**base)


@pytest.fixture
def client(resources: Resources) -> Iterator[TestClient]:
    with Session(resources.engine) as s:
        s.add(_memory(MEMORY, "Ann lives in Lisbon."))
        s.add(_memory(NOTED, "Ann has a cat.", attribute="pet"))
        for sid, city in zip(SIDES, ("Oslo", "Rome"), strict=True):
            s.add(_memory(sid, f"Ann lives in {city}.", status="pending_confirmation",
                          conflict_set="cs-1", attribute="city"))
        s.commit()
    with TestClient(create_app(resources=resources)) as c:
        yield c


def _write_operations(app_schema: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (method.upper(), path)
        for path, ops in app_schema["paths"].items()
        for method in ops
        if method in ("post", "put", "patch", "delete")
    }


def _redis_bytes(client: redis_lib.Redis, namespace: str) -> bytes:
    out: list[bytes] = []
    for key in client.scan_iter(match=f"{namespace}:*", count=1000):
        out.append(key)
        kind = client.type(key)
        if kind == b"string":
            out.append(client.get(key) or b"")
        elif kind == b"hash":
            out.extend(k + v for k, v in client.hgetall(key).items())
        elif kind == b"list":
            out.extend(client.lrange(key, 0, -1))
        elif kind == b"set":
            out.extend(client.smembers(key))
        elif kind == b"zset":
            out.extend(m for m, _s in client.zrange(key, 0, -1, withscores=True))
        elif kind == b"stream":
            for _id, fields in client.xrange(key):
                out.extend(k + v for k, v in fields.items())
    return b"\n".join(out)


def _sql_text(resources: Resources) -> str:
    parts: list[str] = []
    with resources.engine.connect() as conn:
        for table in SQLModel.metadata.sorted_tables:
            parts.extend(repr(tuple(r)) for r in conn.execute(sa.select(table)))
    return "\n".join(parts)


def _index_bytes(data_dir: Path) -> bytes:
    root = data_dir / "index"
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file()) if root.exists() \
        else b""


class TestEveryWriteOperationIsCovered:
    def test_each_write_operation_has_a_body_here_or_a_reason_it_carries_no_text(
        self, client: TestClient
    ) -> None:
        ops = _write_operations(client.app.openapi())  # type: ignore[attr-defined]
        assert ops - set(BODIES) - set(NO_TEXT) == set(), "a write route with no guard check"
        assert set(BODIES) | set(NO_TEXT) <= ops, "a listed route is no longer in the API"


class TestNoSecretPersists:
    def test_a_secret_in_every_text_field_of_every_write_is_found_in_no_store(
        self, client: TestClient, resources: Resources, redis: redis_lib.Redis,
        settings: Settings,
    ) -> None:
        statuses: dict[tuple[str, str], int] = {}
        for (method, template), (path, body) in BODIES.items():
            resp = client.request(method, path, json=body())
            statuses[(method, template)] = resp.status_code
            assert resp.status_code < 300, (method, template, resp.text)
            assert all(n not in resp.text for n in NEEDLES), (method, template)
        stores = {
            "sql": _sql_text(resources).encode(),
            "redis": _redis_bytes(redis, settings.namespace),
            "index": _index_bytes(settings.data_dir),
        }
        found = {(store, needle[:8]) for store, blob in stores.items()
                 for needle in NEEDLES if needle.encode() in blob}
        assert found == set()
        # The writes reached the stores: the guard is not passing on an empty database.
        assert b"[REDACTED:" in stores["sql"] and b"[REDACTED:" in stores["redis"]


# Secrets the shape detectors alone would miss: a value said in the message after its noun,
# a password in prose, an id number, and a secret-named meta key.
TURN = [
    ("my bank pin is in the next message", {}),
    ("938271", {}),
    ("my netflix pw is hunter22", {}),
    ("my ssn is 536-90-4399", {}),
    ("I live in Lisbon and work as a nurse.", {"dbPassword": "Zq8xw1Mv"}),
]
TURN_NEEDLES = ("938271", "hunter22", "536-90-4399", "Zq8xw1Mv")


class TestNothingPersistsAfterDrainAndConsolidation:
    def test_the_secrets_of_a_turn_are_in_no_store_once_it_is_consolidated(
        self, client: TestClient, resources: Resources, redis: redis_lib.Redis,
        settings: Settings,
    ) -> None:
        from sleepmem.ingest.drain import drain_once
        from sleepmem.pipelines.write.consolidate import consolidate_scope
        from sleepmem.services import run_consolidation

        for content, meta in TURN:
            resp = client.post("/v1/events", json={**SESSION, "content": content, "meta": meta})
            assert resp.status_code < 300, resp.text
        while drain_once(redis=resources.redis, keys=resources.keys, engine=resources.engine,
                         settings=settings, consumer="guard").entries:
            pass
        report = run_consolidation(resources, scope_key=OWNER.key, pipeline=consolidate_scope)
        assert report.events == len(TURN)
        stores = {
            "sql": _sql_text(resources).encode(),
            "redis": _redis_bytes(redis, settings.namespace),
            "index": _index_bytes(settings.data_dir),
        }
        found = {(store, needle) for store, blob in stores.items()
                 for needle in TURN_NEEDLES if leaked(needle, blob)}
        assert found == set()
        # Consolidation ran on the redacted turn: what is not secret became a memory.
        assert b"Lisbon" in stores["sql"]
