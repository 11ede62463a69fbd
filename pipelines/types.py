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
    # What a person's answer to a conflict set and a re-consolidation's swap record
    # (write.versions): versions ended outside a consolidation batch.
    RESOLVE = "RESOLVE"
    RECONSOLIDATE = "RECONSOLIDATE"


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


def is_many_valued(attribute: str, details: dict[str, Any] | None = None) -> bool:
    """Whether an open slot holds several values at once. The extractor's own reading
    (``details["open_slot"]["multi"]``) wins; otherwise the relation decides."""
    if not attribute.startswith(OPEN_SLOT_PREFIX):
        return False
    slot = (details or {}).get("open_slot")
    if isinstance(slot, dict) and isinstance(slot.get("multi"), bool):
        return bool(slot["multi"])
    return attribute.removeprefix(OPEN_SLOT_PREFIX) in MANY_VALUED_RELATIONS


@dataclass(slots=True)
class Candidate:
    """One thing an extractor believes is worth remembering, before any judgement.

    ``subject`` + ``attribute`` name the slot a memory fills ("user" + "residence");
    only memories of the same slot may replace one another. ``value`` is the slot's
    normalised value, used to tell a repeat from a change. ``attribute`` is '' for
    free-standing memories (events) that never replace anything.

    Open slots (facts outside the vocabulary, e.g. "I sold my Civic, I drive a Model 3
    now"): the rules extractor reads the first-person relation and encodes it as

    - ``attribute = "rel:<relation>"``: the relation normalised to a third-person verb or
      verb_preposition (``rel:drives``, ``rel:owns``, ``rel:learns``, ``rel:uses``,
      ``rel:prefers``, ``rel:likes``, ``rel:plays``, ``rel:is`` …), so two wordings of one
      relation ("I drive …", "I'm driving …"; "我开…") meet in one slot. Relations that are
      vocabulary slots already use the vocabulary attribute instead (lives_in/moves_to ->
      ``residence``, works_at -> ``employer``, works_as -> ``occupation``).
    - ``value``: the object as said, normalised (``norm_value``: lower case, no article,
      trailing adverbials and fillers cut): "model 3", "特斯拉", "play the cello".
    - ``details["open_slot"] = {"relation": str, "object": str, "multi": bool}``:
      ``multi`` is False for single-valued relations (drives, lives_in, works_at,
      works_as, studies_at …: a new value replaces the old one) and True for relations
      that hold many values at once (likes, owns, learns, plays …: a new value replaces an
      old one only on an explicit change, ``change=True``, about the same object by
      meaning; otherwise both stay).
    - ``details["unclassified"] = True`` (with ``details["type_by"]`` = "grammar" or
      "meaning") marks a statement no vocabulary matcher recognised: type fact or
      preference, importance 0.3, kept at that type's default lifetime.

    ``tool:<key path>`` is the attribute of a trusted tool field (see above).
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
