"""The inspector's read routes: a scope's memories with status, importance, expiry and
conflict sets, and its jobs; an API key reads only its own tenant."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy.engine import Engine
from sqlmodel import Session

from sleepmem.api.app import create_app
from sleepmem.core.settings import Settings
from sleepmem.models import Job, Memory, Scope
from sleepmem.resources import Resources

KEYS = {"acme": "key-acme", "umbrella": "key-umbrella"}
OWNER = Scope(tenant="acme", agent="bot", user="ann")


def memory(mid: str, statement: str, **values: object) -> Memory:
    now = datetime.now(UTC)
    base: dict[str, object] = dict(
        id=mid, lineage=mid, scope_key=OWNER.key, tenant="acme", agent="bot", user="ann",
        project="", session="", type="fact", subject="user", attribute=mid,
        statement=statement, source="user", trust="high", confidence=0.9, importance=0.5,
        valid_from=now, recorded_at=now, last_access=now, provenance=[],
        expires_at=now + timedelta(days=90),
    )
    base.update(values)
    return Memory(**base)


@pytest.fixture
def settings(settings: Settings, sql_url: str, engine: Engine) -> Settings:
    """On SQLite and on PostgreSQL (the conflict resolution takes row locks there)."""
    return settings.model_copy(update={"database_url": sql_url})


@pytest.fixture
def client(settings: Settings, resources: Resources) -> Iterator[TestClient]:
    authed = settings.model_copy(update={
        "auth_enabled": True, "api_keys": {t: SecretStr(k) for t, k in KEYS.items()},
    })
    with Session(resources.engine) as s:
        s.add(memory("m-city", "Ann lives in Lisbon."))
        s.add(memory("m-old", "Ann lives in Porto.", status="superseded", importance=0.2))
        s.add(memory("m-tea", "Ann prefers green tea.", status="pending_confirmation",
                     conflict_set="cs-1"))
        s.add(memory("m-coffee", "Ann prefers coffee.", status="pending_confirmation",
                     conflict_set="cs-1"))
        s.add(memory("m-bob", "Bob is vegan.", user="bob",
                     scope_key=Scope(tenant="acme", agent="bot", user="bob").key))
        s.add(Job(id="j-1", kind="reconsolidate", tenant="acme", scope_key=OWNER.key,
                  status="done", params={"apply": False}))
        s.commit()
    resources.settings = authed
    with TestClient(create_app(resources=resources)) as c:
        yield c


def get(client: TestClient, path: str, key: str, **params: str) -> object:
    return client.get(path, params=params, headers={"Authorization": f"Bearer {key}"})


class TestAScopesMemories:
    def test_lists_every_version_of_the_scope_only_with_its_conflict_sets(
        self, client: TestClient
    ) -> None:
        r = get(client, "/v1/inspect/memories", KEYS["acme"], tenant="acme", agent="bot",
                user="ann")
        assert r.status_code == 200  # type: ignore[attr-defined]
        body = r.json()  # type: ignore[attr-defined]
        by_id = {m["id"]: m for m in body["memories"]}
        assert set(by_id) == {"m-city", "m-old", "m-tea", "m-coffee"}  # not Bob's
        assert by_id["m-old"]["status"] == "superseded" and by_id["m-old"]["importance"] == 0.2
        assert by_id["m-city"]["expires_at"] is not None
        assert sorted(body["conflicts"]["cs-1"]) == ["m-coffee", "m-tea"]

    def test_filters_by_status(self, client: TestClient) -> None:
        r = get(client, "/v1/inspect/memories", KEYS["acme"], tenant="acme", agent="bot",
                user="ann", status="active")
        assert [m["id"] for m in r.json()["memories"]] == ["m-city"]  # type: ignore[attr-defined]

    def test_another_tenants_key_is_refused(self, client: TestClient) -> None:
        r = get(client, "/v1/inspect/memories", KEYS["umbrella"], tenant="acme", agent="bot",
                user="ann")
        assert r.status_code == 403  # type: ignore[attr-defined]
        assert get(client, "/v1/inspect/memories", "nope", tenant="acme").status_code == 401  # type: ignore[attr-defined]


class TestAScopesJobs:
    def test_lists_its_jobs(self, client: TestClient) -> None:
        r = get(client, "/v1/inspect/jobs", KEYS["acme"], tenant="acme", agent="bot",
                user="ann")
        assert [j["id"] for j in r.json()] == ["j-1"]  # type: ignore[attr-defined]
        other = get(client, "/v1/inspect/jobs", KEYS["acme"], tenant="acme", agent="bot",
                    user="bob")
        assert other.json() == []  # type: ignore[attr-defined]


class TestThePage:
    def test_is_served_without_a_key_and_holds_no_data(self, client: TestClient) -> None:
        r = client.get("/ui")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        assert "memory inspector" in r.text and "Lisbon" not in r.text
        assert "frame-ancestors 'none'" in r.headers["content-security-policy"]


def test_the_page_ships_with_the_package() -> None:
    from importlib import resources

    page = resources.files("sleepmem.api") / "static" / "inspector.html"
    assert page.is_file()
    assert Path(str(page)).read_text(encoding="utf-8").startswith("<!doctype html>")


def post(client: TestClient, path: str, key: str, body: dict[str, str]) -> object:
    return client.post(path, json=body, headers={"Authorization": f"Bearer {key}"})


class TestResolvingAConflictSet:
    def test_another_tenants_key_finds_no_such_set(self, client: TestClient) -> None:
        r = post(client, "/v1/conflicts/cs-1/resolve", KEYS["umbrella"], {"keep": "m-tea"})
        assert r.status_code == 404  # type: ignore[attr-defined]
        still = get(client, "/v1/inspect/memories", KEYS["acme"], tenant="acme", agent="bot",
                    user="ann").json()  # type: ignore[attr-defined]
        assert sorted(still["conflicts"]["cs-1"]) == ["m-coffee", "m-tea"]

    def test_the_owner_keeps_one_side_and_the_set_is_gone(self, client: TestClient) -> None:
        r = post(client, "/v1/conflicts/cs-1/resolve", KEYS["acme"], {"keep": "m-tea"})
        assert r.status_code == 200, r.text  # type: ignore[attr-defined]
        body = r.json()  # type: ignore[attr-defined]
        assert body["kept"]["status"] == "active" and body["kept"]["trust"] == "human"
        assert [m["superseded_by"] for m in body["invalidated"]] == ["m-tea"]
        listed = get(client, "/v1/inspect/memories", KEYS["acme"], tenant="acme",
                     agent="bot", user="ann").json()  # type: ignore[attr-defined]
        assert listed["conflicts"] == {}
        assert {m["id"]: m["status"] for m in listed["memories"]}["m-coffee"] == "superseded"

    def test_keeping_something_that_is_not_a_side_says_which_are(self, client: TestClient) -> None:
        r = post(client, "/v1/conflicts/cs-1/resolve", KEYS["acme"], {"keep": "m-city"})
        assert r.status_code == 422  # type: ignore[attr-defined]
        assert "m-coffee" in r.text and "m-tea" in r.text  # type: ignore[attr-defined]
