"""API edges: a body limit before parsing, dates out of range, one error shape, no echoes."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest
import redis as redis_lib
from fastapi.testclient import TestClient

from sleepmem.api.app import create_app
from sleepmem.core.settings import Settings

LIMIT = 64 * 1024
SECRET = "sk-proj-Q3vX9mT2LpA8wZr5Kd7YbN1c"
SCOPE = {"tenant": "acme", "agent": "bot", "user": "ann"}


@pytest.fixture
def http(settings: Settings, redis: redis_lib.Redis) -> Iterator[TestClient]:
    cfg = settings.model_copy(update={"body_max_bytes": LIMIT})
    with TestClient(create_app(cfg)) as client:
        yield client


def _is_project_error(body: dict[str, object]) -> bool:
    error = body.get("error")
    return isinstance(error, dict) and "message" in error and "detail" not in body


class TestTheBodyLimit:
    def test_a_declared_length_over_the_limit_is_a_413_naming_it(self, http: TestClient) -> None:
        body = orjson.dumps([{**SCOPE, "content": "x" * 1000}] * 100)
        resp = http.post("/v1/events", content=body, headers={"content-type": "application/json"})
        assert resp.status_code == 413
        assert str(LIMIT) in resp.json()["error"]["message"]
        assert "SLEEPMEM_BODY_MAX_BYTES" in resp.json()["error"]["message"]

    def test_a_chunked_body_is_counted_as_it_arrives(self, http: TestClient) -> None:
        def chunks() -> Iterator[bytes]:
            yield b"["
            for _ in range(200):
                yield orjson.dumps({**SCOPE, "content": "y" * 1000}) + b","
            yield b"{}]"

        resp = http.post("/v1/events", content=chunks())
        assert resp.status_code == 413 and _is_project_error(resp.json())

    def test_a_body_under_the_limit_is_accepted(self, http: TestClient) -> None:
        resp = http.post("/v1/events", json=[{**SCOPE, "content": "z" * 1000}] * 10)
        assert resp.status_code == 202


class TestDatesOutOfRange:
    @pytest.mark.parametrize("when", ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00"])
    def test_an_event_time_past_the_range_is_a_422(self, http: TestClient, when: str) -> None:
        resp = http.post("/v1/events", json={**SCOPE, "content": "x", "at": when})
        assert resp.status_code == 422
        assert resp.json()["error"]["field"] == "at"

    def test_a_search_as_of_past_the_range_is_a_422(self, http: TestClient) -> None:
        body = {"query": "where", "scope": SCOPE, "as_of": "0001-01-01T00:00:00+05:00"}
        resp = http.post("/v1/search", json=body)
        assert resp.status_code == 422, resp.text
        assert resp.json()["error"]["field"] == "as_of"


class TestIdsAreCheckedAlikeOnEveryRoute:
    def test_a_trailing_newline_is_refused_by_search_as_by_events(self, http: TestClient) -> None:
        scope = {**SCOPE, "user": "ann\n"}
        events = http.post("/v1/events", json={**scope, "content": "x"})
        search = http.post("/v1/search", json={"query": "q", "scope": scope})
        assert events.status_code == search.status_code == 422, search.text


class TestOneErrorShapeWithoutEchoes:
    @pytest.mark.parametrize(
        ("method", "path", "body"),
        [
            ("post", "/v1/search", {"query": "q", "scope": SCOPE, "k": 0, "x": SECRET}),
            ("post", "/v1/search", {"query": SECRET, "scope": {"tenant": SECRET + "!"}}),
            ("post", "/v1/jobs/reconsolidate", {"scope": "t=" + SECRET + "/x", "apply": "maybe"}),
            ("post", "/v1/jobs/reconsolidate", {"scope": SCOPE, "job_id": SECRET + "!"}),
            ("post", "/v1/events", {**SCOPE, "kind": SECRET}),
            ("get", "/v1/jobs/" + SECRET, None),
            ("get", "/v1/nowhere/" + SECRET, None),
            ("delete", "/v1/search", None),
        ],
    )
    def test_every_refusal_uses_the_project_shape_and_never_repeats_the_input(
        self, http: TestClient, method: str, path: str, body: object
    ) -> None:
        resp = http.request(method, path, json=body)
        assert 400 <= resp.status_code < 500, resp.text
        assert _is_project_error(resp.json()), resp.text
        assert SECRET not in resp.text
