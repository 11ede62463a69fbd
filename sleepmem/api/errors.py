"""The one error shape every route answers with, for the OpenAPI document."""

from __future__ import annotations

from typing import Any

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
