"""Jobs over every tenant (sweep, refresh) need the operator key, never a tenant's key."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis as redis_lib
from fastapi.testclient import TestClient
from pydantic import SecretStr

from sleepmem.api.app import create_app
from sleepmem.core.localkey import prepare_auth
from sleepmem.core.settings import Settings

TENANT_KEY = "sm_tenant_acme_key_0123456789"
ADMIN_KEY = "sm_operator_key_9876543210"


def _http(settings: Settings, **over: object) -> TestClient:
    cfg = settings.model_copy(update={
        "auth_enabled": True, "api_keys": {"acme": SecretStr(TENANT_KEY)}, **over,
    })
    return TestClient(create_app(cfg))


@pytest.fixture
def http(settings: Settings, redis: redis_lib.Redis) -> Iterator[TestClient]:
    with _http(settings, admin_key=SecretStr(ADMIN_KEY)) as client:
        yield client


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


class TestAllTenantJobs:
    @pytest.mark.parametrize("job", ["sweep", "refresh"])
    def test_a_tenant_key_is_refused_with_what_to_set(self, http: TestClient, job: str) -> None:
        resp = http.post(f"/v1/jobs/{job}/run", headers=_bearer(TENANT_KEY))
        assert resp.status_code == 403
        assert "SLEEPMEM_ADMIN_KEY" in resp.json()["error"]["message"]

    @pytest.mark.parametrize("job", ["sweep", "refresh"])
    def test_the_operator_key_runs_them(self, http: TestClient, job: str) -> None:
        resp = http.post(f"/v1/jobs/{job}/run", headers=_bearer(ADMIN_KEY))
        assert resp.status_code == 200, resp.text

    def test_an_unknown_key_is_a_401_not_a_403(self, http: TestClient) -> None:
        resp = http.post("/v1/jobs/sweep/run", headers=_bearer("sm_nobody_issued_this"))
        assert resp.status_code == 401

    def test_without_an_operator_key_configured_no_key_may_run_them(
        self, settings: Settings, redis: redis_lib.Redis
    ) -> None:
        with _http(settings) as client:
            resp = client.post("/v1/jobs/sweep/run", headers=_bearer(TENANT_KEY))
        assert resp.status_code == 403

    def test_the_operator_key_is_not_a_tenant_key(self, http: TestClient) -> None:
        resp = http.post("/v1/search", headers=_bearer(ADMIN_KEY),
                         json={"query": "tea", "scope": {"tenant": "acme", "user": "ann"}})
        assert resp.status_code == 401


class TestTheLocalKey:
    def test_an_unconfigured_loopback_server_makes_its_local_key_the_operator_key(
        self, settings: Settings
    ) -> None:
        bare = settings.model_copy(update={"auth_enabled": True, "api_keys": {},
                                           "admin_key": None, "host": "127.0.0.1"})
        setup = prepare_auth(bare)
        assert setup.local_key is not None and setup.settings.admin_key is not None
        assert setup.settings.admin_key.get_secret_value() == setup.local_key.key

    def test_a_configured_operator_key_is_kept(self, settings: Settings) -> None:
        bare = settings.model_copy(update={"auth_enabled": True, "api_keys": {},
                                           "admin_key": SecretStr(ADMIN_KEY)})
        setup = prepare_auth(bare)
        assert setup.settings.admin_key is not None
        assert setup.settings.admin_key.get_secret_value() == ADMIN_KEY
