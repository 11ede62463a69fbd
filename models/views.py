"""What the memory API returns and accepts beyond search: one memory, a page, a context."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sleepmem.models.tables import Memory

Verdict = Literal["helpful", "wrong"]


class MemoryView(BaseModel):
    """One memory version as a client sees it (no internal bookkeeping)."""

    id: str
    lineage: str
    tenant: str
    agent: str
    user: str
    project: str
    session: str
    scope_key: str
    type: str
    subject: str
    attribute: str
    statement: str
    source: str
    trust: str
    confidence: float
    importance: float
    status: str
    conflict_set: str | None = Field(
        default=None, description="set of disagreeing sides awaiting a person's decision")
    pinned: bool
    version: int
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    invalidated_at: datetime | None
    expires_at: datetime | None
    supersedes: str | None
    superseded_by: str | None
    mention_count: int
    access_count: int
    last_access: datetime
    provenance: list[str]

    @classmethod
    def of(cls, mem: Memory) -> MemoryView:
        return cls.model_validate(mem.model_dump(include=set(cls.model_fields)))


class MemoryPage(BaseModel):
    items: list[MemoryView]
    next_cursor: str | None = Field(
        default=None, description="pass as `cursor` for the next page; null on the last page"
    )


class MemoryEdit(BaseModel):
    """A person's correction: becomes a new version with trust 'human'."""

    model_config = ConfigDict(extra="forbid")

    statement: str = Field(min_length=1, max_length=4096, description="the corrected statement")
    importance: float | None = Field(default=None, ge=0.0, le=1.0)
    reason: str = Field(default="", max_length=500, description="kept in the audit row")


class FeedbackBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    verdict: Verdict = Field(description="helpful: importance up; wrong: the memory is invalidated")
    note: str = Field(default="", max_length=500, description="kept in the audit row")


class ConflictChoice(BaseModel):
    """A person's decision on a conflict set: which side is true."""

    model_config = ConfigDict(extra="forbid")

    keep: str = Field(min_length=1, max_length=64,
                      description="id of the side to keep; the other sides are invalidated")
    reason: str = Field(default="", max_length=500, description="kept in the audit row")


class ConflictResolution(BaseModel):
    conflict_set: str
    kept: MemoryView = Field(description="now active, trust 'human' (confirmed by a person)")
    invalidated: list[MemoryView] = Field(description="the other sides, superseded by the kept one")


class JobView(BaseModel):
    id: str
    kind: str
    status: str
    tenant: str
    scope_key: str
    params: dict[str, Any]
    done: int
    total: int
    rate: float
    eta_s: float | None
    result: dict[str, Any]
    error: str
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
