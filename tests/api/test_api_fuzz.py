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
from hypothesis.errors import FlakyStrategyDefinition, Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from sleepmem.api.app import create_app
from sleepmem.core.settings import Settings


@pytest.fixture
def api_schema(settings: Settings, redis: redis_lib.Redis) -> Iterator[Any]:
    app = create_app(settings.model_copy(update={"body_max_bytes": 256 * 1024}))
    with TestClient(app):  # runs the lifespan: the app's resources exist for every call
        yield schemathesis.openapi.from_asgi("/openapi.json", app)


MAX_EXAMPLES = int(os.environ.get("SLEEPMEM_FUZZ_EXAMPLES", "15"))
# Conformance: every status code answered is documented for its operation, and the body,
# its content type and the documented headers match what the document says.
CHECKS = [status_code_conformance, content_type_conformance, response_schema_conformance,
          response_headers_conformance]
# Requests the document forbids (a wrong type, a missing field, a value out of range) must
# be refused with a 4xx, and that answer conforms too.
MODES = {GenerationMode.POSITIVE: CHECKS,
         GenerationMode.NEGATIVE: [*CHECKS, negative_data_rejection]}


def _fuzz(operation: Any, mode: GenerationMode, checks: list[Any],
          calls: list[tuple[str, str, int]]) -> str | None:
    """MAX_EXAMPLES requests of one operation in one mode; the failure, if any, in words."""

    @given(case=operation.as_strategy(generation_mode=mode))
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
        case.validate_response(response, checks=checks)

    # Every operation runs, so one report names every failing one (the nightly figures).
    try:
        try:
            run()
        except FlakyStrategyDefinition:
            # Hypothesis' own generation drew differently on replay (seen once in 17,069
            # calls at 300 examples, not reproducible alone): not an answer of the API, so
            # the operation is run once more; a second one is reported.
            run()
    except Unsatisfiable:
        # Negative mode: nothing in the operation can be made invalid (no parameters, no
        # body, only free strings), so there is no request to send.
        return None
    # An assertion, or schemathesis' failures (a BaseExceptionGroup, not an Exception).
    except (Exception, BaseExceptionGroup) as exc:
        found = exc.exceptions if isinstance(exc, BaseExceptionGroup) else (exc,)
        return "; ".join(f"{type(e).__name__}: {str(e)[:400]}" for e in found)
    return None


@pytest.mark.slow
def test_no_server_error_and_responses_match_the_schema(api_schema: Any) -> None:
    """Every operation, MAX_EXAMPLES generated requests in each mode (positive, negative)."""
    calls: list[tuple[str, str, int]] = []
    failures: list[str] = []
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 6

    for operation in operations:
        for mode, checks in MODES.items():
            failure = _fuzz(operation, mode, checks, calls)
            if failure is not None:
                failures.append(f"{operation.method.upper()} {operation.path} ({mode.value}): "
                                f"{failure}")
    server_errors = sum(1 for *_, status in calls if status >= 500)
    print(f"\nfuzz: {len(operations)} operations, {len(calls)} calls, {MAX_EXAMPLES} examples "
          f"each per mode ({', '.join(m.value for m in MODES)}); {server_errors} server errors; "
          f"{len(failures)} failing operations")
    assert failures == [], "\n".join(failures)
    assert len(calls) >= len(operations)
