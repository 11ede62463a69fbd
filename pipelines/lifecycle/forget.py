"""The forgetting sweep (README rule 5): expire, demote, archive, evict, then delete.

Three passes, each over keyset-paginated batches of narrow column tuples (never ORM
objects, never the whole table), each batch one SQL transaction with its audit rows:

1. delete: archived or expired for longer than ``delete_after_s`` → rows and index points
   removed; the audit keeps ids and a content hash only. Raw events are kept: they are the
   replay log re-consolidation rebuilds memory from, and erasure is the only path that
   removes them.
2. decay: ``expires_at`` passed → expired; survival under ``archive_below`` → archived;
   under ``demote_below`` → demoted (once).
3. capacity: a scope holding more than ``scope_capacity`` current memories archives its
   lowest-survival ones (EVICT).

Identity facts, procedures, rules written by people and pinned memories are never
touched. Every rule looks only at the row's state and the sweep's single ``now``, and a
changed row no longer matches its rule, so the sweep is idempotent: a run killed halfway
and run again ends where one uninterrupted run would. SQL changes commit before the index
is told; rows are marked ``index_state=pending`` until it has been, so the reconciler
repairs a crash between.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlmodel import col

from sleepmem.core.errors import SleepmemError
from sleepmem.core.logs import get_logger
from sleepmem.core.settings import Settings
from sleepmem.models import CURRENT_STATUSES, Audit, IndexState, Memory, MemoryStatus
from sleepmem.pipelines.decay import (
    aware,
    epoch_sql,
    half_life_array,
    survival_array,
    sweepable_sql,
)
from sleepmem.pipelines.entities import store as entity_store
from sleepmem.pipelines.lifecycle.batches import BatchRun, Counts
from sleepmem.pipelines.memories import content_hash
from sleepmem.pipelines.ports import Ports, VectorIndex
from sleepmem.pipelines.store import scope_audit_rows

log = get_logger("sleepmem.sweep")

BatchHook = Callable[[str, int], None]
"""Called after each committed batch with (pass name, batch number in that pass)."""

_GONE = (MemoryStatus.archived.value, MemoryStatus.expired.value)
SQLITE_CACHE_KIB = 128 * 1024
SQLITE_WAL_PAGES = 50_000


@dataclass(slots=True)
class SweepReport(Counts):
    scanned: int = 0
    expired: int = 0
    demoted: int = 0
    archived: int = 0
    evicted: int = 0
    deleted: int = 0
    batches: int = 0
    index_deferred: int = 0
    seconds: float = 0.0


@dataclass(slots=True)
class _Run(BatchRun):
    after_batch: BatchHook | None
    report: SweepReport
    # Rows the index has taken, marked indexed in the next transaction (one commit less
    # per batch); until then they are pending, which is only ever safe.
    unmarked: dict[str, list[str]] = field(default_factory=dict)

    def flush_marks(self) -> None:
        for status, ids in self.unmarked.items():
            for i in range(0, len(ids), self.batch):
                self.conn.execute(
                    sa.update(Memory)
                    .where(col(Memory.id).in_(ids[i : i + self.batch]),
                           col(Memory.status) == status)
                    .values(index_state=IndexState.indexed.value)
                )
        self.unmarked = {}

    def audit(
        self, op: str, groups: dict[tuple[str, str], list[str]], reason: str,
        hashes: dict[tuple[str, str], str] | None = None,
    ) -> list[dict[str, Any]]:
        return scope_audit_rows(
            at=self.now, op=op, groups=groups, reason=reason, task_id=self.task_id,
            worker=self.worker, keeps_ids=op != "DELETE", hashes=hashes,
        )

    def committed(self, name: str, n: int) -> None:
        self.report.batches += 1
        if self.after_batch is not None:
            self.after_batch(name, n)


def sweep(
    *,
    engine: Engine,
    ports: Ports,
    settings: Settings,
    batch: int | None = None,
    task_id: str = "",
    worker: str = "",
    after_batch: BatchHook | None = None,
) -> SweepReport:
    started = time.perf_counter()
    with engine.connect() as conn, _tuning(conn):
        run = _Run(
            conn=conn, index=ports.index, settings=settings, now=aware(ports.clock()),
            batch=max(1, batch or settings.sweep_batch), task_id=task_id, worker=worker,
            after_batch=after_batch, report=SweepReport(),
        )
        _delete_pass(run)
        _decay_pass(run)
        _capacity_pass(run)
        with conn.begin():
            run.flush_marks()
    report = run.report
    report.seconds = round(time.perf_counter() - started, 3)
    log.info("sweep", task_id=task_id, now=run.now.isoformat(), seconds=report.seconds,
             **report.counts())
    return report


# -- pass 1: delete what has been gone long enough ---------------------------------------


def _delete_pass(run: _Run) -> None:
    cutoff = run.now - timedelta(seconds=run.settings.delete_after_s)
    key, last = _keyset(run.dialect)
    n = 0
    while True:
        stmt = (
            sa.select(col(Memory.id), col(Memory.tenant), col(Memory.scope_key),
                      col(Memory.statement), key)
            .where(
                col(Memory.status).in_(_GONE),
                col(Memory.archived_at).is_not(None),
                col(Memory.archived_at) < cutoff,
                sweepable_sql(),
                key > last,
            )
            .order_by(key)
            .limit(run.batch)
        )
        with run.conn.begin():
            conn = run.conn
            rows = conn.execute(stmt).all()
            if not rows:
                return
            ids = [r[0] for r in rows]
            groups: dict[tuple[str, str], list[str]] = defaultdict(list)
            texts: dict[tuple[str, str], list[str]] = defaultdict(list)
            for mid, tenant, scope_key, statement, _key in rows:
                groups[(tenant, scope_key)].append(mid)
                texts[(tenant, scope_key)].append(statement)
            hashes = {k: content_hash(*sorted(v)) for k, v in texts.items()}
            conn.execute(sa.delete(Memory).where(col(Memory.id).in_(ids)))
            entity_store.prune(conn, scope_keys=entity_store.forget_memories(conn, ids=ids))
            conn.execute(
                sa.insert(Audit),
                run.audit("DELETE", groups, "archived or expired past the retention window",
                          hashes),
            )
        # After the commit: a crash here leaves orphan points the reconciler drops.
        run.index.delete(ids)
        run.report.deleted += len(ids)
        last = rows[-1][-1]
        n += 1
        run.committed("delete", n)


# -- pass 2: expiry and decay --------------------------------------------------------------


def _decay_pass(run: _Run) -> None:
    s = run.settings
    now_s = run.now.timestamp()
    key, last = _keyset(run.dialect)
    n = 0
    while True:
        stmt = (
            sa.select(
                col(Memory.id), col(Memory.tenant), col(Memory.scope_key), col(Memory.type),
                col(Memory.importance), epoch_sql(col(Memory.last_access), run.dialect),
                epoch_sql(col(Memory.expires_at), run.dialect), col(Memory.demoted),
                col(Memory.index_state), key,
            )
            .where(
                col(Memory.status).in_(CURRENT_STATUSES),
                sweepable_sql(),
                key > last,
            )
            .order_by(key)
            .limit(run.batch)
        )
        with run.conn.begin():
            rows = run.conn.execute(stmt).all()
        if not rows:
            return
        last = rows[-1][-1]
        run.report.scanned += len(rows)
        ids = [r[0] for r in rows]
        importance = np.fromiter((r[4] for r in rows), dtype=np.float64, count=len(rows))
        age = now_s - np.fromiter((r[5] for r in rows), dtype=np.float64, count=len(rows))
        expires = np.fromiter(
            (np.inf if r[6] is None else r[6] for r in rows), dtype=np.float64, count=len(rows)
        )
        demoted = np.fromiter((bool(r[7]) for r in rows), dtype=bool, count=len(rows))
        surv = survival_array(importance, age, half_life_array(s, [r[3] for r in rows]))
        is_expired = expires < now_s
        is_archived = ~is_expired & (surv < s.archive_below)
        is_demoted = ~is_expired & ~is_archived & ~demoted & (surv < s.demote_below)
        if not (is_expired.any() or is_archived.any() or is_demoted.any()):
            n += 1
            run.committed("decay", n)
            continue
        chosen = {
            name: [ids[i] for i in np.flatnonzero(mask)]
            for name, mask in (("expired", is_expired), ("archived", is_archived),
                               ("demoted", is_demoted))
        }
        scope_of = {r[0]: (r[1], r[2]) for r in rows}
        indexed = {r[0] for r in rows if r[8] == IndexState.indexed.value}
        with run.conn.begin():
            conn = run.conn
            run.flush_marks()
            audits: list[dict[str, Any]] = []
            if chosen["expired"]:
                _set_gone(conn, chosen["expired"], MemoryStatus.expired.value, run.now)
                audits += run.audit("EXPIRE", _by_scope(chosen["expired"], scope_of),
                                    "expires_at passed")
            if chosen["archived"]:
                _set_gone(conn, chosen["archived"], MemoryStatus.archived.value, run.now)
                audits += run.audit(
                    "ARCHIVE", _by_scope(chosen["archived"], scope_of),
                    f"survival under archive_below={s.archive_below}",
                )
            if chosen["demoted"]:
                conn.execute(
                    sa.update(Memory)
                    .where(col(Memory.id).in_(chosen["demoted"]),
                           col(Memory.status).in_(CURRENT_STATUSES))
                    .values(demoted=True)
                )
                audits += run.audit(
                    "DEMOTE", _by_scope(chosen["demoted"], scope_of),
                    f"survival under demote_below={s.demote_below}",
                )
            conn.execute(sa.insert(Audit), audits)
        _push_status(run, [i for i in chosen["expired"] if i in indexed],
                     MemoryStatus.expired.value)
        _push_status(run, [i for i in chosen["archived"] if i in indexed],
                     MemoryStatus.archived.value)
        run.report.expired += len(chosen["expired"])
        run.report.archived += len(chosen["archived"])
        run.report.demoted += len(chosen["demoted"])
        n += 1
        run.committed("decay", n)


# -- pass 3: per-scope capacity ------------------------------------------------------------


def _capacity_pass(run: _Run) -> None:
    cap = run.settings.scope_capacity
    count = sa.func.count()
    with run.conn.begin():
        over = run.conn.execute(
            sa.select(col(Memory.scope_key), count)
            .where(col(Memory.status).in_(CURRENT_STATUSES))
            .group_by(col(Memory.scope_key))
            .having(count > cap)
            .order_by(col(Memory.scope_key))
        ).all()
    n = 0
    for scope_key, total in over:
        victims = _lowest_survivors(run, scope_key, int(total) - cap)
        for i in range(0, len(victims), run.batch):
            chunk = victims[i : i + run.batch]
            ids = [v[0] for v in chunk]
            with run.conn.begin():
                run.flush_marks()
                _set_gone(run.conn, ids, MemoryStatus.archived.value, run.now)
                run.conn.execute(
                    sa.insert(Audit),
                    run.audit(
                        "EVICT", {(chunk[0][1], scope_key): ids},
                        f"scope over capacity ({int(total)} current > {cap}): "
                        "lowest survival archived first",
                    ),
                )
            _push_status(run, [v[0] for v in chunk if v[2]], MemoryStatus.archived.value)
            run.report.evicted += len(ids)
            n += 1
            run.committed("capacity", n)


def _lowest_survivors(run: _Run, scope_key: str, surplus: int) -> list[tuple[str, str, bool]]:
    """(id, tenant, indexed) of the ``surplus`` evictable rows with the lowest survival."""
    now_s = run.now.timestamp()
    ids: list[str] = []
    tenants: list[str] = []
    indexed: list[bool] = []
    surv_parts: list[np.ndarray[Any, np.dtype[np.float64]]] = []
    _key, last = _keyset(run.dialect)
    while True:
        rows = _scope_rows(run, scope_key, last)
        if not rows:
            break
        last = rows[-1][-1]
        ids += [r[0] for r in rows]
        tenants += [r[1] for r in rows]
        indexed += [r[5] == IndexState.indexed.value for r in rows]
        importance = np.fromiter((r[3] for r in rows), dtype=np.float64, count=len(rows))
        age = now_s - np.fromiter((r[4] for r in rows), dtype=np.float64, count=len(rows))
        surv_parts.append(
            survival_array(importance, age, half_life_array(run.settings, [r[2] for r in rows]))
        )
    if not ids:
        return []
    surv = np.concatenate(surv_parts)
    # Lowest survival first, ties broken by id: the same rows whatever the storage order.
    order = np.lexsort((np.array(ids), surv))[: max(0, surplus)]
    return [(ids[i], tenants[i], indexed[i]) for i in sorted(order, key=lambda j: ids[j])]


def _scope_rows(run: _Run, scope_key: str, last: Any) -> Sequence[Any]:
    key, _start = _keyset(run.dialect)
    stmt = (
        sa.select(
            col(Memory.id), col(Memory.tenant), col(Memory.type), col(Memory.importance),
            epoch_sql(col(Memory.last_access), run.dialect), col(Memory.index_state), key,
        )
        .where(
            col(Memory.scope_key) == scope_key,
            col(Memory.status).in_(CURRENT_STATUSES),
            sweepable_sql(),
            key > last,
        )
        .order_by(key)
        .limit(run.batch)
    )
    with run.conn.begin():
        return run.conn.execute(stmt).all()


# -- shared steps ------------------------------------------------------------------------


def _keyset(dialect: str) -> tuple[Any, Any]:
    """(column to page on, value before the first row).

    SQLite walks rows in storage order (rowid): a batch's rows then share pages, and a sweep
    writes each page once instead of once per row it changes (ids are random, so id order
    would touch a different page for every row). PostgreSQL walks the primary key.
    """
    if dialect == "sqlite":
        return sa.literal_column("memory.rowid"), -1
    return col(Memory.id), ""


def _by_scope(
    ids: list[str], scope_of: dict[str, tuple[str, str]]
) -> dict[tuple[str, str], list[str]]:
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for mid in ids:
        groups[scope_of[mid]].append(mid)
    return groups


def _set_gone(conn: Connection, ids: list[str], status: str, now: datetime) -> None:
    """Out of default search, still in SQL and explainable; the delete pass counts from now."""
    conn.execute(
        sa.update(Memory)
        .where(col(Memory.id).in_(ids), col(Memory.status).in_(CURRENT_STATUSES))
        .values(status=status, archived_at=now, index_state=IndexState.pending.value,
                **({"demoted": True} if status == MemoryStatus.archived.value else {}))
    )
    entity_store.follow_status(conn, ids=ids, status=status, now=now)


def _push_status(run: _Run, ids: list[str], status: str) -> None:
    """Tell the index; whatever it refuses stays pending for the reconciler."""
    if not ids:
        return
    done = _set_payload(run.index, ids, {"status": status})
    run.report.index_deferred += len(ids) - len(done)
    run.unmarked.setdefault(status, []).extend(done)


@contextmanager
def _tuning(conn: Connection) -> Iterator[None]:
    """Per-connection settings while the sweep runs, restored before the pool gets it back.

    SQLite: a bigger page cache (status changes touch index pages all over the file) and
    rarer WAL checkpoints (each would rewrite the same hot pages again). PostgreSQL: commits
    without waiting for the WAL flush; safe here because the sweep is idempotent, so a
    commit lost to a crash is simply redone by the next run.
    """
    if conn.dialect.name == "sqlite":
        cache = conn.exec_driver_sql("PRAGMA cache_size").scalar()
        wal = conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar()
        conn.exec_driver_sql(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
        conn.exec_driver_sql(f"PRAGMA wal_autocheckpoint={SQLITE_WAL_PAGES}")
        restore = [f"PRAGMA cache_size={int(cache or -2000)}",
                   f"PRAGMA wal_autocheckpoint={int(wal or 1000)}"]
    elif conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET synchronous_commit TO off")
        restore = ["RESET synchronous_commit"]
    else:
        restore = []
    conn.commit()
    try:
        yield
    finally:
        if conn.in_transaction():
            conn.rollback()
        for statement in restore:
            conn.exec_driver_sql(statement)
        conn.commit()


def _set_payload(index: VectorIndex, ids: list[str], payload: dict[str, Any]) -> list[str]:
    try:
        index.set_payload(ids, payload)
        return ids
    except SleepmemError:
        # One missing point fails the whole call: retry one by one to keep the rest.
        done: list[str] = []
        for mid in ids:
            try:
                index.set_payload([mid], payload)
                done.append(mid)
            except SleepmemError:
                continue
        return done
