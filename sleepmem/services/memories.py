"""A person's actions on memories through the API: read, list, edit (a new version
with trust 'human'), pin, feedback, history, and settling a conflict set."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlmodel import Session, col, select

from sleepmem.core.errors import (
    NO_MEMORY,
    NotFoundError,
    SleepmemError,
    ValidationError,
)
from sleepmem.core.logs import get_logger
from sleepmem.core.redaction import redact_text
from sleepmem.models import (
    CURRENT_STATUSES,
    LEVELS,
    MEMORY_TYPES,
    Audit,
    IndexState,
    Memory,
    MemoryStatus,
    Scope,
    Trust,
)
from sleepmem.models.views import ConflictResolution, MemoryPage, MemoryView
from sleepmem.pipelines.entities import store as entity_store
from sleepmem.pipelines.memories import copy_row, expiry
from sleepmem.pipelines.store import audit_row
from sleepmem.pipelines.types import Op
from sleepmem.pipelines.write import versions
from sleepmem.pipelines.write.index import apply_to_index
from sleepmem.resources import Resources

log = get_logger("sleepmem.services")


# -- memories, as a client reads and corrects them ----------------------------------------
#
# A person's actions through the API: read, list, edit (a new version with trust "human"),
# pin, feedback. Each change is one SQL transaction with its audit row; the index follows
# after the commit (rows stay index_state=pending until it has, for the reconciler).


def _visible_memory(session: Session, memory_id: str, tenant: str | None) -> Memory:
    mem = session.get(Memory, memory_id)
    # Another tenant's id is reported missing, not forbidden: ids do not leak.
    if mem is None or (tenant is not None and mem.tenant != tenant):
        raise NotFoundError(NO_MEMORY)
    return mem


def get_memory(res: Resources, *, memory_id: str, tenant: str | None) -> MemoryView:
    with Session(res.engine) as session:
        return MemoryView.of(_visible_memory(session, memory_id, tenant))


LIST_MAX = 500


def list_memories(
    res: Resources,
    *,
    scope: Scope,
    types: Sequence[str] = (),
    statuses: Sequence[str] = (),
    limit: int = 50,
    cursor: str | None = None,
) -> MemoryPage:
    """Memories of ``scope`` and every scope under it, by id; current ones unless
    ``statuses`` says otherwise. Keyset-paginated: ``cursor`` is the last id seen."""
    if not 1 <= limit <= LIST_MAX:
        raise ValidationError("limit", f"must be between 1 and {LIST_MAX}, got {limit}")
    for t in types:
        if t not in MEMORY_TYPES:
            raise ValidationError("type", f"unknown memory type {t!r}; known: "
                                          f"{', '.join(MEMORY_TYPES)}")
    known_status = [s.value for s in MemoryStatus]
    for st in statuses:
        if st not in known_status:
            raise ValidationError("status", f"unknown status {st!r}; known: "
                                            f"{', '.join(known_status)}")
    stmt = select(Memory).where(Memory.tenant == scope.tenant)
    for level in LEVELS[1:]:
        value = getattr(scope, level)
        if value:
            stmt = stmt.where(getattr(Memory, level) == value)
    stmt = stmt.where(col(Memory.status).in_(list(statuses) or list(CURRENT_STATUSES)))
    if types:
        stmt = stmt.where(col(Memory.type).in_(list(types)))
    if cursor:
        stmt = stmt.where(col(Memory.id) > cursor)
    stmt = stmt.order_by(col(Memory.id)).limit(limit + 1)
    with Session(res.engine) as session:
        rows = list(session.exec(stmt))
    more = len(rows) > limit
    rows = rows[:limit]
    return MemoryPage(items=[MemoryView.of(m) for m in rows],
                      next_cursor=rows[-1].id if more and rows else None)


def _audit_row(mem: Memory, op: str, *, before: list[str], after: list[str], reason: str,
               worker: str, now: datetime) -> Audit:
    """A person's action on ``mem``, through the one audit-row builder."""
    return Audit(**audit_row(op=op, tenant=mem.tenant, scope_key=mem.scope_key, reason=reason,
                             task_id="", worker=worker, at=now, before=before, after=after,
                             extractor="human"))


def _recorded(mem: Memory, draft: versions.AuditDraft, *, worker: str, now: datetime) -> Audit:
    """The audit row of a new version a person made of ``mem`` (write.versions)."""
    return Audit(**versions.audit_values(draft, tenant=mem.tenant, scope_key=mem.scope_key,
                                         at=now, task_id="", worker=worker, extractor="human"))


def _current(mem: Memory) -> None:
    if mem.status not in CURRENT_STATUSES:
        newer = f" {mem.superseded_by}" if mem.superseded_by else ""
        raise ValidationError(
            "memory", f"{mem.id} is {mem.status}, not current; use the current version{newer}"
        )


