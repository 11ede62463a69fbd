"""Typed batches that flow between the consolidation stages."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from sleepmem.models.scope import Scope


@dataclass(frozen=True, slots=True)
class EventView:
    """A raw event as stages see it: already redacted, already validated."""

    event_id: str
    scope: Scope
    kind: str
    role: str
    content: str
    at: datetime
    meta: dict[str, Any] = field(default_factory=dict)


class Op(StrEnum):
    ADD = "ADD"
    UPDATE = "UPDATE"
    NOOP = "NOOP"
    DELETE = "DELETE"
    INVALIDATE = "INVALIDATE"
    MERGE = "MERGE"
    COMPRESS = "COMPRESS"
    ARCHIVE = "ARCHIVE"
    CONFLICT = "CONFLICT"
    REJECT = "REJECT"


# -- slot names ---------------------------------------------------------------------------
# Open slot: a fact about the subject outside the known vocabulary, named by a normalised
# relation: ``rel:<relation>``, the relation lowercase snake_case in the present tense
# ("rel:owns", "rel:uses", "rel:drives", "rel:learns", "rel:prefers", "rel:works_at",
# "rel:lives_in"). ``value`` is the relation's object, normalised ("toyota corolla").
# A change supersedes the slot's earlier version; two high-trust values without a change
# form a conflict set, except for many-valued relations (below), where they both hold.
OPEN_SLOT_PREFIX = "rel:"
# Trusted structured tool output: one candidate per scalar field, the attribute being
# ``tool:<key path>`` ("tool:subscription.plan", list items as "tool:orders.0.status").
TOOL_PREFIX = "tool:"
# Relations whose values accumulate ("I own a bike" and "I own a car" are both true):
# a new value is added; only an explicit change or negation retires a value, and then
# only the values it names (Candidate.details["replaces"] or the old value in its words).
MANY_VALUED_RELATIONS = frozenset({
    "owns", "has", "uses", "learns", "likes", "loves", "enjoys", "prefers", "speaks",
    "plays", "knows", "reads", "watches", "collects", "visits", "follows", "studies",
})


def open_slot(relation: str) -> str:
    """The attribute of an open slot: ``open_slot("works at") == "rel:works_at"``."""
    return OPEN_SLOT_PREFIX + "_".join(relation.lower().split())


def is_many_valued(attribute: str) -> bool:
    return (attribute.startswith(OPEN_SLOT_PREFIX)
            and attribute.removeprefix(OPEN_SLOT_PREFIX) in MANY_VALUED_RELATIONS)


@dataclass(slots=True)
class Candidate:
    """One thing an extractor believes is worth remembering, before any judgement.

    ``subject`` + ``attribute`` name the slot a memory fills ("user" + "residence");
    only memories of the same slot may replace one another. ``value`` is the slot's
    normalised value, used to tell a repeat from a change. ``attribute`` is '' for
    free-standing memories (events) that never replace anything; ``rel:<relation>`` for
    an open slot and ``tool:<key path>`` for a trusted tool field (see above).
    """

    type: str
    statement: str
    provenance: list[str]
    valid_from: datetime
    scope: Scope
    subject: str = "user"
    attribute: str = ""
    value: str = ""
    source: str = "user"
    trust: str = "high"
    confidence: float = 1.0
    importance: float = 0.5
    change: bool = False
    negated: bool = False
    one_off: bool = False
    inferred: bool = False
    from_tool: bool = False
    emphasis: bool = False
    forget_topic: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Rejection:
    candidate: Candidate
    reason: str


@dataclass(slots=True)
class Extraction:
    """What an extractor returns for a batch of events."""

    candidates: list[Candidate]
    extractor: str
    model: str = ""
    llm_calls: int = 0
    llm_tokens: int = 0


class Extractor(Protocol):
    """Turns a scope's pending events (event-time order) into candidates."""

    name: str

    def extract(self, events: list[EventView]) -> Extraction: ...
