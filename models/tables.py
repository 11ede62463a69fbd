"""SQL tables: the source of truth. The vector index is derived from ``memory`` rows."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, Column, DateTime, Index, PrimaryKeyConstraint, Text, false
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator
from sqlmodel import Field, SQLModel


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC on every backend (SQLite stores no offset and returns naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _now() -> datetime:
    return datetime.now(UTC)


def _ts(**kw: Any) -> Any:
    return Field(sa_column=Column(UTCDateTime(), **kw))


class MemoryStatus(StrEnum):
    active = "active"
    pending_confirmation = "pending_confirmation"
    superseded = "superseded"
    archived = "archived"
    expired = "expired"


class Trust(StrEnum):
    high = "high"
    low = "low"
    human = "human"  # edited by a person through the API: the new version says so


class IndexState(StrEnum):
    pending = "pending"
    indexed = "indexed"


CURRENT_STATUSES = (MemoryStatus.active.value, MemoryStatus.pending_confirmation.value)


class ScopeColumns(SQLModel):
    """The five scope levels every scoped row carries; '' = unset."""

    tenant: str = Field(index=True, max_length=128)
    agent: str = Field(default="", max_length=128)
    user: str = Field(default="", max_length=128)
    project: str = Field(default="", max_length=128)
    session: str = Field(default="", max_length=128)


class RawEvent(ScopeColumns, table=True):
    """An accepted event after redaction, stored once per (tenant, event_id): idempotent drain."""

    __tablename__ = "raw_event"
    __table_args__ = (
        # Named as revision 0004 names it (PostgreSQL's default name; on SQLite only that
        # revision's spelling), so a database created from these models has the same key.
        PrimaryKeyConstraint("tenant", "event_id", name="raw_event_pkey"),
        Index("ix_raw_event_scope_status", "scope_key", "consolidated"),
    )

    # The key is (tenant, event_id): an event id is unique within its tenant, so one
    # tenant can never make another tenant's event with the same id vanish as a duplicate.
    tenant: str = Field(primary_key=True, max_length=128)
    event_id: str = Field(primary_key=True, max_length=128)
    scope_key: str = Field(max_length=700)
    kind: str = Field(max_length=32)
    role: str = Field(max_length=32)
    content: str = Field(sa_column=Column(Text, nullable=False))
    at: datetime = _ts(nullable=False)
    meta: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    stream_id: str = Field(default="", max_length=64)
    received_at: datetime = _ts(nullable=False, default=_now)
    consolidated: bool = Field(default=False)
    consolidated_at: datetime | None = _ts(nullable=True)


class DeadLetter(SQLModel, table=True):
    """A stream entry that kept failing; kept (redacted) with its error for an operator."""

    __tablename__ = "dead_letter"

    id: int | None = Field(default=None, primary_key=True)
    stream_id: str = Field(max_length=64, index=True, unique=True)
    payload: str = Field(sa_column=Column(Text, nullable=False))
    error: str = Field(sa_column=Column(Text, nullable=False))
    deliveries: int = 0
    at: datetime = _ts(nullable=False, default=_now)


class ScopeState(ScopeColumns, table=True):
    """Per consolidation scope: what the sleep-time trigger looks at."""

    __tablename__ = "scope_state"

    scope_key: str = Field(primary_key=True, max_length=700)
    last_event_at: datetime | None = _ts(nullable=True)
    last_received_at: datetime | None = _ts(nullable=True)
    pending_count: int = 0
    session_end: bool = False
    last_consolidated_at: datetime | None = _ts(nullable=True)


class Memory(ScopeColumns, table=True):
    """One version of one memory. Updates append versions; nothing is overwritten."""

    __tablename__ = "memory"
    __table_args__ = (
        Index("ix_memory_scope_slot", "scope_key", "subject", "attribute", "status"),
        Index("ix_memory_status_expires", "status", "expires_at"),
        Index("ix_memory_index_state", "index_state"),
    )

    id: str = Field(primary_key=True, max_length=64)
    lineage: str = Field(max_length=64, index=True)
    scope_key: str = Field(max_length=700)
    type: str = Field(max_length=16)
    subject: str = Field(default="user", max_length=200)
    attribute: str = Field(default="", max_length=200)
    statement: str = Field(sa_column=Column(Text, nullable=False))
    source: str = Field(default="user", max_length=32)
    trust: str = Field(default=Trust.high.value, max_length=8)
    confidence: float = 1.0
    importance: float = 0.5
    valid_from: datetime = _ts(nullable=False)
    valid_to: datetime | None = _ts(nullable=True)
    recorded_at: datetime = _ts(nullable=False, default=_now)
    invalidated_at: datetime | None = _ts(nullable=True)
    expires_at: datetime | None = _ts(nullable=True)
    supersedes: str | None = Field(default=None, max_length=64)
    superseded_by: str | None = Field(default=None, max_length=64)
    version: int = 1
    mention_count: int = 1
    access_count: int = 0
    last_access: datetime = _ts(nullable=False, default=_now)
    provenance: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    status: str = Field(default=MemoryStatus.active.value, max_length=24)
    conflict_set: str | None = Field(default=None, max_length=64)
    demoted: bool = False
    needs_verification: bool = False
    reminded: bool = False
    archived_at: datetime | None = _ts(nullable=True)
    details: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    pipeline_version: str = Field(default="1", max_length=16)
    extractor: str = Field(default="rules", max_length=64)
    index_state: str = Field(default=IndexState.pending.value, max_length=16)
    # Pinned by a person: never decays, never expires, never swept (unpin to release).
    # Last and with a server default, as revision 0002 added it to existing tables: a
    # database created from these models is then the one the revisions build.
    pinned: bool = Field(default=False, sa_column_kwargs={"server_default": false()})


class Audit(SQLModel, table=True):
    """One row per operation on memory. Holds ids and hashes, never erased content."""

    __tablename__ = "audit"
    __table_args__ = {"sqlite_autoincrement": True}

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = _ts(nullable=False, default=_now)
    op: str = Field(max_length=24, index=True)
    tenant: str = Field(default="", max_length=128, index=True)
    scope_key: str = Field(default="", max_length=700)
    memory_ids_before: list[str] = Field(default_factory=list, sa_column=Column(JSON))
    memory_ids_after: list[str] = Field(default_factory=list, sa_column=Column(JSON))
    reason: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    task_id: str = Field(default="", max_length=128)
    worker: str = Field(default="", max_length=200)
    pipeline_version: str = Field(default="1", max_length=16)
    extractor: str = Field(default="", max_length=64)
    model: str = Field(default="", max_length=128)
    input_event_ids: list[str] = Field(default_factory=list, sa_column=Column(JSON))
    content_hash: str = Field(default="", max_length=64)
    llm_calls: int = 0
    llm_tokens: int = 0


class AuditMemory(SQLModel, table=True):
    """Which audit rows name a memory: ``explain`` looks a lineage up here, not in the JSON.

    Filled by a database trigger on every insert into ``audit`` (sleepmem.adapters.sql installs it),
    so that no writer, ORM or bulk Core insert, can forget it.
    """

    __tablename__ = "audit_memory"

    memory_id: str = Field(primary_key=True, max_length=64)
    # No foreign key: its per-row check doubled the cost of bulk audit writes. Audit ids
    # are never reused (sequences; AUTOINCREMENT on SQLite), so the links of rows an
    # operator purges point at nothing and are simply never joined.
    audit_id: int = Field(primary_key=True)


class JobStatus(StrEnum):
    queued = "queued"
    running = "running"
    done = "done"
    failed = "failed"
    cancelled = "cancelled"


class Job(SQLModel, table=True):
    """An operator job (re-consolidation, erasure) with its progress."""

    __tablename__ = "job"

    id: str = Field(primary_key=True, max_length=64)
    kind: str = Field(max_length=32)
    tenant: str = Field(default="", max_length=128)
    scope_key: str = Field(default="", max_length=700)
    status: str = Field(default=JobStatus.queued.value, max_length=16)
    params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    done: int = 0
    total: int = 0
    rate: float = 0.0
    result: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    error: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    created_at: datetime = _ts(nullable=False, default=_now)
    started_at: datetime | None = _ts(nullable=True)
    finished_at: datetime | None = _ts(nullable=True)


class CheckpointStatus(StrEnum):
    live = "live"
    ended = "ended"
    archived = "archived"


class SessionCheckpoint(ScopeColumns, table=True):
    """One mirrored version of a session's working-memory checkpoint.

    Written at sleep time from Redis (where the request path writes); the newest version
    is what a session resumes from if Redis lost it. Kept ``checkpoint_keep_s`` after the
    session ends, then archived, then deleted after ``checkpoint_delete_after_s``.
    """

    __tablename__ = "session_checkpoint"
    __table_args__ = (Index("ix_session_checkpoint_status", "status", "written_at"),)

    scope_key: str = Field(primary_key=True, max_length=700)
    version: int = Field(primary_key=True)
    state: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    size_bytes: int = 0
    written_at: datetime = _ts(nullable=False)
    mirrored_at: datetime = _ts(nullable=False, default=_now)
    ended_at: datetime | None = _ts(nullable=True)
    archived_at: datetime | None = _ts(nullable=True)
    status: str = Field(default=CheckpointStatus.live.value, max_length=16)
