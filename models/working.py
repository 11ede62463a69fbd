"""Working memory over the wire: session checkpoints and the context of one turn.

A checkpoint is a versioned JSON document per session (tenant/agent/user/project/session):
the task's plan, the step in progress, completed steps with their idempotency keys,
variables, recent tool results and verified facts. A write names the version it replaces
(``base_version``; 0 creates); a stale write is refused (HTTP 409), never merged.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sleepmem.models.cards import ConflictGroup, SearchFormat
from sleepmem.models.events import NUL_RULE, Role, aware_time
from sleepmem.models.scope import Scope

# Versions and times reach SQL: a version past a signed 64-bit column, or past what a JSON
# client holds exactly, is refused at the edge rather than failing in the database.
MAX_VERSION = 2**53 - 2


def _aware(v: datetime | None) -> datetime | None:
    # The same rule as an event's time: 0001-01-01T00:00:00+05:00 is before year 1 in UTC.
    return None if v is None else aware_time(v)


def _no_nul(value: Any) -> None:
    """Refuse a NUL anywhere in a JSON value (keys included), as events do: PostgreSQL
    cannot store it, and a checkpoint accepted with one could never be folded into the
    event log at session end."""
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError(NUL_RULE)
    elif isinstance(value, dict):
        for key, item in value.items():
            _no_nul(key)
            _no_nul(item)
    elif isinstance(value, list | tuple):
        for item in value:
            _no_nul(item)


class CompletedStep(BaseModel):
    """A step that is done. ``key`` is its idempotency key: a resumed agent that finds it
    does not run the step again."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, max_length=200, description="idempotency key of the step")
    step: str = Field(default="", max_length=2000, description="what the step did, in words")
    result: Any = Field(default=None, description="what it returned (kept small)")
    at: datetime | None = None

    _at = field_validator("at", mode="after")(_aware)


class ToolResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tool: str = Field(min_length=1, max_length=200)
    result: Any = None
    key: str | None = Field(default=None, max_length=200, description="the step it served")
    at: datetime | None = None

    _at = field_validator("at", mode="after")(_aware)


class CheckpointState(BaseModel):
    """The agent's working memory. Unknown fields are refused; put anything else in
    ``variables``."""

    model_config = ConfigDict(extra="forbid")

    goal: str = Field(default="", max_length=4000, description="the task, in a sentence")
    plan: list[str] = Field(default_factory=list, description="steps, in order")
    current_step: str | None = Field(default=None, max_length=2000)
    completed: list[CompletedStep] = Field(default_factory=list)
    variables: dict[str, Any] = Field(default_factory=dict)
    tool_results: list[ToolResult] = Field(default_factory=list, description="recent ones")
    verified: list[str] = Field(
        default_factory=list, description="facts the agent checked; folded into memory at end"
    )

    @model_validator(mode="after")
    def _unique_keys(self) -> CheckpointState:
        _no_nul(self.model_dump(mode="json"))
        seen: set[str] = set()
        for i, step in enumerate(self.completed):
            if step.key in seen:
                raise ValueError(
                    f"completed[{i}].key {step.key!r} appears twice; an idempotency key names "
                    "one step"
                )
            seen.add(step.key)
        return self

    def done(self, key: str) -> CompletedStep | None:
        """The completed step with idempotency key ``key``, if any."""
        return next((s for s in self.completed if s.key == key), None)


class Checkpoint(BaseModel):
    """One version of a session's checkpoint, as stored and as returned."""

    scope: Scope
    version: int = Field(ge=1)
    state: CheckpointState
    updated_at: datetime
    size_bytes: int = 0
    ended_at: datetime | None = None


class CheckpointPut(BaseModel):
    """``PUT /v1/checkpoints``: write version ``base_version + 1``."""

    model_config = ConfigDict(extra="forbid")

    scope: Scope = Field(description="tenant, agent, user, project and session (required)")
    state: CheckpointState
    base_version: int = Field(
        ge=0, le=MAX_VERSION,
        description="the version this write replaces: 0 to create, else the current one",
    )


class CheckpointHistory(BaseModel):
    scope: Scope
    versions: list[Checkpoint] = Field(description="newest first")


class EvictedMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Role = Role.user
    content: str = Field(min_length=1)
    at: datetime | None = None

    _at = field_validator("at", mode="after")(_aware)

    @field_validator("content", mode="after")
    @classmethod
    def _content(cls, v: str) -> str:
        _no_nul(v)
        return v

    event_id: str | None = Field(
        default=None,
        description="the id it was emitted with, if it was: the drain keeps one row per id",
    )


class EvictRequest(BaseModel):
    """``POST /v1/sessions/evict``: context the agent drops from its prompt, kept for sleep."""

    model_config = ConfigDict(extra="forbid")

    scope: Scope
    messages: list[EvictedMessage] = Field(min_length=1, max_length=1000)


class EndSessionRequest(BaseModel):
    """``POST /v1/sessions/end``: the session is over; its checkpoint is folded into memory."""

    model_config = ConfigDict(extra="forbid")

    scope: Scope
    outcome: str = Field(default="", max_length=4000, description="how the task ended")

    @field_validator("outcome", mode="after")
    @classmethod
    def _outcome(cls, v: str) -> str:
        _no_nul(v)
        return v


class EventsAccepted(BaseModel):
    ids: list[str] = Field(description="event ids appended to the event log")
    position: str | None = Field(default=None, description=(
        "the stream position of the last one: flush or min_position wait for it"))
    checkpoint_version: int | None = Field(
        default=None, description="the checkpoint version the events carry as provenance"
    )


class ContextRequest(BaseModel):
    """``POST /v1/context``: what to put in the prompt for this turn."""

    model_config = ConfigDict(extra="forbid")

    scope: Scope = Field(description="set session to include its checkpoint")
    query: str = Field(min_length=1, max_length=4096, description="the turn's user message")
    budget_tokens: int = Field(ge=16, le=200_000, description="cl100k tokens for both parts")
    k: int | None = Field(default=None, ge=1, le=100, description="relevant memories wanted")
    format: SearchFormat = Field(default="cards", description=(
        "how the relevant memories read: cards (whole), lines (each its best sentence), "
        "mixed (the first half of k whole, the rest as lines)"))
    min_position: str | None = Field(default=None, description=(
        "answer with every event of the scope up to this stream position (what an emit "
        "answered) in memory: waits up to wait_s, then answers with fresh=false"))
    wait_s: float = Field(default=10.0, ge=0, le=120, description="the bound on that wait")

    @field_validator("query", mode="after")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("query must contain some text, not only whitespace")
        return v


Section = Literal["identity", "preference", "procedure", "relevant", "conflict", "checkpoint"]


class ContextItem(BaseModel):
    id: str = Field(description="memory id (cite it, or correct it); '' for the checkpoint")
    section: Section
    type: str
    statement: str
    tokens: int


class ContextPart(BaseModel):
    text: str = Field(description="rendered, ready to paste into the prompt")
    tokens: int
    items: list[ContextItem]


class ContextResult(BaseModel):
    prefix: ContextPart = Field(
        description="identity, standing preferences, active procedures: byte-identical from "
        "turn to turn until one of them changes (put it first, for prompt caching)"
    )
    prefix_digest: str = Field(description="sha256 of prefix.text")
    dynamic: ContextPart = Field(
        description="checkpoint, open conflicts and memories relevant to the query"
    )
    conflicts: list[ConflictGroup] = Field(default_factory=list)
    checkpoint_version: int | None = None
    tokens: int = Field(description="prefix.tokens + dynamic.tokens, ≤ budget_tokens")
    budget_tokens: int
    dropped: int = Field(description="items left out for the budget")
    tokenizer: str
    format: SearchFormat = Field(default="cards", description="how the relevant memories read")
    fresh: bool | None = Field(default=None, description=(
        "with min_position: whether memory held every event up to it"))
    reached: str | None = Field(default=None, description=(
        "with min_position: every event of the scope up to here was in memory"))

    @property
    def text(self) -> str:
        """Both parts, prefix first, ready to paste into a prompt."""
        return "\n\n".join(part.text for part in (self.prefix, self.dynamic) if part.text)
