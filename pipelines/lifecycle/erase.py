"""Erasure (memory semantics rule 3): physically remove a scope or a memory, everywhere.

A scope takes every narrower scope under it with it (erasing a user erases their projects
and sessions). Removed: raw events, every memory version, vector points, dead letters,
entities, their aliases, mentions and relations, stored values (the LangGraph store's),
scope state, operator jobs (their diffs quote statements), the Redis keys the service keeps
for the scope (lease, queued marker), entries of the ingest stream not yet drained, and
retrieval-hit entries naming the erased memories. The consolidation lease of every affected
scope is held throughout, so no consolidation writes into a scope being erased.

The audit keeps the operation, ids, counts and a content hash, never content; after a
scope's erasure its audit rows (and the erasure's own) name the scope by its
:func:`pseudonym`, the user, project and session replaced by keyed hashes, since a user id
may be an e-mail address. The caller gets a :class:`DeletionReceipt` saying what was
removed where. Erasing twice is harmless: the second receipt counts zeros.
"""

from __future__ import annotations

import hashlib
import re
import time
import uuid
from datetime import datetime
from typing import Any

import orjson
import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql.elements import ColumnElement
from sqlmodel import col

from sleepmem.core.errors import NO_MEMORY, ConfigurationError, NotFoundError
from sleepmem.core.keys import scope_digest
from sleepmem.core.logs import get_logger
from sleepmem.models import (
    LEVELS,
    Audit,
    DeadLetter,
    Entity,
    Job,
    Memory,
    RawEvent,
    Scope,
    ScopeState,
    SessionCheckpoint,
    StoreValue,
)
from sleepmem.pipelines.decay import aware
from sleepmem.pipelines.entities import store as entity_store
from sleepmem.pipelines.lifecycle.pseudonyms import event_pseudonym, key_levels, pseudonym
from sleepmem.pipelines.ports import HotStore, Ports, VectorIndex
from sleepmem.pipelines.store import audit_row

log = get_logger("sleepmem.erase")

BATCH = 1000
AUDIT_IDS_PER_ROW = 5000
_LEVEL_FIELD = re.compile(r'"(tenant|agent|user|project|session)"\s*:\s*"([^"]*)"')
_EVENT_ID_FIELD = re.compile(r'"event_id"\s*:\s*"([^"]*)"')


class DeletionReceipt(BaseModel):
    """What an erasure removed, where, and when. Holds ids and counts, never content."""

    receipt_id: str
    op: str
    tenant: str
    scope_key: str | None = None
    memory_id: str | None = None
    at: datetime
    removed: dict[str, int]
    content_hash: str
    seconds: float
    # Each store and its state after the erasure ("deleted", "compacted", "rewritten", ...).
    stores: dict[str, str] = {}


class _Hasher:
    """One hash over everything erased, in a stable order, without holding it in memory."""

    def __init__(self) -> None:
        self._h = hashlib.sha256()

    def add(self, *texts: str) -> None:
        for text in texts:
            self._h.update(text.encode())
            self._h.update(b"\x1f")

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def _hot(ports: Ports) -> HotStore:
    if ports.hot is None:
        raise ConfigurationError("erasure needs ports.hot: the store of pending events and hits")
    return ports.hot


def check_scope(scope: Scope | str) -> Scope:
    return scope if isinstance(scope, Scope) else Scope.parse_key(scope)


def within(model: Any, scope: Scope) -> ColumnElement[bool]:
    """Rows of ``model`` at ``scope`` or any narrower scope under it."""
    conds = [col(model.tenant) == scope.tenant]
    for level in LEVELS[1:]:
        value = getattr(scope, level)
        if value:
            conds.append(getattr(model, level) == value)
    return sa.and_(*conds)


def covers(scope: Scope, levels: dict[str, str]) -> bool:
    """True when a thing at ``levels`` is at ``scope`` or under it."""
    return all(
        not getattr(scope, lvl) or levels.get(lvl, "") == getattr(scope, lvl) for lvl in LEVELS
    ) and levels.get("tenant") == scope.tenant


