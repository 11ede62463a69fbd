"""``POST /v1/events``: validate, check the tenant, XADD, answer 202. Nothing else."""

from __future__ import annotations

import time
from typing import Any

import orjson
from fastapi import APIRouter, Request, Response

from sleepmem.api.auth import CallerTenant, KeyRing
from sleepmem.api.state import api_state
from sleepmem.core.errors import ValidationError
from sleepmem.core.logs import get_logger
from sleepmem.core.metrics import EVENTS_ACCEPTED
from sleepmem.ingest.validation import validate_event, validate_events
from sleepmem.models.events import Event
from sleepmem.models.positions import latest

log = get_logger("sleepmem.api.ingest")
router = APIRouter(prefix="/v1", tags=["events"])
EVENTS_PATH = "/v1/events"


def _event_schemas() -> dict[str, Any]:
    schema = Event.model_json_schema(ref_template="#/components/schemas/{model}")
    return {"Event": schema, **schema.pop("$defs", {})}


# Merged into the app's OpenAPI components: the body is parsed by hand (orjson, all-or-
# nothing batch validation), so FastAPI cannot derive its schema from a parameter.
EVENT_SCHEMAS = _event_schemas()
_BODY_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {"$ref": "#/components/schemas/Event"},
        {"type": "array", "items": {"$ref": "#/components/schemas/Event"}},
        {
            "type": "object",
            "properties": {
                "events": {"type": "array", "items": {"$ref": "#/components/schemas/Event"}}
            },
            "required": ["events"],
        },
    ]
}
_ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
        },
        "errors": {"type": "array", "items": {"type": "object"}},
    },
}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ERROR_SCHEMA}}}


@router.post(
    "/events",
    status_code=202,
    summary="Append one event or a batch to the event log",
    description=(
        'Accepts one event object, a list of events, or {"events": [...]}. Answers 202 '
        "with the event ids once they are in the durable log; consolidation happens later. "
        "A batch is all or nothing: one invalid event and none is written."
    ),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _BODY_SCHEMA}},
        },
    },
    responses={
        202: {
            "description": "Accepted",
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "properties": {
                            "ids": {"type": "array", "items": {"type": "string"}},
                            "position": {"type": ["string", "null"], "description": (
                                "stream position of the last event: POST /v1/flush, or "
                                "min_position on search and context, wait for it")},
                        },
                    }
                }
            },
        },
        401: _error("No or invalid API key"),
        403: _error("The key belongs to another tenant"),
        422: _error("Invalid event; every bad field is listed"),
        503: _error("The event log is unavailable; retry"),
    },
)
async def post_events(request: Request, tenant: CallerTenant) -> Response:
    started = time.perf_counter()
    state = api_state(request)
    body = await request.body()
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise ValidationError(
            "body", 'must be JSON: an event object, a list of events or {"events": [...]}'
        ) from None
    if isinstance(data, dict) and "events" in data:
        data = data["events"]
        if not isinstance(data, list):
            raise ValidationError("events", "must be a list of event objects")
    if isinstance(data, list):
        events = validate_events(data, limits=state.limits, max_events=state.max_batch)
    else:
        events = [validate_event(data, limits=state.limits)]
    KeyRing.check_tenant(tenant, events)
    positions: list[str] = []
    if events:
        positions = await state.appender.append(events)
        EVENTS_ACCEPTED.inc(len(events))
    ids = [e["event_id"] for e in events]
    log.info(
        "ingest.accepted",
        tenant=tenant or (events[0]["tenant"] if events else ""),
        events=len(ids),
        ms=round((time.perf_counter() - started) * 1000, 3),
    )
    # The position of the last append: flush and min_position wait for it.
    position = latest(*positions) if positions else None
    return Response(orjson.dumps({"ids": ids, "position": position}), status_code=202,
                    media_type="application/json")
