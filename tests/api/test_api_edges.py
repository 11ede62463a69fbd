"""API edges: a body limit before parsing, dates out of range, one error shape, no echoes."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest
import redis as redis_lib
from fastapi.testclient import TestClient
from pydantic import SecretStr

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

    @pytest.mark.parametrize("path", ["/v1/search", "/v1/jobs/reconsolidate", "/v1/flush"])
    def test_a_body_that_is_not_utf8_is_a_422_naming_the_body(
        self, http: TestClient, path: str
    ) -> None:
        resp = http.post(path, content=b"@!\xf3\xc2\xaf\xab\x07\xe1J",
                         headers={"content-type": "application/json"})
        assert resp.status_code == 422, resp.text
        assert resp.json()["error"] == {"field": "body", "message": "must be JSON in UTF-8"}

    def test_a_body_under_the_limit_is_accepted(self, http: TestClient) -> None:
        resp = http.post("/v1/events", json=[{**SCOPE, "content": "z" * 1000}] * 10)
        assert resp.status_code == 202


class TestDatesOutOfRange:
    @pytest.mark.parametrize("when", ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00"])
    def test_an_event_time_past_the_range_is_a_422(self, http: TestClient, when: str) -> None:
        resp = http.post("/v1/events", json={**SCOPE, "content": "x", "at": when})
        assert resp.status_code == 422
        assert resp.json()["error"]["field"] == "at"

    def test_an_event_time_as_unix_seconds_is_taken_as_the_document_says(
        self, http: TestClient
    ) -> None:
        at = http.get("/openapi.json").json()["components"]["schemas"]["Event"]["properties"]["at"]
        assert {"type": "number"} in at["anyOf"]
        resp = http.post("/v1/events", json={**SCOPE, "content": "x", "at": 1_700_000_000})
        assert resp.status_code == 202, resp.text
        bad = http.post("/v1/events", json={**SCOPE, "content": "x", "at": 2**70})
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "at"

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


MEMORY_ID = "0123456789abcdef0123456789abcdef"
CHECKPOINT = {"scope": {**SCOPE, "session": "s1"}, "state": {"goal": "ship"}, "base_version": 0}


class TestAScopeNamesEachLevelOnce:
    @pytest.mark.parametrize("method", ["get", "delete"])
    def test_a_repeated_level_is_a_422_never_the_last_one(
        self, http: TestClient, method: str
    ) -> None:
        resp = http.request(method, "/v1/memories", params={"scope": "t=acme/t=globex"})
        assert resp.status_code == 422, resp.text
        assert "more than once" in resp.json()["error"]["message"]


class TestNoAnswerEchoesAnIdOrAPath:
    @pytest.mark.parametrize(
        ("method", "suffix"), [("get", ""), ("get", "/explain"), ("delete", ""),
                               ("patch", ""), ("post", "/feedback")]
    )
    def test_a_404_does_not_repeat_the_memory_id(
        self, http: TestClient, method: str, suffix: str
    ) -> None:
        body = {"statement": "x"} if method == "patch" else (
            {"verdict": "wrong"} if suffix else None)
        resp = http.request(method, f"/v1/memories/{MEMORY_ID}{suffix}", json=body)
        assert resp.status_code == 404, resp.text
        assert MEMORY_ID not in resp.text

    def test_a_401_does_not_show_the_data_directory(
        self, settings: Settings, redis: redis_lib.Redis
    ) -> None:
        cfg = settings.model_copy(update={"auth_enabled": True,
                                          "api_keys": {"acme": SecretStr("k-acme-0123456789")}})
        with TestClient(create_app(cfg)) as client:
            resp = client.get("/v1/memories", params={"scope": "t=acme"})
        assert resp.status_code == 401
        assert str(settings.data_dir) not in resp.text
        assert "local-key.json" in resp.text  # still says where the key lives


class TestCheckpointsAndJobsRefuseWhatEventsRefuse:
    def test_a_nul_in_a_checkpoint_variable_is_a_422(self, http: TestClient) -> None:
        body = {**CHECKPOINT, "state": {"variables": {"k": "a\x00b"}}}
        resp = http.put("/v1/checkpoints", json=body)
        assert resp.status_code == 422, resp.text
        assert "NUL" in resp.json()["error"]["message"]

    def test_a_nul_in_an_outcome_or_an_evicted_message_is_a_422(self, http: TestClient) -> None:
        scope = CHECKPOINT["scope"]
        end = http.post("/v1/sessions/end", json={"scope": scope, "outcome": "a\x00"})
        evict = http.post("/v1/sessions/evict",
                          json={"scope": scope, "messages": [{"content": "a\x00"}]})
        assert end.status_code == evict.status_code == 422, (end.text, evict.text)

    def test_a_step_time_before_year_one_in_utc_is_a_422(self, http: TestClient) -> None:
        step = {"key": "k", "at": "0001-01-01T00:00:00+05:00"}
        resp = http.put("/v1/checkpoints",
                        json={**CHECKPOINT, "state": {"completed": [step]}})
        assert resp.status_code == 422, resp.text

    def test_a_base_version_past_what_sql_holds_is_a_422(self, http: TestClient) -> None:
        resp = http.put("/v1/checkpoints", json={**CHECKPOINT, "base_version": 2**70})
        assert resp.status_code == 422, resp.text
        assert resp.json()["error"]["field"] == "base_version"

    def test_a_reconsolidation_since_before_year_one_is_a_422(self, http: TestClient) -> None:
        body = {"scope": SCOPE, "since": "0001-01-01T00:00:00+05:00"}
        resp = http.post("/v1/jobs/reconsolidate", json=body)
        assert resp.status_code == 422, resp.text
        assert resp.json()["error"]["field"] == "since"

    def test_a_secret_as_an_idempotency_key_or_a_scope_id_is_refused(
        self, http: TestClient
    ) -> None:
        aws = "AKIAQ3VX9MT2LPA8WZR5"
        job = http.post("/v1/jobs/reconsolidate", json={"scope": SCOPE, "job_id": aws})
        ckpt = http.put("/v1/checkpoints",
                        json={**CHECKPOINT, "scope": {**SCOPE, "session": aws}})
        assert job.status_code == ckpt.status_code == 422, (job.text, ckpt.text)
        assert aws not in job.text + ckpt.text


class TestTheContextAtItsLargestK:
    def test_the_most_memories_a_context_may_ask_for_is_answered(self, http: TestClient) -> None:
        body = {"scope": SCOPE, "query": "where does Ann live?", "budget_tokens": 512, "k": 100}
        resp = http.post("/v1/context", json=body)
        assert resp.status_code == 200, resp.text


REPEATED = "t=acme/t=globex"


class TestARepeatedLevelIsRefusedOnEveryRoute:
    """Every route that takes a scope key string reads it with the same rule."""

    @pytest.mark.parametrize(("method", "path", "params", "body"), [
        ("get", "/v1/checkpoints", {"scope": REPEATED + "/s=s1"}, None),
        ("get", "/v1/checkpoints/history", {"scope": REPEATED + "/s=s1"}, None),
        ("get", "/v1/store/namespaces", {"scope": REPEATED}, None),
        ("post", "/v1/jobs/reconsolidate", None, {"scope": REPEATED}),
        ("post", "/v1/jobs/consolidate", None, {"scope": REPEATED}),
        ("post", "/v1/jobs/reconsolidate", None, {"scope": "t=acme/a=bot/a=eve"}),
        ("delete", "/v1/memories", {"scope": "t=acme/u=ann/u=bob"}, None),
    ])
    def test_it_is_a_422_never_the_last_level(
        self, http: TestClient, method: str, path: str,
        params: dict[str, str] | None, body: dict[str, str] | None,
    ) -> None:
        resp = http.request(method, path, params=params, json=body)
        assert resp.status_code == 422, resp.text
        assert "more than once" in resp.json()["error"]["message"]


class TestMoreAnswersEchoNoIdAndNoPath:
    JOB_ID = "0123456789abcdef0123456789abcdef"

    @pytest.mark.parametrize(("method", "path", "body"), [
        ("get", f"/v1/jobs/{JOB_ID}", None),
        ("post", f"/v1/jobs/{JOB_ID}/cancel", None),
        ("get", f"/v1/memories/{MEMORY_ID}/history", None),
        ("post", f"/v1/memories/{MEMORY_ID}/pin", None),
        ("post", f"/v1/memories/{MEMORY_ID}/unpin", None),
        ("post", f"/v1/conflicts/{MEMORY_ID}/resolve", {"keep": JOB_ID}),
        ("post", "/v1/jobs/sweep-everything/run", None),
    ])
    def test_a_refusal_repeats_no_id_from_the_path(
        self, http: TestClient, method: str, path: str, body: dict[str, str] | None
    ) -> None:
        resp = http.request(method, path, json=body)
        assert 400 <= resp.status_code < 500, resp.text
        for given in (self.JOB_ID, MEMORY_ID, "sweep-everything"):
            assert given not in resp.text, resp.text

    def test_a_403_shows_neither_the_scope_asked_for_nor_the_data_directory(
        self, settings: Settings, redis: redis_lib.Redis
    ) -> None:
        cfg = settings.model_copy(update={"auth_enabled": True,
                                          "api_keys": {"acme": SecretStr("k-acme-0123456789")}})
        other = {"tenant": "globex", "agent": "bot", "user": "eve-0042"}
        asks = [
            ("post", "/v1/search", None, {"query": "q", "scope": other}),
            ("get", "/v1/memories", {"scope": "t=globex/a=bot/u=eve-0042"}, None),
            ("delete", "/v1/memories", {"scope": "t=globex/a=bot/u=eve-0042"}, None),
            ("post", "/v1/jobs/reconsolidate", None, {"scope": other}),
            ("put", "/v1/checkpoints", None, {**CHECKPOINT, "scope": {**other, "session": "s"}}),
        ]
        with TestClient(create_app(cfg)) as client:
            for method, path, params, body in asks:
                resp = client.request(method, path, params=params, json=body,
                                      headers={"authorization": "Bearer k-acme-0123456789"})
                assert resp.status_code == 403, (path, resp.text)
                assert "eve-0042" not in resp.text and "globex" not in resp.text, resp.text
                assert str(settings.data_dir) not in resp.text


class TestTheJobBoundaryRefusesWhatEventsRefuse:
    @pytest.mark.parametrize("since", [
        "0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00+23:59",
    ])
    def test_a_since_utc_cannot_hold_is_a_422_and_no_job(
        self, http: TestClient, since: str
    ) -> None:
        resp = http.post("/v1/jobs/reconsolidate", json={"scope": SCOPE, "since": since})
        assert resp.status_code == 422, resp.text
        assert resp.json()["error"]["field"] == "since"
        assert http.get("/v1/jobs").json() == []

    @pytest.mark.parametrize("body", [
        {"scope": {**SCOPE, "user": "ann\x00"}},
        {"scope": "t=acme/a=bot/u=ann\x00"},
        {"scope": SCOPE, "job_id": "a\x00b"},
    ])
    def test_a_nul_in_a_job_request_is_a_422_and_no_job(
        self, http: TestClient, body: dict[str, object]
    ) -> None:
        resp = http.post("/v1/jobs/reconsolidate", json=body)
        assert resp.status_code == 422, resp.text
        assert http.get("/v1/jobs").json() == []

    def test_a_nul_in_a_checkpoint_scope_or_goal_is_a_422(self, http: TestClient) -> None:
        for body in ({**CHECKPOINT, "scope": {**SCOPE, "session": "s\x00"}},
                     {**CHECKPOINT, "state": {"goal": "ship\x00"}},
                     {**CHECKPOINT, "state": {"completed": [{"key": "k\x00"}]}}):
            resp = http.put("/v1/checkpoints", json=body)
            assert resp.status_code == 422, resp.text
