"""An HTTP validation error names the field by its name: a body that is not JSON is the
body (with where it breaks), never the character offset pydantic reports as a location,
and a nested field reads as it would in code."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from sleepmem.api.app import create_app
from sleepmem.api.errors import field_name
from sleepmem.resources import Resources

JSON = {"Content-Type": "application/json"}


@pytest.fixture
def http(resources: Resources) -> Iterator[TestClient]:
    with TestClient(create_app(resources=resources)) as client:
        yield client


class TestFieldNames:
    @pytest.mark.parametrize("path", ["/v1/search", "/v1/context", "/v1/flush"])
    def test_a_body_that_is_not_json_is_reported_as_the_body_with_where_it_breaks(
        self, http: TestClient, path: str
    ) -> None:
        broken = '{"query": "seat", "scope": {"tenant": "acme"'  # cut off at 41
        resp = http.post(path, content=broken, headers=JSON)
        assert resp.status_code == 422
        error = resp.json()["error"]
        assert error["field"] == "body"
        assert error["message"].startswith("must be JSON") and "character" in error["message"]
        assert "seat" not in resp.text  # the message names the rule, never the input

    def test_a_nested_field_is_named_by_its_path(self, http: TestClient) -> None:
        resp = http.post("/v1/context", json={"query": "seat", "budget_tokens": 100,
                                              "scope": {"agent": "bot"}})
        assert resp.status_code == 422
        assert resp.json()["error"]["field"] == "scope.tenant"

    def test_a_field_named_like_a_location_keeps_its_name(self, http: TestClient) -> None:
        resp = http.post("/v1/search", json={"scope": {"tenant": "acme"}, "query": None})
        assert resp.status_code == 422 and resp.json()["error"]["field"] == "query"
        resp = http.post("/v1/context", json={"scope": {"tenant": "acme"}, "budget_tokens": 9})
        assert resp.status_code == 422 and resp.json()["error"]["field"] in ("query",
                                                                            "budget_tokens")

    def test_a_wrong_type_in_a_list_names_its_position(self, http: TestClient) -> None:
        resp = http.post("/v1/search", json={"query": "seat", "scope": {"tenant": "acme"},
                                             "types": ["fact", 7]})
        assert resp.status_code == 422
        assert resp.json()["error"]["field"] == "types[1]"

    def test_names_join_with_dots_and_list_positions_take_brackets(self) -> None:
        assert field_name(["events", 3, "meta", "source"]) == "events[3].meta.source"
        assert field_name([0, "content"]) == "[0].content"
        assert field_name([]) == "body"