def _index_now(res: Resources, *, upsert: list[Memory], payload: list[Memory]) -> None:
    try:
        apply_to_index(engine=res.engine, index=res.index, embedder=res.embedder,
                       upsert=upsert, payload_only=payload, delete=[])
    except SleepmemError as exc:
        # SQL is the truth and has committed; the reconciler pushes what stayed pending.
        log.warning("memory_index_deferred", error=type(exc).__name__)


def update_memory(
    res: Resources, *, memory_id: str, tenant: str | None, statement: str,
    importance: float | None = None, reason: str = "", worker: str = "api",
) -> MemoryView:
    """A person's edit: the old version is closed, a new one (trust 'human') appended."""
    # A person's words enter SQL, the audit and the index here, as an event's do at the
    # drain: redacted once, at this boundary.
    text = redact_text(statement.strip())
    reason = redact_text(reason)
    if not text:
        raise ValidationError("statement", "must contain some text")
    now = res.ports().clock()
    with Session(res.engine, expire_on_commit=False) as session:
        old = _visible_memory(session, memory_id, tenant)
        _current(old)
        new = copy_row(old)
        new.id = uuid.uuid4().hex
        versions.successor(new, of=old)
        new.statement = text
        new.source = Trust.human.value
        new.trust = Trust.human.value
        new.confidence = 1.0
        new.importance = old.importance if importance is None else importance
        new.status = MemoryStatus.active.value
        new.conflict_set = None
        new.valid_from = now
        new.recorded_at = now
        new.last_access = now
        new.demoted = False
        new.needs_verification = False
        new.expires_at = None if old.pinned else expiry(
            memory_type=old.type, base=now, ttl=res.settings.ttl(old.type))
        new.details = {**old.details, "edited_by": "human"}
        new.index_state = IndexState.pending.value
        # Editing one side of a conflict set is the person's answer to it: the edited
        # version wins, the other sides are invalidated in the same transaction.
        settled = set_id = old.conflict_set
        versions.supersede(old, by=new.id, at=now, now=now)
        old.index_state = IndexState.pending.value
        session.add(old)
        session.add(new)
        session.add(_recorded(old, versions.AuditDraft(
            Op.UPDATE, [old.id], [new.id],
            f"edited by a person{': ' + reason if reason else ''}", []), worker=worker, now=now))
        others: list[Memory] = []
        if set_id:
            others = [m for m in _conflict_sides(session, set_id, old.tenant) if m.id != old.id]
            _settle(session, set_id, kept=new, others=others, now=now, worker=worker,
                    reason="resolved by a person's edit of one side", before=[old.id])
        # The edited version's names and relations; the old one's relations retire.
        entity_store.record_versions(session, scope_key=old.scope_key, new=[new],
                                     retired=[old, *others], now=now)
        session.commit()
    _index_now(res, upsert=[new], payload=[old, *others])
    if settled:
        log.info("conflict_resolved", tenant=new.tenant, conflict_set=settled, kept=new.id,
                 invalidated=len(others), by="edit")
    log.info("memory_edit", tenant=new.tenant, memory_id=old.id, new_id=new.id)
    return MemoryView.of(new)


def pin_memory(
    res: Resources, *, memory_id: str, tenant: str | None, pinned: bool, worker: str = "api",
) -> MemoryView:
    """Pinned: no expiry, no decay, never swept. Unpinned: expiry starts again from now."""
    now = res.ports().clock()
    with Session(res.engine, expire_on_commit=False) as session:
        mem = _visible_memory(session, memory_id, tenant)
        _current(mem)
        if mem.pinned != pinned:
            mem.pinned = pinned
            mem.demoted = False if pinned else mem.demoted
            mem.expires_at = None if pinned else expiry(
                memory_type=mem.type, base=now, ttl=res.settings.ttl(mem.type))
            mem.index_state = IndexState.pending.value
            session.add(mem)
            session.add(_audit_row(mem, "PIN" if pinned else "UNPIN", before=[mem.id],
                                   after=[mem.id], reason="pinned by a person" if pinned
                                   else "unpinned by a person", worker=worker, now=now))
            session.commit()
            _index_now(res, upsert=[], payload=[mem])
    log.info("memory_pin", tenant=mem.tenant, memory_id=mem.id, pinned=pinned)
    return MemoryView.of(mem)


HELPFUL_STEP = 0.1


