"""The raw event an agent emits: the only thing on the request path."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, NotRequired

import orjson
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    WithJsonSchema,
    with_config,
)
from typing_extensions import TypedDict

from sleepmem.core.redaction import MAX_GROWTH, redact, redact_json
from sleepmem.models.scope import IDENT_PATTERN, Scope

Ident = Annotated[str, StringConstraints(pattern=IDENT_PATTERN)]
OptionalIdent = Annotated[str, StringConstraints(pattern=f"^(?:{IDENT_PATTERN[1:-1]})?$")]


class EventKind(StrEnum):
    message = "message"
    tool_result = "tool_result"
    observation = "observation"
    feedback = "feedback"
    outcome = "outcome"
    session_end = "session_end"


class Role(StrEnum):
    user = "user"
    assistant = "assistant"
    tool = "tool"
    system = "system"


@dataclass(frozen=True, slots=True)
class Limits:
    content_max_bytes: int = 32 * 1024
    meta_max_bytes: int = 8 * 1024


DEFAULT_LIMITS = Limits()


def new_event_id() -> str:
    return uuid.uuid4().hex


def utcnow() -> datetime:
    return datetime.now(UTC)


_NUL = "\x00"
NUL_RULE = (
    "holds a NUL character (\\x00), which PostgreSQL cannot store; remove it or escape it "
    "(for example as \\u0000 inside the text)"
)
SURROGATE_RULE = (
    "holds a lone surrogate (a code point in U+D800-U+DFFF), which is not valid UTF-8; "
    "decode the text with errors='replace' before sending it"
)


def check_content(v: str, limits: Limits) -> str:
    """``content``'s rules (the field's validator, callable without pydantic): ``v`` or a
    ValueError naming the rule it broke."""
    # Refused here, before the 202: every backend must be able to store what was accepted.
    if _NUL in v:
        raise ValueError("content " + NUL_RULE)
    if not v.isascii():
        try:
            encoded = v.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("content " + SURROGATE_RULE) from None
    else:
        encoded = b""
    limit = limits.content_max_bytes
    # UTF-8 spends at most 4 bytes a character, and redaction grows a text MAX_GROWTH times
    # at most: most events are far enough under the limit to skip measuring.
    if len(v) * 4 * MAX_GROWTH <= limit:
        return v
    size = len(encoded or v.encode("utf-8"))
    if size > limit:
        raise ValueError(
            f"content is {size} bytes, over the limit of {limit}; split it into several "
            "events or raise SLEEPMEM_CONTENT_MAX_BYTES"
        )
    # What is stored is the redacted text, and a marker may be longer than its secret:
    # refused now, before the 202, rather than dead-lettered later.
    clean = redact(v)
    if clean.kinds and (grown := len(clean.text.encode("utf-8"))) > limit:
        raise ValueError(
            f"content is {grown} bytes after its secrets were replaced by [REDACTED:kind] "
            f"markers, over the limit of {limit}; split it into several events or raise "
            "SLEEPMEM_CONTENT_MAX_BYTES"
        )
    return v


def _content_size(v: str, info: ValidationInfo) -> str:
    return check_content(v, _limits(info))


def aware_time(v: datetime) -> datetime:
    """``v`` in UTC, or a ValueError when UTC cannot hold it (a field validator's rule)."""
    # A naive time is taken as UTC: agents mostly log in UTC and refusing would lose data.
    try:
        return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00:00+05:00 is before year 1 in UTC
        raise ValueError(
            "is outside the supported range: give a UTC time between 0001-01-02 and 9999-12-30"
        ) from None


def check_meta(v: dict[str, Any], limits: Limits) -> dict[str, Any]:
    """``meta``'s rules, as :func:`check_content` for ``content``."""
    limit = limits.meta_max_bytes
    try:
        dumped = orjson.dumps(v)
    except TypeError as exc:
        raise ValueError(f"meta must be a JSON object of plain values: {exc}") from None
    size = len(dumped)
    if b"\\u0000" in dumped:  # orjson writes a NUL, in a key or a value, as \u0000
        raise ValueError("meta " + NUL_RULE)
    if size > limit:
        raise ValueError(
            f"meta is {size} bytes of JSON, over the limit of {limit}; keep meta small "
            "and put text in content"
        )
    if size * MAX_GROWTH > limit:
        clean = redact_json(v)
        if clean is not v and (grown := len(orjson.dumps(clean))) > limit:
            raise ValueError(
                f"meta is {grown} bytes of JSON after its secrets were replaced by "
                f"[REDACTED:kind] markers, over the limit of {limit}; keep meta small and "
                "put text in content"
            )
    return v


def _meta_size(v: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
    return check_meta(v, _limits(info))


# The field rules, shared by the model and the wire form below. Name rules are core (Rust)
# patterns, not Python validators: validation is most of the cost of an emit, and
# sleepmem.ingest.validation turns a mismatch into the rule in words.
Content = Annotated[str, AfterValidator(_content_size)]
# Its schema says what is accepted: an ISO 8601 string, or Unix time as a number (pydantic's
# rule, which the API has always taken; the document said string only).
EventTime = Annotated[datetime, AfterValidator(aware_time), WithJsonSchema({
    "anyOf": [{"type": "string", "format": "date-time"}, {"type": "number"}],
    "description": "ISO 8601 time (naive = UTC), or Unix time as a number: seconds, or "
                   "milliseconds above 2e10",
})]
Meta = Annotated[dict[str, Any], AfterValidator(_meta_size)]


class Event(BaseModel):
    """One raw event. Validate with ``Event.model_validate(data, context={"limits": ...})``."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False)

    event_id: Ident = Field(default_factory=new_event_id)
    tenant: Ident
    agent: Ident
    user: OptionalIdent = ""
    project: OptionalIdent = ""
    session: OptionalIdent = ""
    kind: EventKind = EventKind.message
    role: Role = Role.user
    content: Content = ""
    at: EventTime = Field(default_factory=utcnow)
    meta: Meta = Field(default_factory=dict)

    @property
    def scope(self) -> Scope:
        return Scope(
            tenant=self.tenant,
            agent=self.agent,
            user=self.user,
            project=self.project,
            session=self.session,
        )

    @classmethod
    def from_stream(cls, fields: dict[bytes, bytes], limits: Limits = DEFAULT_LIMITS) -> Event:
        return cls.model_validate(orjson.loads(fields[b"e"]), context={"limits": limits})


@with_config(ConfigDict(extra="forbid"))
class EventFields(TypedDict):
    """An event as an edge accepts it: the rules of :class:`Event`, held in a plain dict.

    The request path validates a whole batch of these with one pydantic-core call and
    never builds models: four times cheaper than ``Event.model_validate`` per event, which
    is most of what an emit costs. The edge fills ``event_id`` before validation and ``at``
    after; the other fields may stay absent, and the drain's ``Event`` gives them defaults.
    """

    event_id: Ident
    tenant: Ident
    agent: Ident
    user: NotRequired[OptionalIdent]
    project: NotRequired[OptionalIdent]
    session: NotRequired[OptionalIdent]
    kind: NotRequired[EventKind]
    role: NotRequired[Role]
    content: NotRequired[Content]
    at: NotRequired[EventTime]
    meta: NotRequired[Meta]


def _limits(info: ValidationInfo) -> Limits:
    ctx = info.context
    limits = ctx.get("limits") if type(ctx) is dict else None
    return limits if type(limits) is Limits else DEFAULT_LIMITS
