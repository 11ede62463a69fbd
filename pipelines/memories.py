"""Building memory versions: ids, expiry, hashing. Shared by resolve, compress, lifecycle."""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime, timedelta

from sleepmem.models import Memory, MemoryStatus
from sleepmem.pipelines import PIPELINE_VERSION
from sleepmem.pipelines.types import Candidate

_ID_NS = uuid.UUID("5f1c6f0e-4d55-4a52-9a0b-1c2f5e6d7a80")


def memory_id(*parts: str) -> str:
    """Deterministic: a retried batch produces the same ids, so it cannot duplicate."""
    return uuid.uuid5(_ID_NS, "\x1f".join(parts)).hex


def content_hash(*texts: str) -> str:
    return hashlib.sha256("\x1f".join(texts).encode()).hexdigest()


def norm_text(text: str) -> str:
    return " ".join("".join(c if c.isalnum() or c == "_" or c.isspace() else " "
                            for c in text.casefold()).split())


def expiry(
    *, memory_type: str, base: datetime, ttl: timedelta | None
) -> datetime | None:
    return None if ttl is None else base + ttl


def new_memory(
    cand: Candidate,
    *,
    scope_key: str,
    now: datetime,
    ttl: timedelta | None,
    extractor: str,
    lineage: str | None = None,
    version: int = 1,
    supersedes: str | None = None,
    status: str = MemoryStatus.active.value,
) -> Memory:
    seed = cand.provenance[0] if cand.provenance else now.isoformat()
    mid = memory_id(
        scope_key, cand.scope.session, cand.subject, cand.attribute, seed, norm_text(cand.statement)
    )
    details = dict(cand.details)
    if cand.value:
        details["value"] = cand.value
    if cand.emphasis:
        details["emphasis"] = True
    return Memory(
        id=mid,
        lineage=lineage or mid,
        tenant=cand.scope.tenant,
        agent=cand.scope.agent,
        user=cand.scope.user,
        project=cand.scope.project,
        session=cand.scope.session,
        scope_key=scope_key,
        type=cand.type,
        subject=cand.subject,
        attribute=cand.attribute,
        statement=cand.statement,
        source=cand.source,
        trust=cand.trust,
        confidence=cand.confidence,
        importance=cand.importance,
        valid_from=cand.valid_from,
        recorded_at=now,
        expires_at=expiry(memory_type=cand.type, base=now, ttl=ttl),
        supersedes=supersedes,
        version=version,
        mention_count=1,
        access_count=0,
        last_access=now,
        provenance=list(dict.fromkeys(cand.provenance)),
        status=status,
        details=details,
        pipeline_version=PIPELINE_VERSION,
        extractor=extractor,
    )


def own_words(mem: Memory) -> str:
    """What a memory's own event said: an episode that carries the turn it answers keeps
    that turn in front of its ``reply_offset``."""
    offset = mem.details.get("reply_offset")
    return mem.statement[offset:] if isinstance(offset, int) else mem.statement


def own_events(mem: Memory) -> list[str]:
    """The events a memory's :func:`own_words` come from: an episode's provenance without
    the turn it answers."""
    context = mem.details.get("context_event")
    return [e for e in mem.provenance if e != context]


def copy_row(mem: Memory) -> Memory:
    """A detached copy to mutate; persist merges it back by primary key."""
    data = mem.model_dump()
    data["provenance"] = list(mem.provenance)
    data["details"] = dict(mem.details)
    return Memory(**data)
