"""Tables and schemas. Imports neither Celery, Redis nor Qdrant."""

# This folder is the package sleepmem.models. From the repository root it is also
# importable as `models`, and loaded under that second name its modules would run twice
# (the tables would be defined again beside sleepmem.models': "Table 'raw_event' is
# already defined"). Say so before anything runs.
if __name__ != "sleepmem.models":
    raise ImportError(
        f"the folder models/ is the package sleepmem.models: import sleepmem.models"
        f" (or sleepmem.models.<module>), not {__name__}"
    )

from sleepmem.models.cards import (
    MEMORY_TYPES,
    SEARCH_FORMATS,
    ConflictGroup,
    MemoryCard,
    SearchFormat,
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
    "SEARCH_FORMATS",
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
    "SearchFormat",
    "SearchRequest",
    "SearchResult",
    "SessionCheckpoint",
    "StoreValue",
    "Trust",
    "card_sides",
]
