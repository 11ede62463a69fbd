"""HTTP ingest: auth per tenant, one event or a batch, all-or-nothing validation, health."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import redis as redis_lib
import sqlalchemy as sa
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy.engine import Engine

from sleepmem.api.app import create_app
from sleepmem.api.health import check_dependencies
from sleepmem.core.errors import ConfigurationError
from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.resources import Resources


@pytest.fixture
def settings(settings: Settings, sql_url: str, engine: Engine) -> Settings:
    """Every test here runs on SQLite and again on PostgreSQL (``engine`` empties the shared
    PostgreSQL database afterwards)."""
    return settings.model_copy(update={"database_url": sql_url})


ACME_KEY = "acme-key-0f9e8d7c"
GLOBEX_KEY = "globex-key-1a2b3c4d"
EVENT = {"tenant": "acme", "agent": "bot", "user": "u1", "content": "I prefer aisle seats"}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def secured(settings: Settings) -> Settings:
    return settings.model_copy(
        update={
            "auth_enabled": True,
            "api_keys": {"acme": SecretStr(ACME_KEY), "globex": SecretStr(GLOBEX_KEY)},
        }
    )


@pytest.fixture
def http(secured: Settings, redis: redis_lib.Redis) -> Iterator[TestClient]:
    with TestClient(create_app(secured)) as client:
        yield client


def stream_ids(redis: redis_lib.Redis, keys: Keys) -> list[str]:
    return [orjson.loads(f[b"e"])["event_id"] for _i, f in redis.xrange(keys.events)]


class TestAuth:
    def test_no_key_gets_401_with_a_bearer_challenge(
        self, http: TestClient, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        resp = http.post("/v1/events", json=EVENT)
        assert resp.status_code == 401
        assert resp.headers["www-authenticate"] == "Bearer"
        assert "Authorization: Bearer" in resp.json()["error"]["message"]
        assert redis.exists(keys.events) == 0

    @pytest.mark.parametrize(
        "header", ["Bearer wrong-key", "Basic YWNtZTpwdw==", "Bearer ", ACME_KEY]
    )
    def test_a_wrong_or_malformed_key_gets_401(self, http: TestClient, header: str) -> None:
        resp = http.post("/v1/events", json=EVENT, headers={"Authorization": header})
        assert resp.status_code == 401

    def test_a_key_for_another_tenant_gets_403_and_nothing_is_written(
        self, http: TestClient, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        resp = http.post("/v1/events", json=EVENT, headers=bearer(GLOBEX_KEY))
        assert resp.status_code == 403
        assert "tenant 'globex'" in resp.json()["error"]["message"]
        assert redis.exists(keys.events) == 0

    def test_one_foreign_event_in_a_batch_refuses_the_whole_batch(
        self, http: TestClient, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        batch = [EVENT, {**EVENT, "tenant": "globex"}]
        resp = http.post("/v1/events", json=batch, headers=bearer(ACME_KEY))
        assert resp.status_code == 403
        assert resp.json()["error"]["message"].startswith("events[1].tenant")
        assert redis.exists(keys.events) == 0

    def test_the_tenants_own_key_gets_202(
        self, http: TestClient, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        resp = http.post("/v1/events", json=EVENT, headers=bearer(ACME_KEY))
        assert resp.status_code == 202
        assert resp.json()["ids"] == stream_ids(redis, keys)

    def test_with_auth_off_on_loopback_any_tenant_may_write(
        self, settings: Settings, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        assert settings.auth_enabled is False and settings.host == "127.0.0.1"
        with TestClient(create_app(settings)) as client:
            resp = client.post("/v1/events", json={**EVENT, "tenant": "anyone"})
        assert resp.status_code == 202

    def test_auth_cannot_be_switched_off_off_loopback(self) -> None:
        with pytest.raises(ConfigurationError, match="only allowed when host is loopback"):
            Settings(auth_enabled=False, host="0.0.0.0", _env_file=None)


class TestIngest:
    @pytest.mark.parametrize("shape", ["list", "object"])
    def test_a_batch_is_accepted_in_either_shape_with_ids_in_order(
        self, http: TestClient, redis: redis_lib.Redis, keys: Keys, shape: str
    ) -> None:
        events = [{**EVENT, "content": f"m{i}", "event_id": f"e{i}"} for i in range(5)]
        body: Any = events if shape == "list" else {"events": events}
        resp = http.post("/v1/events", json=body, headers=bearer(ACME_KEY))
        assert resp.status_code == 202
        (last, _fields), = redis.xrevrange(keys.events, count=1)
        # The position of the last append: what a flush or min_position waits for.
        assert resp.json() == {"ids": [f"e{i}" for i in range(5)], "position": last.decode()}
        assert stream_ids(redis, keys) == [f"e{i}" for i in range(5)]

    def test_secrets_are_redacted_before_the_xadd(
        self, http: TestClient, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        event = {**EVENT, "content": "my password is hunter2-Prod!"}
        assert http.post("/v1/events", json=event, headers=bearer(ACME_KEY)).status_code == 202
        payload = redis.xrange(keys.events)[0][1][b"e"]
        assert b"hunter2" not in payload


class TestValidation:
    def test_every_bad_field_is_listed_and_nothing_is_written(
        self, http: TestClient, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        batch = [EVENT, {**EVENT, "kind": "chat"}, {**EVENT, "role": "bot", "colour": "red"}]
        resp = http.post("/v1/events", json=batch, headers=bearer(ACME_KEY))
        assert resp.status_code == 422
        body = resp.json()
        assert body["error"] == {
            "field": "events[1].kind",
            "message": "must be one of message, tool_result, observation, feedback, outcome, "
            "session_end",
        }
        assert [e["field"] for e in body["errors"]] == [
            "events[1].kind",
            "events[2].role",
            "events[2].colour",
        ]
        assert redis.exists(keys.events) == 0

    def test_a_single_bad_event_names_its_field(self, http: TestClient) -> None:
        resp = http.post("/v1/events", json={"tenant": "acme"}, headers=bearer(ACME_KEY))
        assert resp.status_code == 422
        assert resp.json()["error"] == {"field": "agent", "message": "this field is required"}

    def test_a_body_that_is_not_json_is_refused(self, http: TestClient) -> None:
        resp = http.post("/v1/events", content=b"{not json", headers=bearer(ACME_KEY))
        assert resp.status_code == 422
        assert resp.json()["error"]["field"] == "body"

    def test_events_that_is_not_a_list_is_refused(self, http: TestClient) -> None:
        resp = http.post("/v1/events", json={"events": EVENT}, headers=bearer(ACME_KEY))
        assert resp.status_code == 422
        assert resp.json()["error"] == {
            "field": "events",
            "message": "must be a list of event objects",
        }

    def test_a_batch_over_the_configured_maximum_is_refused(
        self, secured: Settings, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        small = secured.model_copy(update={"batch_max_events": 3})
        with TestClient(create_app(small)) as client:
            resp = client.post("/v1/events", json=[EVENT] * 4, headers=bearer(ACME_KEY))
        assert resp.status_code == 422
        assert resp.json()["error"]["message"] == "at most 3 events per batch; split it"
        assert redis.exists(keys.events) == 0


class TestHealthAndSchema:
    def test_healthz_answers_without_a_key(self, http: TestClient) -> None:
        assert http.get("/healthz").json() == {"status": "ok"}

    def test_readyz_reports_each_dependency(self, http: TestClient) -> None:
        resp = http.get("/readyz")
        body = resp.json()
        assert set(body["checks"]) == {"redis", "sql", "index"}
        # Every dependency of this test is up: each check passes and the answer is 200.
        assert body["checks"] == {"redis": "ok", "sql": "ok", "index": "ok"}
        assert (resp.status_code, body["failed"], body["status"]) == (200, [], "ready")

    def test_readyz_names_what_failed_with_503(
        self, secured: Settings, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        broken = Resources(
            settings=secured,
            redis=redis,
            engine=sa.create_engine("postgresql+psycopg://postgres@127.0.0.1:1/none"),
            keys=keys,
            redis_url=str(secured.redis_url),
            broker_url=str(secured.redis_url),
        )
        try:
            with TestClient(create_app(secured, resources=broken)) as client:
                resp = client.get("/readyz")
        finally:
            broken.close()
        assert resp.status_code == 503
        assert "sql" in resp.json()["failed"]
        assert resp.json()["checks"]["sql"].startswith("failed: OperationalError")

    def test_a_failed_probe_does_not_leak_credentials(
        self, secured: Settings, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        broken = Resources(
            settings=secured,
            redis=redis_lib.Redis.from_url("redis://:Sup3rSecretPw@127.0.0.1:1/0"),
            engine=sa.create_engine("sqlite://"),
            keys=keys,
            redis_url="redis://127.0.0.1:1/0",
            broker_url="redis://127.0.0.1:1/0",
        )
        try:
            checks = check_dependencies(broken)
        finally:
            broken.close()
        assert checks["redis"].startswith("failed: ConnectionError")
        assert "Sup3rSecretPw" not in orjson.dumps(checks).decode()

    def test_the_openapi_schema_describes_the_ingest_endpoint(self, http: TestClient) -> None:
        schema = http.get("/openapi.json").json()
        post = schema["paths"]["/v1/events"]["post"]
        assert set(post["responses"]) >= {"202", "401", "403", "422"}
        assert "Event" in schema["components"]["schemas"]
        assert "tenant" in schema["components"]["schemas"]["Event"]["required"]
        assert post["security"] == [{"bearer": []}]
        assert schema["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"

    def test_the_document_says_which_operations_want_a_key_as_the_server_answers(
        self, http: TestClient, settings: Settings, redis: redis_lib.Redis
    ) -> None:
        keyed = http.get("/openapi.json").json()["paths"]
        for path, method in [("/v1/search", "post"), ("/v1/memories", "get"),
                             ("/v1/jobs/{name}/run", "post"), ("/v1/store/items", "put")]:
            assert keyed[path][method]["security"] == [{"bearer": []}], path
            # and the server does want one
            assert http.request(method.upper(), path.replace("{name}", "sweep")).status_code \
                == 401, path
        assert "security" not in keyed["/healthz"]["get"]
        assert http.get("/healthz").status_code == 200
        # With auth off no operation wants a key, and the document says none does.
        with TestClient(create_app(settings)) as open_http:
            paths = open_http.get("/openapi.json").json()["paths"]
        assert all("security" not in op for ops in paths.values() for op in ops.values())
