"""explain(memory): where a memory came from, every version of it, and why it is (not) current.

Given a query too, the explanation also says how that search found it (pipelines/read/found.py).

Read-only. Raw events are shown as stored, which is after redaction; an erased memory is
not found (its audit rows hold only ids and a hash, which is all explain can say of it).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from pydantic import BaseModel
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from sleepmem.core.errors import NO_MEMORY, NotFoundError
from sleepmem.core.settings import Settings
from sleepmem.models import CURRENT_STATUSES, Audit, AuditMemory, Memory, MemoryStatus
from sleepmem.pipelines import store as repo
from sleepmem.pipelines.decay import PROTECTED_TYPES, aware, falls_below_at, survival
from sleepmem.pipelines.read.found import QueryExplanation

MAX_EVENT_CHARS = 500
_ERASING_OPS = ("DELETE", "ERASE")


class SourceEvent(BaseModel):
    event_id: str
    at: datetime
    kind: str
    role: str
    session: str
    content: str


class Version(BaseModel):
    id: str
    version: int
    status: str
    statement: str
    type: str
    source: str
    trust: str
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    invalidated_at: datetime | None
    supersedes: str | None
    superseded_by: str | None
    importance: float
    confidence: float
    mention_count: int
    access_count: int
    last_access: datetime
    expires_at: datetime | None
    demoted: bool
    archived_at: datetime | None
    needs_verification: bool


class AuditLine(BaseModel):
    at: datetime
    op: str
    reason: str
    before: list[str]
    after: list[str]
    task_id: str
    extractor: str
    pipeline_version: str


class Explanation(BaseModel):
    memory_id: str
    lineage: str
    scope_key: str
    tenant: str
    status: str
    current: bool
    why: str
    survival: float | None
    survives_until: datetime | None
    versions: list[Version]
    events: list[SourceEvent]
    audits: list[AuditLine]
    # With a query: which routes of that search found this memory, and how it ranked.
    query: QueryExplanation | None = None


def explain(
    *, engine: Engine, memory_id: str, settings: Settings, now: datetime,
    recent_hits: Sequence[datetime] = (),
) -> Explanation:
    """``recent_hits``: when searches returned the memory since the importance refresh last
    applied hits to SQL; they count as retrievals here, as they will once applied."""
    now = aware(now)
    with Session(engine) as session:
        mem = session.get(Memory, memory_id)
        if mem is None:
            raise NotFoundError(_gone_message(session, memory_id))
        versions = repo.lineage_versions(session, lineage=mem.lineage)
        audits = audits_naming(session, [v.id for v in versions])
        event_ids = sorted({e for v in versions for e in v.provenance})
        events = sorted(repo.events_by_ids(session, tenant=mem.tenant, ids=event_ids),
                        key=lambda r: (aware(r.at), r.event_id))
    if recent_hits:
        # Detached now (the session is closed): what is set here is never written back.
        mem.access_count += len(recent_hits)
        mem.last_access = max(aware(mem.last_access), *(aware(t) for t in recent_hits))
    surv, until = _survival(mem, settings, now)
    return Explanation(
        memory_id=mem.id, lineage=mem.lineage, scope_key=mem.scope_key, tenant=mem.tenant,
        status=mem.status, current=mem.status in CURRENT_STATUSES,
        why=_why(mem, audits, settings, now, until),
        survival=None if surv is None else round(surv, 4), survives_until=until,
        versions=[_version(v) for v in versions],
        events=[
            SourceEvent(event_id=r.event_id, at=aware(r.at), kind=r.kind, role=r.role,
                        session=r.session, content=r.content[:MAX_EVENT_CHARS])
            for r in events
        ],
        audits=[
            AuditLine(at=aware(a.at), op=a.op, reason=a.reason, before=a.memory_ids_before,
                      after=a.memory_ids_after, task_id=a.task_id, extractor=a.extractor,
                      pipeline_version=a.pipeline_version)
            for a in audits
        ],
    )


def audits_naming(session: Session, ids: list[str]) -> list[Audit]:
    """Audit rows naming any of ``ids`` (batched lifecycle rows name many ids at once)."""
    if not ids:
        return []
    naming = select(AuditMemory.audit_id).where(col(AuditMemory.memory_id).in_(ids))
    stmt = select(Audit).where(col(Audit.id).in_(naming)).order_by(col(Audit.at), col(Audit.id))
    return list(session.exec(stmt))


def _gone_message(session: Session, memory_id: str) -> str:
    for audit in reversed(audits_naming(session, [memory_id])):
        if audit.op in _ERASING_OPS:
            return (f"this memory was erased on {_day(audit.at)} ({audit.op}); "
                    "the audit keeps only its id and a content hash")
    return NO_MEMORY


def _survival(
    mem: Memory, settings: Settings, now: datetime
) -> tuple[float | None, datetime | None]:
    if mem.type in PROTECTED_TYPES or mem.details.get("authored") or mem.pinned:
        return None, None
    half_life = settings.half_life_s.get(mem.type)
    age = (now - aware(mem.last_access)).total_seconds()
    surv = survival(importance=mem.importance, age_s=age, half_life_s=half_life)
    until = falls_below_at(last_access=mem.last_access, importance=mem.importance,
                           half_life_s=half_life, threshold=settings.archive_below)
    if mem.expires_at is not None and (until is None or aware(mem.expires_at) < until):
        until = aware(mem.expires_at)
    return surv, until


def _why(
    mem: Memory, audits: list[Audit], settings: Settings, now: datetime,
    until: datetime | None,
) -> str:
    status = mem.status
    if status == MemoryStatus.superseded.value:
        reason = _reason(audits, mem.id, ("UPDATE", "INVALIDATE", "MERGE", "COMPRESS"))
        by = f"by {mem.superseded_by} " if mem.superseded_by else ""
        return (f"superseded {by}on {_day(mem.invalidated_at)}"
                + (f" ({reason})" if reason else ""))
    if status == MemoryStatus.archived.value:
        reason = _reason(audits, mem.id, ("ARCHIVE", "EVICT", "RECONSOLIDATE"))
        return (f"archived on {_day(mem.archived_at)}" + (f" ({reason})" if reason else "")
                + f"; out of default search, deleted after {_deletion(mem, settings)}")
    if status == MemoryStatus.expired.value:
        return (f"expired on {_day(mem.expires_at)} (not mentioned or retrieved since); "
                f"deleted after {_deletion(mem, settings)}")
    parts = [
        f"{'in a conflict set awaiting confirmation' if mem.conflict_set else 'active'}: "
        f"{_origin(mem)} on {_day(mem.valid_from)}",
        f"mentioned {mem.mention_count}×",
        f"last used {_day(mem.last_access)}" if mem.access_count else "never retrieved yet",
    ]
    if mem.pinned:
        parts.append("never forgotten (pinned)")
    elif mem.type in PROTECTED_TYPES or mem.details.get("authored"):
        who = "written by a person" if mem.details.get("authored") else mem.type
        parts.append(f"never forgotten ({who})")
    else:
        half_life = settings.half_life_s.get(mem.type)
        hl = f"half-life {half_life / 86400:g} d" if half_life else "no decay"
        parts.append(f"survives until {_day(until)} ({hl})" if until else f"({hl})")
    if mem.demoted:
        parts.append("demoted: fading")
    if mem.needs_verification:
        parts.append("flagged for verification after negative feedback")
    if mem.expires_at is not None and aware(mem.expires_at) <= now:
        parts.append("past its expiry: no longer returned")
    return ", ".join(parts)


def _reason(audits: list[Audit], memory_id: str, ops: tuple[str, ...]) -> str:
    for audit in reversed(audits):
        if audit.op in ops and memory_id in (audit.memory_ids_before or []):
            return audit.reason
    return ""


def _deletion(mem: Memory, settings: Settings) -> str:
    start = mem.archived_at or mem.expires_at
    if start is None:
        return f"{settings.delete_after_s / 86400:g} d"
    return _day(aware(start) + timedelta(seconds=settings.delete_after_s))


def _origin(mem: Memory) -> str:
    if mem.source == "human":
        return "written by a person"
    if mem.details.get("resolved_conflict_set"):
        # Kept when a person settled a conflict: who stated it, and who confirmed it.
        return f"stated by the {mem.source}, confirmed by a person"
    return f"stated by the {mem.source}"


def _day(t: datetime | None) -> str:
    return "?" if t is None else aware(t).strftime("%Y-%m-%d")


def _version(v: Memory) -> Version:
    return Version(
        id=v.id, version=v.version, status=v.status, statement=v.statement, type=v.type,
        source=v.source, trust=v.trust, valid_from=aware(v.valid_from),
        valid_to=_opt(v.valid_to), recorded_at=aware(v.recorded_at),
        invalidated_at=_opt(v.invalidated_at), supersedes=v.supersedes,
        superseded_by=v.superseded_by, importance=v.importance, confidence=v.confidence,
        mention_count=v.mention_count, access_count=v.access_count,
        last_access=aware(v.last_access), expires_at=_opt(v.expires_at), demoted=v.demoted,
        archived_at=_opt(v.archived_at), needs_verification=v.needs_verification,
    )


def _opt(t: datetime | None) -> datetime | None:
    return None if t is None else aware(t)
