"""The importance refresh (DESIGN rule 6), run hourly.

1. Retrieval hits (recorded on the request path, see :mod:`sleepmem.adapters.redis.hits`)
   are applied:
   access_count grows, last_access moves to the hit, expires_at slides to hit + ttl(type),
   and a demoted memory that is used again stops being demoted.
2. Importance rises to a floor set by repeated mentions, emphasis and corrections.
3. Negative feedback halves confidence once per feedback and marks the memory for
   verification. Feedback arrives as an event ("no, that's wrong") that the extractor keeps
   as an episode with ``details.feedback == "negative"``; it is routed to the memories of
   its scope that were retrieved in the minutes before it (the ones the agent just used),
   as a count in their ``details.negative_feedback``.
4. A high-importance memory never hit gets one "strong reminder" (last_access = now) when
   its survival falls under ``demote_below`` or its expiry is less than a day away.

Every rule is a floor or a counter compared with what was already applied, so running the
refresh twice on the same input changes nothing the second time. Each batch is one SQL
transaction with its audit rows; index payloads (expires_at) follow after the commit.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlmodel import col

from sleepmem.core.errors import SleepmemError
from sleepmem.core.logs import get_logger
from sleepmem.core.settings import Settings
from sleepmem.models import CURRENT_STATUSES, Audit, IndexState, Memory
from sleepmem.pipelines import PIPELINE_VERSION
from sleepmem.pipelines.decay import authored_sql, aware, epoch_sql, lifecycle_managed_sql, survival
from sleepmem.pipelines.ports import Ports, VectorIndex

log = get_logger("sleepmem.refresh")

HitEntry = tuple[str, list[str], float]
"""(stream entry id, memory ids, epoch seconds of the search) as ``read_hits`` returns."""

MENTION_FLOORS: tuple[tuple[int, float], ...] = ((5, 0.9), (4, 0.8), (3, 0.7))
EMPHASIS_FLOOR = 0.8
CORRECTION_FLOOR = 0.7
# Corrections count for facts about the world and the user, not for episodes and digests.
_CORRECTABLE = ("preference", "fact", "task", "identity")
REMINDER_LEAD = timedelta(days=1)
FEEDBACK_WINDOW = timedelta(minutes=15)
_NOT_TARGETS = ("event", "summary")


@dataclass(slots=True)
class RefreshReport:
    entries: int = 0
    hits: int = 0
    memories_hit: int = 0
    unknown_ids: int = 0
    importance_raised: int = 0
    feedback_applied: int = 0
    reminded: int = 0
    index_deferred: int = 0
    seconds: float = 0.0

    def counts(self) -> dict[str, int]:
        return {k: v for k, v in asdict(self).items() if isinstance(v, int)}


@dataclass(slots=True)
class _Run:
    conn: Connection
    index: VectorIndex
    settings: Settings
    now: datetime
    batch: int
    task_id: str
    worker: str
    report: RefreshReport

    @property
    def dialect(self) -> str:
        return self.conn.dialect.name

    def audit(self, op: str, groups: dict[tuple[str, str], list[str]], reason: str) -> None:
        if not groups:
            return
        self.conn.execute(
            sa.insert(Audit),
            [
                {
                    "at": self.now, "op": op, "tenant": tenant, "scope_key": scope_key,
                    "memory_ids_before": ids, "memory_ids_after": ids, "reason": reason,
                    "task_id": self.task_id, "worker": self.worker,
                    "pipeline_version": PIPELINE_VERSION, "extractor": "", "model": "",
                    "input_event_ids": [], "content_hash": "", "llm_calls": 0,
                    "llm_tokens": 0,
                }
                for (tenant, scope_key), ids in sorted(groups.items())
            ],
        )


def refresh(
    *,
    engine: Engine,
    ports: Ports,
    settings: Settings,
    hits: Sequence[HitEntry],
    batch: int = 1000,
    task_id: str = "",
    worker: str = "",
) -> RefreshReport:
    started = time.perf_counter()
    with engine.connect() as conn:
        run = _Run(
            conn=conn, index=ports.index, settings=settings, now=aware(ports.clock()),
            batch=max(1, batch), task_id=task_id, worker=worker, report=RefreshReport(),
        )
        _apply_hits(run, hits)
        _raise_importance(run)
        _route_feedback(run)
        _apply_feedback(run)
        _remind(run)
    report = run.report
    report.seconds = round(time.perf_counter() - started, 3)
    log.info("refresh", task_id=task_id, now=run.now.isoformat(), seconds=report.seconds,
             **report.counts())
    return report


# -- 1. retrieval hits ----------------------------------------------------------------------


def _apply_hits(run: _Run, hits: Sequence[HitEntry]) -> None:
    per_id: dict[str, tuple[int, float]] = {}
    for _entry, ids, at in hits:
        run.report.entries += 1
        for mid in ids:
            n, latest = per_id.get(mid, (0, 0.0))
            per_id[mid] = (n + 1, max(latest, at))
            run.report.hits += 1
    wanted = sorted(per_id)
    for i in range(0, len(wanted), run.batch):
        chunk = wanted[i : i + run.batch]
        with run.conn.begin():
            rows = run.conn.execute(
                sa.select(
                    col(Memory.id), col(Memory.tenant), col(Memory.scope_key), col(Memory.type),
                    col(Memory.status), col(Memory.access_count), col(Memory.last_access),
                    col(Memory.expires_at), col(Memory.index_state),
                ).where(col(Memory.id).in_(chunk))
            ).all()
            run.report.unknown_ids += len(chunk) - len(rows)
            params: list[dict[str, Any]] = []
            groups: dict[tuple[str, str], list[str]] = defaultdict(list)
            slid: dict[str, datetime] = {}
            for mid, tenant, scope_key, mtype, status, access, seen, expires, state in rows:
                n, at_s = per_id[mid]
                hit_at = datetime.fromtimestamp(at_s, UTC)
                old_expires = aware(expires) if expires is not None else None
                new_expires = _slide(run.settings, mtype, status, old_expires, hit_at)
                if new_expires is not None and new_expires != old_expires:
                    if state == IndexState.indexed.value:
                        slid[mid] = new_expires
                    state = IndexState.pending.value
                params.append({
                    "_id": mid, "_access": access + n, "_last": max(aware(seen), hit_at),
                    "_expires": new_expires, "_state": state,
                })
                groups[(tenant, scope_key)].append(mid)
            if params:
                run.conn.execute(
                    sa.update(Memory)
                    .where(col(Memory.id) == sa.bindparam("_id"))
                    .values(access_count=sa.bindparam("_access"),
                            last_access=sa.bindparam("_last"),
                            expires_at=sa.bindparam("_expires"),
                            index_state=sa.bindparam("_state"), demoted=False),
                    params,
                )
            run.audit("REFRESH", groups, "retrieval hits applied (recency, access count, expiry)")
        run.report.memories_hit += len(rows)
        _push_expiry(run, slid)


def _slide(
    settings: Settings, mtype: str, status: str, expires: datetime | None, at: datetime
) -> datetime | None:
    """Expiry slides forward with use (DESIGN rule 11), never backward."""
    ttl = settings.ttl(mtype)
    if expires is None or ttl is None or status not in CURRENT_STATUSES:
        return expires
    return max(expires, at + ttl)


# -- 2. mentions, emphasis, corrections --------------------------------------------------


def _floor(mention_count: int, emphasis: bool, corrected: bool) -> float:
    floor = 0.0
    for at_least, value in MENTION_FLOORS:
        if mention_count >= at_least:
            floor = value
            break
    if emphasis:
        floor = max(floor, EMPHASIS_FLOOR)
    if corrected:
        floor = max(floor, CORRECTION_FLOOR)
    return floor


def _raise_importance(run: _Run) -> None:
    importance = col(Memory.importance)
    mentions = col(Memory.mention_count)
    emphasis = sa.func.coalesce(col(Memory.details)["emphasis"].as_boolean(), sa.false())
    corrected = sa.and_(col(Memory.supersedes).is_not(None), col(Memory.type).in_(_CORRECTABLE))
    mention_floor = sa.case(
        *((mentions >= at_least, value) for at_least, value in MENTION_FLOORS), else_=0.0
    )
    below = sa.or_(
        importance < mention_floor,
        sa.and_(emphasis, importance < EMPHASIS_FLOOR),
        sa.and_(corrected, importance < CORRECTION_FLOOR),
    )
    last = ""
    while True:
        with run.conn.begin():
            rows = run.conn.execute(
                sa.select(col(Memory.id), col(Memory.tenant), col(Memory.scope_key), importance,
                          mentions, emphasis, corrected)
                .where(col(Memory.status).in_(CURRENT_STATUSES), lifecycle_managed_sql(),
                       below, col(Memory.id) > last)
                .order_by(col(Memory.id))
                .limit(run.batch)
            ).all()
            if not rows:
                return
            last = rows[-1][0]
            params = [
                {"_id": r[0], "_imp": max(r[3], _floor(r[4], bool(r[5]), bool(r[6])))}
                for r in rows
            ]
            run.conn.execute(
                sa.update(Memory).where(col(Memory.id) == sa.bindparam("_id"))
                .values(importance=sa.bindparam("_imp")),
                params,
            )
            groups: dict[tuple[str, str], list[str]] = defaultdict(list)
            for r in rows:
                groups[(r[1], r[2])].append(r[0])
            run.audit("IMPORTANCE", groups, "importance raised for mentions, emphasis or a "
                                            "correction")
        run.report.importance_raised += len(rows)


# -- 3. negative feedback ----------------------------------------------------------------


def _route_feedback(run: _Run) -> None:
    """Count each negative-feedback episode once against the memories it was about."""
    details = col(Memory.details)
    unrouted = sa.and_(
        col(Memory.type) == "event",
        details["feedback"].as_string() == "negative",
        details["feedback_routed"].as_boolean().is_(None),
    )
    while True:
        with run.conn.begin():
            feedback = run.conn.execute(
                sa.select(col(Memory.id), col(Memory.scope_key), col(Memory.valid_from), details)
                .where(unrouted).order_by(col(Memory.id)).limit(run.batch)
            ).all()
            if not feedback:
                return
            for fid, scope_key, said_at, data in feedback:
                said = aware(said_at)
                targets = run.conn.execute(
                    sa.select(col(Memory.id), details).where(
                        col(Memory.scope_key) == scope_key,
                        col(Memory.status).in_(CURRENT_STATUSES),
                        col(Memory.type).not_in(_NOT_TARGETS),
                        col(Memory.access_count) > 0,
                        col(Memory.last_access) >= said - FEEDBACK_WINDOW,
                        col(Memory.last_access) <= said,
                    )
                ).all()
                for tid, tdata in targets:
                    new = dict(tdata or {})
                    new["negative_feedback"] = int(new.get("negative_feedback", 0)) + 1
                    run.conn.execute(sa.update(Memory).where(col(Memory.id) == tid)
                                     .values(details=new))
                run.conn.execute(
                    sa.update(Memory).where(col(Memory.id) == fid)
                    .values(details={**(data or {}), "feedback_routed": True})
                )




def _apply_feedback(run: _Run) -> None:
    details = col(Memory.details)
    received = sa.func.coalesce(details["negative_feedback"].as_integer(), 0)
    applied = sa.func.coalesce(details["feedback_applied"].as_integer(), 0)
    last = ""
    while True:
        with run.conn.begin():
            rows = run.conn.execute(
                sa.select(col(Memory.id), col(Memory.tenant), col(Memory.scope_key),
                          col(Memory.confidence), details)
                .where(received > applied, sa.not_(authored_sql()), col(Memory.id) > last)
                .order_by(col(Memory.id))
                .limit(run.batch)
            ).all()
            if not rows:
                return
            last = rows[-1][0]
            params: list[dict[str, Any]] = []
            groups: dict[tuple[str, str], list[str]] = defaultdict(list)
            for mid, tenant, scope_key, confidence, data in rows:
                new = dict(data or {})
                got = int(new.get("negative_feedback", 0))
                fresh = got - int(new.get("feedback_applied", 0))
                new["feedback_applied"] = got
                params.append({"_id": mid, "_conf": confidence * 0.5 ** fresh, "_det": new})
                groups[(tenant, scope_key)].append(mid)
            run.conn.execute(
                sa.update(Memory).where(col(Memory.id) == sa.bindparam("_id"))
                .values(confidence=sa.bindparam("_conf"), details=sa.bindparam("_det"),
                        needs_verification=True),
                params,
            )
            run.audit("FEEDBACK", groups,
                      "negative feedback: confidence halved, marked for verification")
        run.report.feedback_applied += len(rows)


# -- 4. strong reminders -------------------------------------------------------------------


def _remind(run: _Run) -> None:
    """One scan for every type: candidates by plain columns, the exact rule in Python."""
    s = run.settings
    half_lives = {t: hl for t, hl in s.half_life_s.items() if hl is not None and hl > 0}
    if not half_lives:
        return
    now_s = run.now.timestamp()
    lead = run.now + REMINDER_LEAD
    expires = col(Memory.expires_at)
    old_enough = []
    for mtype, half_life in sorted(half_lives.items()):
        # The lowest qualifying importance reaches demote_below first: nothing younger can.
        min_age = 0.0
        if s.demote_below > 0 and s.reminder_importance > 0:
            min_age = half_life * max(0.0, math.log2(s.reminder_importance / s.demote_below))
        old_enough.append(sa.and_(col(Memory.type) == mtype,
                                  col(Memory.last_access) < run.now - timedelta(seconds=min_age)))
    last = ""
    while True:
        with run.conn.begin():
            rows = run.conn.execute(
                sa.select(
                    col(Memory.id), col(Memory.tenant), col(Memory.scope_key), col(Memory.type),
                    col(Memory.importance), epoch_sql(col(Memory.last_access), run.dialect),
                    expires, col(Memory.index_state),
                )
                .where(
                    col(Memory.type).in_(sorted(half_lives)),
                    col(Memory.status).in_(CURRENT_STATUSES),
                    lifecycle_managed_sql(),
                    col(Memory.importance) >= s.reminder_importance,
                    col(Memory.access_count) == 0,
                    col(Memory.reminded).is_(False),
                    sa.or_(
                        *old_enough,
                        sa.and_(expires.is_not(None), expires > run.now, expires < lead),
                    ),
                    col(Memory.id) > last,
                )
                .order_by(col(Memory.id))
                .limit(run.batch)
            ).all()
            if not rows:
                return
            last = rows[-1][0]
            params: list[dict[str, Any]] = []
            groups: dict[tuple[str, str], list[str]] = defaultdict(list)
            slid: dict[str, datetime] = {}
            for mid, tenant, scope_key, mtype, importance, last_s, exp, state in rows:
                fading = survival(importance=importance, age_s=now_s - last_s,
                                  half_life_s=half_lives[mtype]) < s.demote_below
                exp_at = aware(exp) if exp is not None else None
                expiring = exp_at is not None and run.now < exp_at < lead
                if not (fading or expiring):
                    continue
                ttl = s.ttl(mtype)
                new_exp = exp_at
                if exp_at is not None and ttl is not None:
                    new_exp = max(exp_at, run.now + ttl)
                if new_exp != exp_at and new_exp is not None:
                    if state == IndexState.indexed.value:
                        slid[mid] = new_exp
                    state = IndexState.pending.value
                params.append({"_id": mid, "_exp": new_exp, "_state": state})
                groups[(tenant, scope_key)].append(mid)
            if params:
                run.conn.execute(
                    sa.update(Memory).where(col(Memory.id) == sa.bindparam("_id"))
                    .values(last_access=run.now, reminded=True, demoted=False,
                            expires_at=sa.bindparam("_exp"), index_state=sa.bindparam("_state")),
                    params,
                )
            run.audit("REMIND", groups, "strong reminder: important, never retrieved, about "
                                        "to fade")
        run.report.reminded += len(params)
        _push_expiry(run, slid)


# -- index ---------------------------------------------------------------------------------


def _push_expiry(run: _Run, slid: dict[str, datetime]) -> None:
    """expires_at is a filter field in the index: push the new values, grouped by value."""
    by_value: dict[datetime, list[str]] = defaultdict(list)
    for mid, at in slid.items():
        by_value[at].append(mid)
    done: list[str] = []
    for at, ids in by_value.items():
        try:
            run.index.set_payload(ids, {"expires_at": at.timestamp()})
            done.extend(ids)
        except SleepmemError:
            # Left pending: the reconciler re-sends the whole row.
            run.report.index_deferred += len(ids)
    if done:
        with run.conn.begin():
            for i in range(0, len(done), run.batch):
                run.conn.execute(
                    sa.update(Memory).where(col(Memory.id).in_(done[i : i + run.batch]))
                    .values(index_state=IndexState.indexed.value)
                )
