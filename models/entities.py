"""Entity and relation memory: who and what a scope's memories talk about, and how they relate.

Derived at sleep time from memory versions (both extractors), so every row points back at
the memory it came from: erasing or forgetting a memory takes its mentions and relations
with it, and an entity nothing mentions any more goes too (its name is content).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, Column, Index
from sqlmodel import Field, SQLModel

from sleepmem.models.tables import MemoryStatus, ScopeColumns, UTCDateTime, _now


class EntityKind(StrEnum):
    person = "person"
    pet = "pet"
    place = "place"
    organisation = "organisation"
    product = "product"
    event = "event"
    thing = "thing"


def _ts(**kw: Any) -> Any:
    return Field(sa_column=Column(UTCDateTime(), **kw))


class Entity(ScopeColumns, table=True):
    """One entity of one consolidation scope, under its canonical name."""

    __tablename__ = "entity"
    __table_args__ = (Index("ix_entity_scope_key", "scope_key", "key"),)

    id: str = Field(primary_key=True, max_length=64)
    scope_key: str = Field(max_length=700)
    # The canonical name normalised (lower case, no possessive): what aliases merge on.
    key: str = Field(max_length=200)
    name: str = Field(max_length=200)
    kind: str = Field(default=EntityKind.thing.value, max_length=16)
    mention_count: int = 0
    first_seen: datetime = _ts(nullable=False, default=_now)
    last_seen: datetime = _ts(nullable=False, default=_now)


class EntityAlias(SQLModel, table=True):
    """A normalised name an entity goes by in its scope; entity linking looks these up."""

    __tablename__ = "entity_alias"
    __table_args__ = (Index("ix_entity_alias_lookup", "alias", "scope_key"),)

    entity_id: str = Field(primary_key=True, max_length=64)
    alias: str = Field(primary_key=True, max_length=200)
    tenant: str = Field(max_length=128)
    scope_key: str = Field(max_length=700)


class EntityMention(SQLModel, table=True):
    """An entity named by a memory version (as its subject, object or in passing)."""

    __tablename__ = "entity_mention"
    __table_args__ = (Index("ix_entity_mention_memory", "memory_id"),)

    entity_id: str = Field(primary_key=True, max_length=64)
    memory_id: str = Field(primary_key=True, max_length=64)
    tenant: str = Field(max_length=128)
    scope_key: str = Field(max_length=700)
    role: str = Field(default="mention", max_length=16)


class Relation(ScopeColumns, table=True):
    """``(subject) -[relation]-> (object)`` as one memory version states it.

    Validity follows the memory: when the memory is superseded, invalidated, expired or
    archived, the relation gets its status and ``valid_to``; it is never deleted while
    the memory exists.
    """

    __tablename__ = "relation"
    __table_args__ = (
        Index("ix_relation_subject", "subject_id", "status"),
        Index("ix_relation_object", "object_id", "status"),
        Index("ix_relation_memory", "memory_id"),
    )

    id: str = Field(primary_key=True, max_length=64)
    scope_key: str = Field(max_length=700)
    subject_id: str = Field(max_length=64)
    relation: str = Field(max_length=200)
    object_id: str = Field(max_length=64)
    memory_id: str = Field(max_length=64)
    lineage: str = Field(max_length=64)
    valid_from: datetime = _ts(nullable=False)
    valid_to: datetime | None = _ts(nullable=True)
    recorded_at: datetime = _ts(nullable=False, default=_now)
    invalidated_at: datetime | None = _ts(nullable=True)
    status: str = Field(default=MemoryStatus.active.value, max_length=24)
    provenance: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
