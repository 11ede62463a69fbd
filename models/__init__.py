"""Tables and schemas. Imports neither Celery, Redis nor Qdrant."""

from sleepmem.models.cards import (
    MEMORY_TYPES,
    ConflictGroup,
    MemoryCard,
    SearchRequest,
    SearchResult,
    card_sides,
)
from sleepmem.models.entities import Entity, EntityAlias, EntityKind, EntityMention, Relation
from sleepmem.models.events import DEFAULT_LIMITS, Event, EventKind, Limits, Role
from sleepmem.models.scope import LEVELS, Scope
from sleepmem.models.tables import (
    CURRENT_STATUSES,
    Audit,
    AuditMemory,
    CheckpointStatus,
    DeadLetter,
    IndexState,
    Job,
    JobStatus,
    Memory,
    MemoryStatus,
    RawEvent,
    ScopeState,
    SessionCheckpoint,
    Trust,
)
from sleepmem.models.values import StoreValue

__all__ = [
    "CURRENT_STATUSES",
    "DEFAULT_LIMITS",
    "LEVELS",
    "MEMORY_TYPES",
    "Audit",
    "AuditMemory",
    "CheckpointStatus",
    "ConflictGroup",
    "DeadLetter",
    "Entity",
    "EntityAlias",
    "EntityKind",
    "EntityMention",
    "Event",
    "EventKind",
    "IndexState",
    "Job",
    "JobStatus",
    "Limits",
    "Memory",
    "MemoryCard",
    "MemoryStatus",
    "RawEvent",
    "Relation",
    "Role",
    "Scope",
    "ScopeState",
    "SearchRequest",
    "SearchResult",
    "SessionCheckpoint",
    "StoreValue",
    "Trust",
    "card_sides",
]
