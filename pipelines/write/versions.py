"""The one versioning rule: how a new version of a memory takes the place of the old one.

Nothing is overwritten. A change appends a version that continues the old one's lineage
(:func:`successor`), and the old one stops being current (:func:`supersede`, or
:func:`invalidate` and :func:`archive` for the two other ways a version ends); each
change is recorded as an :class:`AuditDraft`, which :func:`audit_values` turns into the
values of its audit row.

Every place that versions a memory goes through these functions: live consolidation
(``write.resolve``: an update, a merge, a negation, what a correction retires),
re-consolidation's swap (``lifecycle.reconsolidate``) and a person's edits through the
API (``services.memories``: an edit, "wrong", a settled conflict set). Written once, the
rule cannot drift apart between them again, as it did when each wrote the fields itself
(issue 42). The functions mutate the row they are given: the caller decides which row
that is (a plan's copy, a row of its SQL session) and where the draft goes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sleepmem.models import Memory, MemoryStatus
from sleepmem.pipelines.store import audit_row
from sleepmem.pipelines.types import Op


@dataclass(slots=True)
class AuditDraft:
    """One audit row before the run that writes it knows its tenant, task and worker:
    what was done (``op``) to which versions (``before`` → ``after``), why, and from
    which events."""

    op: Op
    before: list[str]
    after: list[str]
    reason: str
    events: list[str]
    content_hash: str = ""


def successor(new: Memory, *, of: Memory | None) -> Memory:
    """``new`` stamped as the version after ``of`` in its lineage, or, with ``of`` None,
    as the first version of a lineage of its own; returned for chaining.

    When one version replaces several (a change that retires every value a slot held),
    ``of`` is the newest of them: the lineage goes on from where it had got to. A new
    version is open: valid until something ends it, superseded by nothing yet.
    """
    new.lineage = new.id if of is None else of.lineage
    new.version = 1 if of is None else of.version + 1
    new.supersedes = None if of is None else of.id
    new.superseded_by = None
    new.valid_to = None
    new.invalidated_at = None
    return new


def supersede(old: Memory, *, by: str | None, at: datetime, now: datetime) -> Memory:
    """``old`` stops being current: what it said held until ``at`` (the time the newer
    statement is valid from), and it was found out at ``now``.

    ``by`` is the version that took its place, or None when nothing did (an explicit
    negation). A superseded version leaves its conflict set: the set is settled, or the
    version is out of it.
    """
    _end(old, at=at, now=now)
    old.superseded_by = by
    old.conflict_set = None
    return old


def invalidate(old: Memory, *, at: datetime, now: datetime) -> Memory:
    """``old`` is wrong, a person said (``services.memory_feedback``): it ends at ``at``
    with nothing in its place, and stays explainable (``as_of`` before ``at`` still sees
    it). Unlike :func:`supersede`, it keeps its conflict set's name, as marking one side
    of a set wrong always has: the set's other sides still wait for a person's answer."""
    return _end(old, at=at, now=now)


def _end(old: Memory, *, at: datetime, now: datetime) -> Memory:
    """The end every superseded version shares. A validity already closed keeps its own
    end (a current version has none: this is the first)."""
    old.status = MemoryStatus.superseded.value
    old.valid_to = at if old.valid_to is None else old.valid_to
    old.invalidated_at = now
    return old


def archive(old: Memory, *, by: str | None, now: datetime) -> Memory:
    """``old`` is no longer how the current pipeline reads its events
    (re-consolidation): it leaves the current set as archived, pointing at the version
    read in its place (``by``; None when nothing is derived from those events any more).
    Its validity stays open and its conflict set stays named: a re-reading of the same
    events says nothing new about the world, only about the reading."""
    old.status = MemoryStatus.archived.value
    old.archived_at = now
    old.superseded_by = by
    return old


def audit_values(
    draft: AuditDraft,
    *,
    tenant: str,
    scope_key: str,
    at: datetime,
    task_id: str,
    worker: str,
    extractor: str = "",
    model: str = "",
    events: Sequence[str] | None = None,
    llm_calls: int = 0,
    llm_tokens: int = 0,
) -> dict[str, Any]:
    """The values of ``draft``'s audit row, by the one audit-row builder
    (:func:`~sleepmem.pipelines.store.audit_row`). ``events``: the input events to name
    instead of the draft's own (a batch leaves out the events it erased)."""
    return audit_row(
        at=at, op=draft.op.value, tenant=tenant, scope_key=scope_key,
        before=draft.before, after=draft.after, reason=draft.reason,
        task_id=task_id, worker=worker, extractor=extractor, model=model,
        input_event_ids=draft.events if events is None else events,
        content_hash=draft.content_hash, llm_calls=llm_calls, llm_tokens=llm_tokens,
    )
