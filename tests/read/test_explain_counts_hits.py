"""explain counts the retrieval that just happened: a memory a search has just returned is
not "never retrieved yet", though the refresh applies hits to SQL only later."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from sleepmem.api.app import create_app
from sleepmem.evals.harness import ingest
from sleepmem.models import Memory
from sleepmem.resources import Resources
from sleepmem.services import refresh_job

ANN = {"tenant": "acme", "agent": "bot", "user": "ann"}


@pytest.fixture
def http(resources: Resources) -> Iterator[TestClient]:
    ingest(resources, [{**ANN, "session": "s1", "role": "user",
                        "content": "I am allergic to peanuts."}])
    with TestClient(create_app(resources=resources)) as client:
        yield client


def found_id(http: TestClient) -> str:
    answer = http.post("/v1/search", json={"query": "allergy", "scope": ANN, "k": 1})
    assert answer.status_code == 200
    return str(answer.json()["cards"][0]["id"])


def explained(http: TestClient, memory_id: str) -> dict[str, object]:
    answer = http.get(f"/v1/memories/{memory_id}/explain")
    assert answer.status_code == 200
    body: dict[str, object] = answer.json()
    return body


def access_count(body: dict[str, object]) -> int:
    versions = body["versions"]
    assert isinstance(versions, list)
    return int(versions[-1]["access_count"])


class TestExplainCountsHits:
    def test_a_memory_is_retrieved_from_the_moment_a_search_returns_it(
        self, http: TestClient, resources: Resources
    ) -> None:
        with Session(resources.engine) as s:
            (memory_id,) = s.exec(select(Memory.id)).all()
        before = explained(http, memory_id)
        assert "never retrieved yet" in str(before["why"]) and access_count(before) == 0
        assert found_id(http) == memory_id
        after = explained(http, memory_id)
        assert "never retrieved yet" not in str(after["why"])
        assert "last used" in str(after["why"]) and access_count(after) == 1

    def test_a_hit_the_refresh_applied_is_counted_once(
        self, http: TestClient, resources: Resources
    ) -> None:
        memory_id = found_id(http)
        resources.hits.flush()
        refresh_job(resources, "test-refresh")  # applies the hit to SQL, trims the stream
        assert access_count(explained(http, memory_id)) == 1
        found_id(http)
        assert access_count(explained(http, memory_id)) == 2
