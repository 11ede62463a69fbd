"""Every number that reaches SQL is range-checked: each integer and number field of the
OpenAPI document, in a query or a body, is sent values no column or LIMIT holds, and the
answer is a 4xx in the project's error shape, never a 500.

The fields come from the OpenAPI document, not from a list here: a new numeric field is
probed as soon as it is declared. Bodies are the write-guard test's valid ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from test_write_guard import BODIES, OWNER, Body
from test_write_guard import client as client  # the fixture: the same seeded app

# Past int64 (SQLite's and PostgreSQL's widest integer), its edge, and far below zero.
HUGE = (2**70, 2**63, -(2**70))
FLOATS = (1e308, -1e308)

# A valid request per GET operation with numeric query parameters, without them.
QUERIES: dict[str, dict[str, Any]] = {
    "/v1/jobs": {},
    "/v1/memories": {"scope": OWNER.key},
    "/v1/inspect/memories": {"tenant": "acme"},
    "/v1/inspect/jobs": {"tenant": "acme"},
    "/v1/checkpoints/history": {"scope": OWNER.key + "/s=s1"},
    "/v1/store/namespaces": {"scope": OWNER.key},
}
# Bodies of operations the write-guard test leaves out (they store no text).
EXTRA: dict[tuple[str, str], tuple[str, Body]] = {
    ("POST", "/v1/flush"): ("/v1/flush", lambda: {"scope": OWNER.levels(), "timeout_s": 0}),
}
REQUESTS = {**BODIES, **EXTRA}


def _numeric(schema: dict[str, Any], comps: dict[str, Any], path: tuple[str, ...],
             seen: frozenset[str] = frozenset()) -> Iterator[tuple[tuple[str, ...], str]]:
    """Each (field path, type) of an integer or number under ``schema``; top-level object
    properties only descend, arrays and maps are not probed (none holds a number today)."""
    ref = schema.get("$ref")
    if ref is not None:
        name = ref.rsplit("/", 1)[-1]
        if name not in seen:
            yield from _numeric(comps[name], comps, path, seen | {name})
        return
    if schema.get("type") in ("integer", "number"):
        yield path, schema["type"]
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key, []):
            yield from _numeric(sub, comps, path, seen)
    for name, sub in schema.get("properties", {}).items():
        yield from _numeric(sub, comps, (*path, name), seen)


def _cases(spec: dict[str, Any]) -> list[tuple[str, str, str, tuple[str, ...], str]]:
    comps = spec["components"]["schemas"]
    out = []
    for template, ops in spec["paths"].items():
        for method, op in ops.items():
            for param in op.get("parameters", []):
                for field, kind in _numeric(param["schema"], comps, (param["name"],)):
                    out.append((method.upper(), template, "query", field, kind))
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
            if "schema" in body:
                for field, kind in _numeric(body["schema"], comps, ()):
                    out.append((method.upper(), template, "body", field, kind))
    return sorted(set(out))


def _set(body: dict[str, Any], field: tuple[str, ...], value: object) -> dict[str, Any]:
    node = body
    for name in field[:-1]:
        node = node.setdefault(name, {})
    node[field[-1]] = value
    return body


class TestEveryNumberIsRangeChecked:
    def test_every_numeric_field_is_probed(self, client: TestClient) -> None:
        cases = _cases(client.app.openapi())  # type: ignore[attr-defined]
        assert cases, "the OpenAPI document declares no numbers"
        for method, template, where, _field, _kind in cases:
            known = template in QUERIES if where == "query" else (method, template) in REQUESTS
            assert known, f"{method} {template}: no valid request to probe its numbers with"

    def test_no_number_out_of_range_is_a_server_error(
        self, client: TestClient
    ) -> None:
        # The same app, answering a server error as a 500 instead of raising it here: every
        # failing field is listed, not only the first.
        http = TestClient(client.app, raise_server_exceptions=False)
        failures: list[str] = []
        for method, template, where, field, kind in _cases(
            client.app.openapi()  # type: ignore[attr-defined]
        ):
            values = HUGE + (FLOATS if kind == "number" else ())
            for value in values:
                if where == "query":
                    resp = http.request(method, template,
                                        params={**QUERIES[template], field[0]: value})
                else:
                    path, body = REQUESTS[(method, template)]
                    resp = http.request(method, path, json=_set(body(), field, value))
                shown = f"{method} {template} {'.'.join(field)}={value}: {resp.status_code}"
                if resp.status_code >= 500:
                    failures.append(f"{shown} {resp.text[:200]}")
                elif resp.status_code >= 400:
                    error = resp.json().get("error")
                    if not isinstance(error, dict):
                        failures.append(f"{shown} not the project's error shape")
        assert failures == [], "\n".join(failures)


class TestNumbersTheSchemaCarriesAsText:
    """Numbers sent inside strings or untyped fields: a stream position, a page cursor, a
    search's k. The walk above cannot see them, so they are named here."""

    @pytest.mark.parametrize(("method", "path", "body", "params"), [
        ("post", "/v1/search", {"query": "q", "scope": OWNER.levels(), "k": 2**70}, None),
        ("post", "/v1/search", {"query": "q", "scope": OWNER.levels(), "k": -(2**70)}, None),
        ("post", "/v1/search", {"query": "q", "scope": OWNER.levels(),
                                "min_position": f"{2**70}-{2**70}", "wait_s": 0}, None),
        ("post", "/v1/flush", {"scope": OWNER.levels(), "position": f"{2**70}-0",
                               "timeout_s": 0}, None),
        ("get", "/v1/memories", None, {"scope": OWNER.key, "cursor": str(2**70)}),
        ("get", "/v1/memories", None, {"scope": OWNER.key, "cursor": f"{2**70}|{'a' * 32}"}),
    ])
    def test_an_out_of_range_number_in_text_is_a_4xx(
        self, client: TestClient, method: str, path: str,
        body: dict[str, Any] | None, params: dict[str, Any] | None,
    ) -> None:
        http = TestClient(client.app, raise_server_exceptions=False)
        resp = http.request(method, path, json=body, params=params)
        assert resp.status_code < 500, resp.text
        if resp.status_code >= 400:
            assert isinstance(resp.json().get("error"), dict), resp.text