def memory_feedback(
    res: Resources, *, memory_id: str, tenant: str | None, verdict: str, note: str = "",
    worker: str = "api",
) -> MemoryView:
    """helpful: importance up a step and recency refreshed; wrong: invalidated (no longer
    current, still explainable; ``as_of`` before now still sees it)."""
    if verdict not in ("helpful", "wrong"):
        raise ValidationError("verdict", f"must be 'helpful' or 'wrong', got {verdict!r}")
    now = res.ports().clock()
    suffix = f": {redact_text(note)}" if note else ""  # the note is kept in the audit
    with Session(res.engine, expire_on_commit=False) as session:
        mem = _visible_memory(session, memory_id, tenant)
        _current(mem)
        if verdict == "helpful":
            mem.importance = min(1.0, round(mem.importance + HELPFUL_STEP, 6))
            mem.last_access = now
            mem.demoted = False
            audit = _audit_row(mem, "FEEDBACK", before=[mem.id], after=[mem.id],
                               reason=f"marked helpful by a person: importance up{suffix}",
                               worker=worker, now=now)
        else:
            versions.invalidate(mem, at=now, now=now)
            mem.index_state = IndexState.pending.value
            audit = _recorded(mem, versions.AuditDraft(
                Op.INVALIDATE, [mem.id], [], f"marked wrong by a person{suffix}", []),
                worker=worker, now=now)
        session.add(mem)
        session.add(audit)
        if verdict == "wrong":
            entity_store.follow_memories(session, memories=[mem], now=now)
        session.commit()
    if verdict == "wrong":
        _index_now(res, upsert=[], payload=[mem])
    log.info("memory_feedback", tenant=mem.tenant, memory_id=mem.id, verdict=verdict)
    return MemoryView.of(mem)


def memory_history(res: Resources, *, memory_id: str, tenant: str | None) -> list[MemoryView]:
    """Every version of the memory's lineage, oldest first."""
    with Session(res.engine) as session:
        mem = _visible_memory(session, memory_id, tenant)
        rows = session.exec(
            select(Memory).where(Memory.lineage == mem.lineage)
            .order_by(col(Memory.version), col(Memory.recorded_at))
        ).all()
        return [MemoryView.of(m) for m in rows]


# -- conflict sets, as a person settles them ---------------------------------------------
#
# Two high-trust statements that disagree wait as a conflict set (pending_confirmation)
# until a person says which is true: that side becomes active with trust 'human', the
# others are invalidated and superseded by it, all in one transaction with one RESOLVE
# audit row naming every side.


def _conflict_sides(session: Session, conflict_set: str, tenant: str | None) -> list[Memory]:
    stmt = select(Memory).where(
        col(Memory.conflict_set) == conflict_set,
        col(Memory.status) == MemoryStatus.pending_confirmation.value,
    )
    if tenant is not None:
        stmt = stmt.where(col(Memory.tenant) == tenant)
    # Row locks (PostgreSQL): a second person deciding the same set at the same moment
    # waits, then finds it no longer open instead of overwriting the first decision.
    return list(session.exec(
        stmt.order_by(col(Memory.valid_from), col(Memory.id)).with_for_update()))


def _settle(session: Session, conflict_set: str, *, kept: Memory, others: Sequence[Memory],
            now: datetime, worker: str, reason: str, before: Sequence[str] = ()) -> None:
    for mem in others:
        versions.supersede(mem, by=kept.id, at=now, now=now)
        mem.details = {**mem.details, "resolved_conflict_set": conflict_set}
        mem.index_state = IndexState.pending.value
        session.add(mem)
    entity_store.follow_memories(session, memories=others, now=now)
    kept.details = {**kept.details, "resolved_conflict_set": conflict_set}
    session.add(kept)
    session.add(_recorded(kept, versions.AuditDraft(
        Op.RESOLVE, list(dict.fromkeys([*before, *(m.id for m in others)])), [kept.id],
        f"conflict set {conflict_set} {reason}; kept {kept.id}", []), worker=worker, now=now))


def resolve_conflict(
    res: Resources, *, conflict_set: str, keep: str, tenant: str | None, reason: str = "",
    worker: str = "api",
) -> ConflictResolution:
    """Keep one side of a conflict set: it becomes active, confirmed by a person (trust
    'human'); every other side is invalidated and superseded by it."""
    now = res.ports().clock()
    with Session(res.engine, expire_on_commit=False) as session:
        sides = _conflict_sides(session, conflict_set, tenant)
        if not sides:
            # Another tenant's set is reported missing, like one that never existed.
            # The answer repeats no id: the caller has it (issue 41).
            raise NotFoundError("no open conflict set by that id (resolved already, or never "
                                "existed)")
        chosen = next((m for m in sides if m.id == keep), None)
        if chosen is None:
            raise ValidationError("keep", "not a side of this conflict set; its sides are "
                                          f"{', '.join(m.id for m in sides)}")
        others = [m for m in sides if m.id != keep]
        chosen.status = MemoryStatus.active.value
        chosen.conflict_set = None
        chosen.trust = Trust.human.value
        chosen.confidence = 1.0
        chosen.needs_verification = False
        chosen.index_state = IndexState.pending.value
        _settle(session, conflict_set, kept=chosen, others=others, now=now, worker=worker,
                reason=f"resolved by a person{': ' + redact_text(reason) if reason else ''}")
        session.commit()
    _index_now(res, upsert=[], payload=[chosen, *others])
    log.info("conflict_resolved", tenant=chosen.tenant, conflict_set=conflict_set,
             kept=chosen.id, invalidated=len(others), by="choice")
    return ConflictResolution(conflict_set=conflict_set, kept=MemoryView.of(chosen),
                              invalidated=[MemoryView.of(m) for m in others])
