"""HTTP: re-consolidation jobs, erasure receipts and explain, with per-tenant keys."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
import redis as redis_lib
from fastapi.testclient import TestClient
from lifecycle_support import T0, Clock, current, ingest, say
from pydantic import SecretStr
from sqlalchemy.engine import Engine

from sleepmem.api.app import create_app
from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.models import Scope
from sleepmem.resources import Resources, build_resources
from sleepmem.services import run_reconsolidation


@pytest.fixture
def settings(settings: Settings, sql_url: str, engine: Engine) -> Settings:
    """Every test here runs on SQLite and again on PostgreSQL (``engine`` empties the shared
    PostgreSQL database afterwards)."""
    return settings.model_copy(update={"database_url": sql_url})


ACME, GLOBEX = "acme-key-0123456789", "globex-key-0123456789"
ANN = Scope(tenant="acme", agent="bot", user="ann")


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def res(settings: Settings, redis: redis_lib.Redis) -> Iterator[Resources]:
    secured = settings.model_copy(update={
        "auth_enabled": True,
        "api_keys": {"acme": SecretStr(ACME), "globex": SecretStr(GLOBEX)},
    })
    resources = build_resources(secured)
    resources.clock = Clock(T0 + timedelta(hours=1))
    yield resources
    resources.close()


@pytest.fixture
def http(res: Resources) -> Iterator[TestClient]:
    with TestClient(create_app(resources=res)) as client:
        yield client


@pytest.fixture
def memory_id(res: Resources, redis: redis_lib.Redis, keys: Keys) -> str:
    ports = res.ports(res.clock)
    ingest(res.redis, res.keys, res.engine, res.settings, ports,
           [say("I live in Beijing.", at=T0, scope=ANN),
            say("I work as a nurse at Saint Aldhelm hospital.", at=T0, scope=ANN)])
    (mem,) = [m for m in current(res.engine) if "Beijing" in m.statement]
    return mem.id


class TestReconsolidationJobs:
    def test_a_job_is_queued_then_reports_progress_and_its_diff(
        self, http: TestClient, res: Resources, memory_id: str
    ) -> None:
        queued = http.post("/v1/jobs/reconsolidate", headers=bearer(ACME),
                           json={"scope": ANN.key, "job_id": "nightly-ann-1"})
        assert queued.status_code == 202 and queued.headers["location"] == "/v1/jobs/nightly-ann-1"
        assert queued.json()["status"] == "queued"
        again = http.post("/v1/jobs/reconsolidate", headers=bearer(ACME),
                          json={"scope": ANN.key, "job_id": "nightly-ann-1"})
        assert again.json()["created_at"] == queued.json()["created_at"]  # idempotent
        run_reconsolidation(res, "nightly-ann-1")
        done = http.get("/v1/jobs/nightly-ann-1", headers=bearer(ACME)).json()
        assert done["status"] == "done" and done["done"] == done["total"] == 2
        assert done["result"]["counts"]["unchanged"] == len(current(res.engine)) == 3

    def test_another_tenant_can_neither_start_nor_see_a_job(
        self, http: TestClient, res: Resources, memory_id: str
    ) -> None:
        refused = http.post("/v1/jobs/reconsolidate", headers=bearer(GLOBEX),
                            json={"scope": ANN.key})
        assert refused.status_code == 403
        http.post("/v1/jobs/reconsolidate", headers=bearer(ACME),
                  json={"scope": ANN.key, "job_id": "j1"})
        assert http.get("/v1/jobs/j1", headers=bearer(GLOBEX)).status_code == 404
        assert http.get("/v1/jobs/j1").status_code == 401


    def test_two_tenants_may_name_a_job_alike_and_each_sees_only_its_own(
        self, http: TestClient, res: Resources
    ) -> None:
        bob = Scope(tenant="globex", agent="bot", user="bob")
        first = http.post("/v1/jobs/reconsolidate", headers=bearer(ACME),
                          json={"scope": ANN.key, "job_id": "nightly"})
        second = http.post("/v1/jobs/reconsolidate", headers=bearer(GLOBEX),
                           json={"scope": bob.key, "job_id": "nightly"})
        assert first.status_code == second.status_code == 202, second.text
        assert first.json()["tenant"] == "acme" and second.json()["tenant"] == "globex"
        assert second.headers["location"] == "/v1/jobs/nightly"
        mine = http.get("/v1/jobs/nightly", headers=bearer(GLOBEX)).json()
        assert mine["tenant"] == "globex" and mine["scope_key"] == bob.key
        theirs = http.get("/v1/jobs/nightly", headers=bearer(ACME)).json()
        assert theirs["tenant"] == "acme" and theirs["scope_key"] == ANN.key
        missing = http.get("/v1/jobs/never-made", headers=bearer(GLOBEX))
        assert missing.status_code == 404 and "never-made" not in missing.text


class TestExplainAndErase:
    def test_explain_answers_the_owner_and_hides_from_others(
        self, http: TestClient, memory_id: str
    ) -> None:
        mine = http.get(f"/v1/memories/{memory_id}/explain", headers=bearer(ACME))
        assert mine.status_code == 200 and mine.json()["why"].startswith("active")
        assert mine.json()["events"][0]["content"] == "I live in Beijing."
        theirs = http.get(f"/v1/memories/{memory_id}/explain", headers=bearer(GLOBEX))
        assert theirs.status_code == 404

    def test_deleting_a_scope_returns_a_receipt_and_leaves_nothing_to_explain(
        self, http: TestClient, memory_id: str
    ) -> None:
        assert http.delete("/v1/memories", params={"scope": ANN.key},
                           headers=bearer(GLOBEX)).status_code == 403
        receipt = http.delete("/v1/memories", params={"scope": ANN.key}, headers=bearer(ACME))
        assert receipt.status_code == 200
        body = receipt.json()
        assert body["removed"]["memories"] == 3 and body["removed"]["raw_events"] == 2
        assert "Beijing" not in receipt.text
        gone = http.get(f"/v1/memories/{memory_id}/explain", headers=bearer(ACME))
        assert gone.status_code == 404 and "erased" in gone.text

    def test_deleting_one_memory_returns_its_receipt(
        self, http: TestClient, res: Resources, memory_id: str
    ) -> None:
        assert http.delete(f"/v1/memories/{memory_id}", headers=bearer(GLOBEX)).status_code == 404
        receipt = http.delete(f"/v1/memories/{memory_id}", headers=bearer(ACME)).json()
        assert receipt["op"] == "ERASE_MEMORY" and receipt["memory_id"] == memory_id
        statements = [m.statement for m in current(res.engine)]
        assert any("nurse" in s for s in statements)
        assert not any("Beijing" in s for s in statements)

    def test_a_malformed_scope_is_a_422_naming_the_field(self, http: TestClient) -> None:
        bad = http.delete("/v1/memories", params={"scope": "nonsense"}, headers=bearer(ACME))
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "scope"
