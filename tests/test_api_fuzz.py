"""A bounded Schemathesis run against /openapi.json: no server errors, responses conform.

The CI runs MAX_EXAMPLES requests per operation; ``scripts/fuzz-api-nightly`` runs the same
test with a larger budget (SLEEPMEM_FUZZ_EXAMPLES) and prints its figures.
"""

from __future__ import annotations

import os
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


MAX_EXAMPLES = int(os.environ.get("SLEEPMEM_FUZZ_EXAMPLES", "15"))


def test_no_server_error_and_responses_match_the_schema(api_schema: Any) -> None:
    """Every operation, MAX_EXAMPLES generated requests each (negative ones too)."""
    calls: list[tuple[str, str, int]] = []
    failures: list[str] = []
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

        # Every operation runs, so one report names every failing one (the nightly figures).
        try:
            run()
        except Exception as exc:  # an assertion, or schemathesis' conformance failure
            failures.append(f"{operation.method.upper()} {operation.path}: "
                            f"{type(exc).__name__}: {str(exc)[:300]}")
    server_errors = sum(1 for *_, status in calls if status >= 500)
    print(f"\nfuzz: {len(operations)} operations, {len(calls)} calls, {MAX_EXAMPLES} examples "
          f"each; {server_errors} server errors; {len(failures)} failing operations")
    assert failures == [], "\n".join(failures)
    assert len(calls) >= len(operations)