def erase_scope(
    *,
    engine: Engine,
    ports: Ports,
    scope: Scope | str,
    task_id: str = "",
    worker: str = "",
    audit_key: bytes,
    keep_job: str | None = None,
) -> DeletionReceipt:
    """Erase ``scope`` and everything under it; ``audit_key`` keys the pseudonyms that the
    audit keeps in place of the scope's user, project and session ids."""
    started = time.perf_counter()
    now, index, hot = ports.clock(), ports.index, _hot(ports)
    if not audit_key:
        raise ConfigurationError("erasure needs an audit key (sleepmem.core.auditkey)")
    target = check_scope(scope)
    removed: dict[str, int] = {}
    hasher = _Hasher()
    with engine.connect() as conn:
        scope_keys = _scope_keys(conn, target)
        with hot.hold_scopes(scope_keys):
            # The stream first: nothing of the scope may be drained in while we erase.
            removed["stream_entries"] = hot.erase_pending_events(
                lambda levels: covers(target, levels)
            )
            with conn.begin():
                entities = entity_store.count_within(conn, where=within(Entity, target))
            ids = _erase_memories(conn, index, within(Memory, target), hasher)
            removed["memories"] = len(ids)
            removed["vector_points"] = len(ids) + _erase_orphan_points(index, target)
            removed["raw_events"] = _erase_events(conn, within(RawEvent, target), hasher)
            removed["dead_letters"] = _erase_dead_letters(
                conn, lambda levels, _eid: covers(target, levels)
            )
            with conn.begin():
                # Most went with their memories; whatever is left goes here.
                entity_store.erase_within(conn, where=within(Entity, target))
                removed["entities"] = entities
                removed["scope_state"] = _rowcount(
                    conn.execute(sa.delete(ScopeState).where(within(ScopeState, target)))
                )
                removed["jobs"] = _erase_jobs(conn, target, keep_job)
                removed["checkpoint_versions"] = _rowcount(conn.execute(
                    sa.delete(SessionCheckpoint).where(within(SessionCheckpoint, target))
                ))
                removed["store_values"] = _rowcount(conn.execute(
                    sa.delete(StoreValue).where(within(StoreValue, target))
                ))
            removed["checkpoints"] = hot.erase_checkpoints(lambda levels: covers(target, levels))
            removed["hit_entries"] = hot.erase_hits(set(ids))
            removed["redis_keys"] = hot.erase_scope_markers(scope_keys)
            removed["audit_rows_pseudonymised"] = _pseudonymise_audit(conn, target, audit_key)
        receipt = DeletionReceipt(
            receipt_id=uuid.uuid4().hex, op="ERASE_SCOPE", tenant=target.tenant,
            scope_key=pseudonym(target.key, key=audit_key), at=aware(now), removed=removed,
            content_hash=hasher.hexdigest(), seconds=round(time.perf_counter() - started, 3),
        )
        _audit(conn, receipt, ids, task_id=task_id, worker=worker)
    log.info("erase", kind="scope", scope=scope_digest(target.key), tenant=target.tenant,
             receipt=receipt.receipt_id, seconds=receipt.seconds, task_id=task_id,
             **removed)
    return receipt


def erase_memory(
    *,
    engine: Engine,
    ports: Ports,
    memory_id: str,
    task_id: str = "",
    worker: str = "",
) -> DeletionReceipt:
    """Erase one memory: every version of it, the raw events it came from, summaries that
    quote those events, their vectors and hit entries. Other memories only lose the erased
    event ids from their provenance."""
    started = time.perf_counter()
    now, index, hot = ports.clock(), ports.index, _hot(ports)
    with engine.connect() as conn:
        with conn.begin():
            row = conn.execute(
                sa.select(col(Memory.lineage), col(Memory.tenant), col(Memory.scope_key))
                .where(col(Memory.id) == memory_id)
            ).first()
        if row is None:
            raise NotFoundError(NO_MEMORY)
        lineage, tenant, scope_key = row
        hasher = _Hasher()
        removed: dict[str, int] = {}
        with hot.hold_scopes([scope_key]):
            with conn.begin():
                versions = conn.execute(
                    sa.select(col(Memory.id), col(Memory.provenance))
                    .where(col(Memory.lineage) == lineage)
                ).all()
            events = sorted({e for _mid, prov in versions for e in (prov or [])})
            quoting = _summaries_quoting(conn, scope_key, set(events))
            victims = sorted({v[0] for v in versions} | quoting)
            ids = _erase_memories(conn, index, col(Memory.id).in_(victims), hasher)
            removed["memories"] = len(ids)
            removed["vector_points"] = len(ids)
            removed["raw_events"] = _erase_events(
                conn,
                sa.and_(col(RawEvent.tenant) == tenant, col(RawEvent.event_id).in_(events)),
                hasher,
            ) if events else 0
            removed["provenance_scrubbed"] = _scrub_provenance(conn, scope_key, set(events))
            wanted = set(events)
            removed["dead_letters"] = _erase_dead_letters(
                conn, lambda _levels, eid: eid in wanted
            )
            with conn.begin():
                removed["jobs_scrubbed"] = _scrub_jobs(conn, tenant, set(ids))
            removed["hit_entries"] = hot.erase_hits(set(ids))
        receipt = DeletionReceipt(
            receipt_id=uuid.uuid4().hex, op="ERASE_MEMORY", tenant=tenant, scope_key=scope_key,
            memory_id=memory_id, at=aware(now), removed=removed,
            content_hash=hasher.hexdigest(), seconds=round(time.perf_counter() - started, 3),
        )
        _audit(conn, receipt, ids, task_id=task_id, worker=worker)
    log.info("erase", kind="memory", memory_id=memory_id, tenant=tenant,
             receipt=receipt.receipt_id, seconds=receipt.seconds, task_id=task_id, **removed)
    return receipt


