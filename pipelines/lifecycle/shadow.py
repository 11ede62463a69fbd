"""What a replay makes of a scope, and how it differs from the scope's current set.

A :class:`Shadow` is re-consolidation's would-be current set (and the history it would
have written); :func:`diff` compares it with the current set, matched on type, subject,
attribute, session and normalised statement: added, removed, changed (same slot, new
statement or status), with reasons. What a person decided (trust ``human``) or pinned is
held: the replay neither changes nor removes it, and what the replay derives from the
same events or for the same slot gives way to it (:func:`held_by_a_person`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from sleepmem.models import Memory, Trust
from sleepmem.pipelines import PIPELINE_VERSION
from sleepmem.pipelines.decay import aware
from sleepmem.pipelines.memories import norm_text
from sleepmem.pipelines.write.versions import AuditDraft

MAX_DIFF_ITEMS = 1000
MAX_STATEMENT_CHARS = 300

Key = tuple[str, str, str, str, str]
Slot = tuple[str, str, str, str]


@dataclass(slots=True)
class Shadow:
    """What the current pipeline makes of the events: the would-be current memories."""

    current: list[Memory]
    extractor: str
    events: int
    reasons: dict[str, str] = field(default_factory=dict)
    # What the replay made of a memory it does not keep: why it would be gone today.
    fates: dict[Key, str] = field(default_factory=dict)
    # Every version the replay holds as it leaves them (the rows it started from, and all
    # it wrote, superseded ones included), the audit drafts it recorded, and the fragments
    # each session summary folds in (live consolidation archives those once the summary
    # is indexed): the live history, as the replay would have written it.
    history: list[Memory] = field(default_factory=list)
    audits: list[AuditDraft] = field(default_factory=list)
    folded: dict[str, list[str]] = field(default_factory=dict)


@dataclass(slots=True)
class Diff:
    added: list[Memory] = field(default_factory=list)
    removed: list[Memory] = field(default_factory=list)
    changed: list[tuple[Memory, Memory, str]] = field(default_factory=list)
    unchanged: int = 0
    held: int = 0  # a person's edits and pins, which no replay overrides
    reasons: dict[str, str] = field(default_factory=dict)
    fates: dict[Key, str] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)

    def counts(self) -> dict[str, int]:
        return {"added": len(self.added), "removed": len(self.removed),
                "changed": len(self.changed), "unchanged": self.unchanged, "held": self.held}

    def as_result(self, extractor: str) -> dict[str, Any]:
        def card(m: Memory) -> dict[str, Any]:
            return {"type": m.type, "subject": m.subject, "attribute": m.attribute,
                    "statement": m.statement[:MAX_STATEMENT_CHARS], "status": m.status}

        not_derived = (f"the current pipeline (extractor {extractor}, pipeline "
                       f"v{PIPELINE_VERSION}) no longer derives it from its events")
        items = {
            "added": [{"id": m.id, **card(m), "reason": self.reasons.get(m.id, "new memory")}
                      for m in self.added],
            "removed": [{"id": m.id, **card(m),
                         "reason": self.fates.get(match_key(m), not_derived)}
                        for m in self.removed],
            "changed": [
                {"old_id": old.id, "new_id": new.id, **card(new),
                 "old_statement": old.statement[:MAX_STATEMENT_CHARS],
                 "old_status": old.status, "reason": why}
                for old, new, why in self.changed
            ],
        }
        truncated = any(len(v) > MAX_DIFF_ITEMS for v in items.values())
        return {"counts": self.counts(), "truncated": truncated,
                "diff": {k: v[:MAX_DIFF_ITEMS] for k, v in items.items()}}


def match_key(m: Memory) -> Key:
    return (m.type, m.subject, m.attribute, m.session, norm_text(m.statement))


def held_by_a_person(m: Memory) -> bool:
    """A person's edit or answer (trust ``human``) and a pin outrank any re-reading of events."""
    return m.pinned or m.trust == Trust.human.value


def _origin(m: Memory) -> tuple[str, str, str, str, frozenset[str]]:
    return (m.type, m.subject, m.attribute, m.session, frozenset(m.provenance))


def diff(current: list[Memory], shadow: Shadow) -> Diff:
    out = Diff(reasons=shadow.reasons, fates=shadow.fates)
    held = [m for m in current if held_by_a_person(m)]
    out.held = len(held)
    held_keys = {match_key(m) for m in held}
    held_slots = {(m.type, m.subject, m.attribute, m.session) for m in held if m.attribute}
    held_origins = {_origin(m) for m in held}

    def yields(m: Memory) -> bool:
        # The replay re-derives what the person corrected (same slot, or same kind of memory
        # from the same events): the person's version stands, the re-derived one is dropped.
        slot = (m.type, m.subject, m.attribute, m.session)
        return (match_key(m) in held_keys or _origin(m) in held_origins
                or (bool(m.attribute) and slot in held_slots))

    mine: dict[Key, list[Memory]] = defaultdict(list)
    for m in sorted(current, key=lambda m: (aware(m.valid_from), m.id)):
        if not held_by_a_person(m):
            mine[match_key(m)].append(m)
    rest_new: list[Memory] = []
    derived = [m for m in shadow.current if not yields(m)]
    for m in sorted(derived, key=lambda m: (aware(m.valid_from), m.id)):
        same = mine.get(match_key(m))
        if not same:
            rest_new.append(m)
            continue
        old = same.pop(0)
        if old.status != m.status:
            out.changed.append((old, m, f"status {old.status} → {m.status}"))
        else:
            out.unchanged += 1
    rest_old = [m for group in mine.values() for m in group]
    # Same slot, different value: a change of one memory, not a removal plus an addition.
    old_slots: dict[Slot, list[Memory]] = defaultdict(list)
    for m in rest_old:
        if m.attribute:
            old_slots[(m.type, m.subject, m.attribute, m.session)].append(m)
    paired: set[str] = set()
    for m in rest_new:
        slot = old_slots.get((m.type, m.subject, m.attribute, m.session)) if m.attribute else None
        if slot:
            old = slot.pop(0)
            paired.add(old.id)
            out.changed.append((old, m, "restated by the current pipeline"))
        else:
            out.added.append(m)
    out.removed = [m for m in rest_old if m.id not in paired]
    return out
