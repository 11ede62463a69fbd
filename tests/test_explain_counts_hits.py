"""explain counts the retrieval that just happened: a memory a search has just returned is
not "never retrieved yet", though the refresh applies hits to SQL only later."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from sleepmem.api.app import create_app
from sleepmem.evals.harness import ingest
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
    def test_a_memory_just_returned_by_a_search_is_explained_as_retrieved(
        self, http: TestClient
    ) -> None:
        memory_id = found_id(http)
        body = explained(http, memory_id)
        assert "never retrieved yet" not in str(body["why"])
        assert "last used" in str(body["why"])
        assert access_count(body) == 1

    def test_before_any_search_it_is_never_retrieved(
        self, http: TestClient, resources: Resources
    ) -> None:
        memory_id = found_id(http)
        resources.hits.flush()
        resources.redis.delete(resources.keys.hits)  # as if that search never happened
        body = explained(http, memory_id)
        assert "never retrieved yet" in str(body["why"]) and access_count(body) == 0

    def test_a_hit_the_refresh_applied_is_counted_once(
        self, http: TestClient, resources: Resources
    ) -> None:
        memory_id = found_id(http)
        resources.hits.flush()
        refresh_job(resources, "test-refresh")  # applies the hit to SQL, trims the stream
        assert access_count(explained(http, memory_id)) == 1
        found_id(http)
        assert access_count(explained(http, memory_id)) == 2