# -- the audit after an erasure (sleepmem.pipelines.lifecycle.pseudonyms) ------------------


ERASED_REASON = "(dropped at erasure)"


def _pseudonymise_audit(conn: Connection, target: Scope, key: bytes) -> int:
    """Audit rows of ``target`` and the scopes under it keep ops, memory ids, counts and
    hashes. Their scope key and the client event ids they name become keyed pseudonyms, and
    their reason (a person's edit reason or feedback note may quote the user) is dropped."""
    n = 0
    with conn.begin():
        found = conn.execute(
            sa.select(col(Audit.id), col(Audit.scope_key), col(Audit.reason),
                      col(Audit.input_event_ids))
            .where(col(Audit.tenant) == target.tenant)
        ).all()
        for row_id, old, reason, event_ids in found:
            if not covers(target, key_levels(old)):
                continue  # another scope, or already pseudonymous
            n += _rowcount(conn.execute(
                sa.update(Audit).where(col(Audit.id) == row_id).values(
                    scope_key=pseudonym(old, key=key),
                    reason=ERASED_REASON if reason else "",
                    input_event_ids=[event_pseudonym(target.tenant, e, key=key)
                                     for e in event_ids or []],
                )
            ))
    return n


# -- SQL + index -------------------------------------------------------------------------


def _scope_keys(conn: Connection, target: Scope) -> list[str]:
    """Consolidation scope keys under ``target``: the leases and markers to clear."""
    with conn.begin():
        found: set[str] = set()
        for model in (RawEvent, Memory, ScopeState):
            found.update(
                conn.execute(sa.select(col(model.scope_key)).where(within(model, target))
                             .distinct()).scalars()
            )
    found.add(target.owner.key)
    return sorted(found)


def _erase_memories(
    conn: Connection, index: VectorIndex, where: ColumnElement[bool], hasher: _Hasher
) -> list[str]:
    """Delete matching memory rows batch by batch, their points first (a crash leaves rows,
    which a second erasure finds, rather than points nothing points at)."""
    erased: list[str] = []
    while True:
        with conn.begin():
            rows = conn.execute(
                sa.select(col(Memory.id), col(Memory.statement)).where(where)
                .order_by(col(Memory.id)).limit(BATCH)
            ).all()
            if not rows:
                return erased
            ids = [r[0] for r in rows]
            for _mid, statement in rows:
                hasher.add(statement)
            index.delete(ids)
            conn.execute(sa.delete(Memory).where(col(Memory.id).in_(ids)))
            # Their names and relations too; entities nothing mentions any more follow.
            entity_store.prune(conn, scope_keys=entity_store.forget_memories(conn, ids=ids))
        erased.extend(ids)


def _erase_orphan_points(index: VectorIndex, target: Scope) -> int:
    """Points of the scope that SQL no longer knows (a crash between index and SQL)."""
    orphans: list[str] = []
    ids = index.all_ids(tenant=target.tenant)
    for i in range(0, len(ids), BATCH):
        payloads = index.payloads(ids[i : i + BATCH])
        orphans.extend(
            mid for mid, p in payloads.items()
            if covers(target, {lvl: str(p.get(lvl) or "") for lvl in LEVELS})
        )
    if orphans:
        index.delete(orphans)
    return len(orphans)


def _erase_events(conn: Connection, where: ColumnElement[bool], hasher: _Hasher) -> int:
    n = 0
    while True:
        with conn.begin():
            rows = conn.execute(
                sa.select(col(RawEvent.event_id), col(RawEvent.content)).where(where)
                .order_by(col(RawEvent.event_id)).limit(BATCH)
            ).all()
            if not rows:
                return n
            for _eid, content in rows:
                hasher.add(content)
            # ``where`` again: event ids are unique within a tenant, not across tenants.
            conn.execute(
                sa.delete(RawEvent).where(where, col(RawEvent.event_id).in_([r[0] for r in rows]))
            )
        n += len(rows)


def _dead_letter_owner(payload: str) -> tuple[dict[str, str], str]:
    """(scope levels, event id) of a dead letter; payloads may be truncated JSON."""
    try:
        data = orjson.loads(payload)
        if isinstance(data, dict):
            inner = data.get("e")
            if isinstance(inner, str):
                data = orjson.loads(inner)
            levels = {lvl: str(data.get(lvl) or "") for lvl in LEVELS}
            return levels, str(data.get("event_id") or "")
    except orjson.JSONDecodeError:
        pass
    levels = {lvl: "" for lvl in LEVELS}
    levels.update(dict(_LEVEL_FIELD.findall(payload)))
    m = _EVENT_ID_FIELD.search(payload)
    return levels, m.group(1) if m else ""


