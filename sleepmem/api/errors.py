"""The one error shape every route answers with, for the OpenAPI document."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi.exceptions import RequestValidationError

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
            "required": ["message"],
        },
        "errors": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["error"],
}


def error_response(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": ERROR_SCHEMA}}}


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: error_response("No or invalid API key; the message says what to set"),
    403: error_response("The key belongs to another tenant"),
    404: error_response("No such memory or job (or it belongs to another tenant)"),
    422: error_response("Invalid input; `field` names it and `message` says how to fix it"),
}


def field_name(loc: Sequence[int | str]) -> str:
    """``events[2].content``: names joined by dots, list positions in brackets."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out or "body"


def request_problems(exc: RequestValidationError) -> list[dict[str, str]]:
    """``{field, message}`` per problem FastAPI found in a request, the field by its name."""
    problems = []
    for err in exc.errors():
        # The message of the rule only: pydantic's own messages never hold the input, and
        # the "input" and "ctx" entries (which do) are dropped.
        message = str(err.get("msg", "")).removeprefix("Value error, ")
        loc = list(err.get("loc", ()))
        if loc and loc[0] in ("body", "query", "path"):
            loc = loc[1:]  # where FastAPI found it, not part of the field's name
        if err.get("type") == "json_invalid":
            # Its location is a character offset into the body, not a field.
            at = f" at character {loc[0]}" if loc else ""
            problems.append({"field": "body", "message": f"must be JSON: {message}{at}"})
            continue
        problems.append({"field": field_name(loc), "message": message})
    return problems
