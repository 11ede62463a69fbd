"""A bounded Schemathesis run against /openapi.json: no server errors, responses conform.

The long version is ``schemathesis run http://127.0.0.1:8787/openapi.json`` against a server.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis as redis_lib
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
)

from sleepmem.api.app import create_app
from sleepmem.core.settings import Settings


@pytest.fixture
def api_schema(settings: Settings, redis: redis_lib.Redis) -> Iterator[Any]:
    app = create_app(settings.model_copy(update={"body_max_bytes": 256 * 1024}))
    with TestClient(app):  # runs the lifespan: the app's resources exist for every call
        yield schemathesis.openapi.from_asgi("/openapi.json", app)


MAX_EXAMPLES = 15


def test_no_server_error_and_responses_match_the_schema(api_schema: Any) -> None:
    """Every operation, MAX_EXAMPLES generated requests each (negative ones too)."""
    calls: list[tuple[str, str, int]] = []
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 6

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=MAX_EXAMPLES,
            deadline=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        def run(case: Any) -> None:
            response = case.call()
            calls.append((case.method, case.path, response.status_code))
            assert response.status_code < 500, (case.method, case.path, response.text[:300])
            case.validate_response(
                response, checks=[content_type_conformance, response_schema_conformance]
            )

        run()
    assert len(calls) >= len(operations)