def _erase_dead_letters(conn: Connection, match: Any) -> int:
    n = 0
    last = 0
    while True:
        with conn.begin():
            rows = conn.execute(
                sa.select(col(DeadLetter.id), col(DeadLetter.payload))
                .where(col(DeadLetter.id) > last).order_by(col(DeadLetter.id)).limit(BATCH)
            ).all()
            if not rows:
                return n
            last = int(rows[-1][0] or 0)
            doomed = [rid for rid, payload in rows if match(*_dead_letter_owner(payload))]
            if doomed:
                conn.execute(sa.delete(DeadLetter).where(col(DeadLetter.id).in_(doomed)))
            n += len(doomed)


def _erase_jobs(conn: Connection, target: Scope, keep: str | None) -> int:
    doomed = []
    for job_id, scope_key in conn.execute(
        sa.select(col(Job.id), col(Job.scope_key)).where(col(Job.tenant) == target.tenant)
    ):
        if job_id == keep or not scope_key:
            continue
        try:
            levels = Scope.from_key(scope_key).levels()
        except (ValueError, TypeError):
            continue
        if covers(target, levels):
            doomed.append(job_id)
    if doomed:
        conn.execute(sa.delete(Job).where(col(Job.id).in_(doomed)))
    return len(doomed)


def _summaries_quoting(conn: Connection, scope_key: str, events: set[str]) -> set[str]:
    """Summaries built from the erased events quote them: they go too (the next
    consolidation rebuilds them from what is left)."""
    if not events:
        return set()
    with conn.begin():
        rows = conn.execute(
            sa.select(col(Memory.id), col(Memory.provenance)).where(
                col(Memory.scope_key) == scope_key, col(Memory.type) == "summary"
            )
        ).all()
    return {mid for mid, prov in rows if events & set(prov or [])}


def _scrub_provenance(conn: Connection, scope_key: str, events: set[str]) -> int:
    if not events:
        return 0
    n = 0
    with conn.begin():
        for mid, prov in conn.execute(
            sa.select(col(Memory.id), col(Memory.provenance))
            .where(col(Memory.scope_key) == scope_key)
        ).all():
            if events & set(prov or []):
                conn.execute(
                    sa.update(Memory).where(col(Memory.id) == mid)
                    .values(provenance=[e for e in prov if e not in events])
                )
                n += 1
    return n


def _scrub_jobs(conn: Connection, tenant: str, ids: set[str]) -> int:
    """Drop diff items that name an erased memory from re-consolidation job results."""
    n = 0
    for job_id, result in conn.execute(
        sa.select(col(Job.id), col(Job.result)).where(col(Job.tenant) == tenant)
    ).all():
        diff = (result or {}).get("diff")
        if not isinstance(diff, dict):
            continue
        changed = False
        for kind, items in diff.items():
            if not isinstance(items, list):
                continue
            kept = [i for i in items if not (isinstance(i, dict) and ids & _item_ids(i))]
            if len(kept) != len(items):
                diff[kind] = kept
                changed = True
        if changed:
            conn.execute(sa.update(Job).where(col(Job.id) == job_id)
                         .values(result={**result, "diff": diff}))
            n += 1
    return n


def _item_ids(item: dict[str, Any]) -> set[str]:
    return {str(item[k]) for k in ("id", "old_id", "new_id") if item.get(k)}


def _audit(
    conn: Connection, receipt: DeletionReceipt, ids: list[str], *, task_id: str, worker: str
) -> None:
    counts = ", ".join(f"{k}={v}" for k, v in sorted(receipt.removed.items()))
    chunks = [ids[i : i + AUDIT_IDS_PER_ROW] for i in range(0, len(ids), AUDIT_IDS_PER_ROW)]
    with conn.begin():
        for n, chunk in enumerate(chunks or [[]], start=1):
            conn.execute(
                sa.insert(Audit).values(**audit_row(
                    at=receipt.at, op="ERASE", tenant=receipt.tenant,
                    scope_key=receipt.scope_key or "", before=chunk,
                    reason=f"explicit erasure {receipt.op}, receipt {receipt.receipt_id} "
                           f"(part {n} of {max(1, len(chunks))}): {counts}",
                    task_id=task_id, worker=worker, content_hash=receipt.content_hash,
                ))
            )


def _rowcount(result: Any) -> int:
    return int(getattr(result, "rowcount", 0) or 0)
