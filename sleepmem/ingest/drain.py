"""The drain: stream entries become ``raw_event`` rows, at sleep time, exactly once.

One batch: claim entries a dead consumer left pending, read new ones, parse and redact
them, insert the rows idempotently (``ON CONFLICT (tenant, event_id) DO NOTHING``), mark their
scopes dirty in ``scope_state``, commit, and only then XACK + XDEL. A crash anywhere
before the acknowledgement means redelivery, and redelivery means no new row. An entry
that keeps failing goes to ``dead_letter`` after ``max_deliveries`` and never blocks the
entries around it.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
import pydantic
import redis as redis_lib
import sqlalchemy as sa
from sqlalchemy import Table
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.postgresql import json as pg_json
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DisconnectionError, InterfaceError, OperationalError, StatementError
from sqlmodel import SQLModel

from sleepmem.adapters.redis import stream
from sleepmem.adapters.redis.stream import Entry
from sleepmem.core.errors import TransientError
from sleepmem.core.keys import Keys
from sleepmem.core.logs import get_logger
from sleepmem.core.metrics import EVENTS_DEAD_LETTERED, EVENTS_DRAINED
from sleepmem.core.redaction import TurnContexts, redact
from sleepmem.core.settings import Settings
from sleepmem.core.tracing import link_to, span
from sleepmem.ingest.validation import field_problems, gc_paused, limits_for
from sleepmem.models.events import Event, EventKind, Limits
from sleepmem.models.scope import Scope
from sleepmem.models.tables import DeadLetter, RawEvent, ScopeState

log = get_logger("sleepmem.drain")

RAW_EVENT: Table = SQLModel.metadata.tables[RawEvent.__tablename__]
SCOPE_STATE: Table = SQLModel.metadata.tables[ScopeState.__tablename__]
DEAD_LETTER: Table = SQLModel.metadata.tables[DeadLetter.__tablename__]

# Dead letters keep enough of the payload and error to debug, not whole documents.
MAX_PAYLOAD_CHARS = 64 * 1024
MAX_ERROR_CHARS = 2000
# Errors that say "the database is unreachable", not "this entry is bad": nothing is
# blamed on the entries, they stay pending and are retried.
TRANSIENT_DB_ERRORS = (OperationalError, InterfaceError, DisconnectionError)


@dataclass(slots=True)
class DrainReport:
    """What one batch did. ``retrying`` entries failed and stay pending for redelivery."""

    consumer: str
    read: int = 0
    claimed: int = 0
    inserted: int = 0
    duplicates: int = 0
    dead_lettered: int = 0
    retrying: int = 0
    scopes: int = 0
    redacted: int = 0
    ms: float = 0.0
    scope_of: dict[str, str] = field(default_factory=dict)  # stream id -> scope key

    @property
    def entries(self) -> int:
        return self.read + self.claimed

    def add(self, other: DrainReport) -> None:
        for name in ("read", "claimed", "inserted", "duplicates", "dead_lettered", "retrying"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.scopes += other.scopes
        self.redacted += other.redacted
        self.ms += other.ms

    def log_fields(self) -> dict[str, Any]:
        return {
            "consumer": self.consumer,
            "read": self.read,
            "claimed": self.claimed,
            "inserted": self.inserted,
            "duplicates": self.duplicates,
            "dead_lettered": self.dead_lettered,
            "retrying": self.retrying,
            "scopes": self.scopes,
            "redacted": self.redacted,
            "ms": round(self.ms, 2),
        }


@dataclass(slots=True)
class _Batch:
    """Parsed entries: rows to insert (one per event id) and entries that failed."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    # stream ids whose entry is represented by a row (several, if an event was sent twice),
    # by (tenant, event_id): event ids are unique within a tenant, not across tenants
    ids_by_event: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    empty: list[str] = field(default_factory=list)
    redacted: int = 0


def dead_consumer_ms(settings: Settings) -> int:
    """Idle time after which a drain consumer with nothing pending counts as gone: ten
    claim intervals (a live one reads every drain_block_ms, a busy one every batch)."""
    return max(60_000, 10 * settings.claim_idle_ms)


def consumer_name() -> str:
    """A name unique to this process: a restarted worker must not inherit a dead one's PEL."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def drain_once(
    *,
    redis: redis_lib.Redis,
    keys: Keys,
    engine: Engine,
    settings: Settings,
    consumer: str,
    block_ms: int | None = None,
) -> DrainReport:
    """Drain one batch (up to ``settings.drain_batch`` entries) and log one line about it."""
    started = time.perf_counter()
    report = DrainReport(consumer=consumer)
    claimed = _claim(redis, keys, settings, consumer)
    room = settings.drain_batch - len(claimed)
    fresh: list[Entry] = []
    if room > 0:
        fresh = _read(redis, keys, consumer, room, None if claimed else block_ms)
    report.claimed, report.read = len(claimed), len(fresh)
    entries = claimed + fresh
    if not entries:
        return report
    traced = [entry for entry in entries if entry.traceparent]
    # The batch's span links to each traced emit; each scope keeps its newest emit's
    # context, which the trigger of its consolidation continues.
    links = [link for entry in traced if (link := link_to(entry.traceparent)) is not None]
    batch_span = (span("sleepmem.drain", links=links[:128], entries=len(entries))
                  if traced else nullcontext())
    with batch_span:
        return _drain_entries(
            redis, keys, engine, settings, consumer, entries, report, started, traced=traced
        )


def _drain_entries(
    redis: redis_lib.Redis,
    keys: Keys,
    engine: Engine,
    settings: Settings,
    consumer: str,
    entries: list[Entry],
    report: DrainReport,
    started: float,
    *,
    traced: list[Entry],
) -> DrainReport:
    batch = _parse(entries, limits_for(settings))
    if traced:
        report.scope_of = {row["stream_id"]: row["scope_key"] for row in batch.rows}
        # Before the rows commit: from then on a trigger tick may find the scope due, and
        # it must find the emit's trace to continue.
        _remember_traces(redis, keys, traced, report)
    report.redacted = batch.redacted
    inserted, failures, scopes = _store(engine, batch.rows)
    report.inserted = len(inserted)
    report.duplicates = (
        len(batch.rows)
        - len(inserted)
        - len(failures)
        + sum(len(sids) - 1 for sids in batch.ids_by_event.values())
    )
    report.scopes = scopes
    batch.failed.update(
        (sid, err) for event_id, err in failures.items() for sid in batch.ids_by_event[event_id]
    )
    done = list(batch.empty)
    for event_id, sids in batch.ids_by_event.items():
        if event_id not in failures:
            done.extend(sids)

    if batch.failed:
        dead = _dead_letter(redis, keys, engine, settings, consumer, entries, batch.failed)
        report.dead_lettered = len(dead)
        report.retrying = len(batch.failed) - len(dead)
        done.extend(dead)
    # Only now, with the rows committed, may the entries leave the stream.
    stream.ack(redis, keys, done)
    report.ms = (time.perf_counter() - started) * 1000
    EVENTS_DRAINED.labels(outcome="inserted").inc(report.inserted)
    EVENTS_DRAINED.labels(outcome="duplicate").inc(report.duplicates)
    if report.dead_lettered:
        EVENTS_DEAD_LETTERED.inc(report.dead_lettered)
    log.info("drain.batch", **report.log_fields())
    return report


TRACE_TTL_S = 86400


def _remember_traces(
    redis: redis_lib.Redis, keys: Keys, traced: list[Entry], report: DrainReport
) -> None:
    newest = {
        scope: entry.traceparent
        for entry in traced
        if (scope := report.scope_of.get(entry.id)) is not None
    }
    if newest:
        with redis.pipeline(transaction=False) as pipe:
            for scope, traceparent in newest.items():
                pipe.set(keys.trace(scope), traceparent, ex=TRACE_TTL_S)
            pipe.execute()


def run_drain_loop(
    *,
    redis: redis_lib.Redis,
    keys: Keys,
    engine: Engine,
    settings: Settings,
    consumer: str | None = None,
    stop: threading.Event,
    on_batch: Callable[[DrainReport], None] | None = None,
) -> DrainReport:
    """Drain until ``stop`` is set; returns the totals. Transient failures back off and retry."""
    name = consumer or consumer_name()
    totals = DrainReport(consumer=name)
    backoff = 0.5
    stream.ensure_group(redis, keys)
    stream.prune_consumers(redis, keys, idle_ms=dead_consumer_ms(settings), keep=name)
    while not stop.is_set():
        try:
            report = drain_once(
                redis=redis,
                keys=keys,
                engine=engine,
                settings=settings,
                consumer=name,
                block_ms=settings.drain_block_ms,
            )
        except (TransientError, redis_lib.ConnectionError, redis_lib.TimeoutError) as exc:
            log.warning("drain.retry", consumer=name, error=type(exc).__name__, wait_s=backoff)
            stop.wait(backoff)
            backoff = min(backoff * 2, 30.0)
            continue
        backoff = 0.5
        totals.add(report)
        if on_batch is not None and report.entries:
            on_batch(report)
    return totals


# -- steps -----------------------------------------------------------------------------------


def _claim(client: redis_lib.Redis, keys: Keys, settings: Settings, consumer: str) -> list[Entry]:
    try:
        return stream.claim_stale(
            client,
            keys,
            consumer=consumer,
            min_idle_ms=settings.claim_idle_ms,
            count=settings.drain_batch,
        )
    except redis_lib.ResponseError as exc:
        if "NOGROUP" not in str(exc):
            raise
        stream.ensure_group(client, keys)
        return []


def _read(
    client: redis_lib.Redis, keys: Keys, consumer: str, count: int, block_ms: int | None
) -> list[Entry]:
    try:
        return stream.read_new(client, keys, consumer=consumer, count=count, block_ms=block_ms)
    except redis_lib.ResponseError as exc:
        if "NOGROUP" not in str(exc):
            raise
        stream.ensure_group(client, keys)
        return []


# Sessions whose last drained message left a credential noun waiting for its value: the
# next message of the session may come in the next batch.
_DRAIN_TURNS = TurnContexts()


def _parse(entries: Sequence[Entry], limits: Limits) -> _Batch:
    batch = _Batch()
    now = datetime.now(UTC)
    owner_keys: dict[tuple[str, str, str, str], str] = {}
    with gc_paused():
        for entry in entries:
            if not entry.fields:
                batch.empty.append(entry.id)  # deleted while pending: nothing to store
                continue
            try:
                event = Event.from_stream(entry.fields, limits)
            except pydantic.ValidationError as exc:
                batch.failed[entry.id] = "invalid event: " + "; ".join(
                    f"{p.field}: {p.message}" for p in field_problems(exc)
                )
                continue
            except (KeyError, ValueError, TypeError) as exc:  # orjson errors are ValueErrors
                batch.failed[entry.id] = f"unreadable entry: {type(exc).__name__}"
                continue
            # Again, for clients that XADD without the SDK: nothing unredacted reaches SQL.
            clean, kinds = stream.redact_event(event, _DRAIN_TURNS)
            batch.redacted += len(kinds)
            row_key = (clean.tenant, clean.event_id)
            ids = batch.ids_by_event.get(row_key)
            if ids is not None:
                ids.append(entry.id)  # the same event twice in one batch: one row
                continue
            batch.ids_by_event[row_key] = [entry.id]
            owner = (clean.tenant, clean.agent, clean.user, clean.project)
            scope_key = owner_keys.get(owner)
            if scope_key is None:
                # The levels were just validated as part of the event: no second validation.
                scope_key = owner_keys[owner] = Scope.model_construct(
                    tenant=clean.tenant,
                    agent=clean.agent,
                    user=clean.user,
                    project=clean.project,
                    session="",
                ).key
            batch.rows.append(
                {
                    "event_id": clean.event_id,
                    "tenant": clean.tenant,
                    "agent": clean.agent,
                    "user": clean.user,
                    "project": clean.project,
                    "session": clean.session,
                    "scope_key": scope_key,
                    "kind": clean.kind.value,
                    "role": clean.role.value,
                    "content": clean.content,
                    "at": clean.at,
                    "meta": clean.meta,
                    "stream_id": entry.id,
                    "received_at": now,
                    "consolidated": False,
                    "consolidated_at": None,
                }
            )
    return batch


RowKey = tuple[str, str]  # (tenant, event_id): the raw log's primary key


def _store(
    engine: Engine, rows: list[dict[str, Any]]
) -> tuple[set[RowKey], dict[RowKey, str], int]:
    """Insert rows and bump their scopes in one transaction; isolate bad rows if it fails.

    Returns the inserted (tenant, event id) keys, the keys that could not be stored with
    their error, and how many scopes were touched.
    """
    if not rows:
        return set(), {}, 0
    try:
        with engine.begin() as conn:
            inserted, scopes = _insert(conn, rows)
        return inserted, {}, scopes
    except TRANSIENT_DB_ERRORS as exc:
        raise TransientError(f"database unavailable: {type(exc).__name__}") from exc
    except (StatementError, ValueError, TypeError):
        pass  # one bad row fails the whole statement: find it, store the rest
    failures: dict[RowKey, str] = {}
    stored: set[RowKey] = set()
    touched = 0
    for row in rows:
        try:
            with engine.begin() as conn:
                inserted, scopes = _insert(conn, [row])
        except TRANSIENT_DB_ERRORS as exc:
            raise TransientError(f"database unavailable: {type(exc).__name__}") from exc
        except (StatementError, ValueError, TypeError) as exc:
            failures[(row["tenant"], row["event_id"])] = _describe_db_error(exc)
            continue
        stored |= inserted
        touched += scopes
    return stored, failures, touched


def _insert(conn: Connection, rows: list[dict[str, Any]]) -> tuple[set[RowKey], int]:
    """INSERT .. ON CONFLICT DO NOTHING, then the scope upsert for the rows really inserted."""
    postgres = conn.dialect.name == "postgresql"
    # A fixed order (row key, then scope key) keeps two drains from deadlocking.
    ordered = sorted(rows, key=lambda r: (r["tenant"], r["event_id"]))
    if postgres:
        reply = conn.execute(_PG_INSERT_EVENTS, {"rows": _json(ordered)})
    else:
        reply = conn.execute(_SQLITE_INSERT_EVENTS, ordered)
    inserted: set[RowKey] = {(r[0], r[1]) for r in reply}
    scopes = _scope_rows([r for r in ordered if (r["tenant"], r["event_id"]) in inserted])
    if scopes:
        if postgres:
            conn.execute(_PG_UPSERT_SCOPES, {"rows": _json(scopes)})
        else:
            conn.execute(_SQLITE_UPSERT_SCOPES, scopes)
    return inserted, len(scopes)


def _json(rows: list[dict[str, Any]]) -> str:
    return orjson.dumps(rows).decode()


def _from_json_rows(table: Table) -> Any:
    """``SELECT <columns> FROM json_to_recordset(:rows)``: a whole batch as one parameter.

    PostgreSQL only. A multi-row VALUES of 500 rows has 8,000 placeholders, which psycopg
    re-parses on every execute (its cache stops at 4 KiB of SQL): 3x slower than this.
    (SQLite keeps executemany: its json_extract would cut text at a NUL character.)
    """
    rows = sa.cast(sa.bindparam("rows", type_=sa.Text), pg_json.JSON)
    recordset = (
        sa.func.json_to_recordset(rows)
        .table_valued(*[sa.column(c.name, c.type) for c in table.c])
        .render_derived(name="r", with_types=True)
    )
    return sa.select(*recordset.c)


def _upsert_scopes(insert: Any, source: Any = None) -> Any:
    """Add a batch's counts to each scope's state; the latest event time wins.

    ``source`` is a SELECT of whole rows (PostgreSQL); without it the statement takes
    executemany parameters (SQLite), one cached statement rather than a fresh multi-row
    VALUES per batch, whose compilation cost more than the inserts.
    """
    names = [c.name for c in SCOPE_STATE.c]
    up = insert(SCOPE_STATE) if source is None else insert(SCOPE_STATE).from_select(names, source)
    cur, new = SCOPE_STATE.c, up.excluded
    return up.on_conflict_do_update(
        index_elements=["scope_key"],
        set_={
            "last_event_at": sa.case(
                (
                    sa.or_(cur.last_event_at.is_(None), new.last_event_at > cur.last_event_at),
                    new.last_event_at,
                ),
                else_=cur.last_event_at,
            ),
            "last_received_at": new.last_received_at,
            "pending_count": cur.pending_count + new.pending_count,
            "session_end": sa.or_(cur.session_end, new.session_end),
        },
    )


# Plain SQL expressions, built once; SQLAlchemy caches their compiled form.
_SQLITE_INSERT_EVENTS = (
    sqlite_insert(RAW_EVENT)
    .on_conflict_do_nothing(index_elements=["tenant", "event_id"])
    .returning(RAW_EVENT.c.tenant, RAW_EVENT.c.event_id)
)
_PG_INSERT_EVENTS = (
    pg_insert(RAW_EVENT)
    .from_select([c.name for c in RAW_EVENT.c], _from_json_rows(RAW_EVENT))
    .on_conflict_do_nothing(index_elements=["tenant", "event_id"])
    .returning(RAW_EVENT.c.tenant, RAW_EVENT.c.event_id)
)
_SQLITE_UPSERT_SCOPES = _upsert_scopes(sqlite_insert)
_PG_UPSERT_SCOPES = _upsert_scopes(pg_insert, _from_json_rows(SCOPE_STATE))


def _scope_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One scope_state row per consolidation scope among ``rows``, sorted by key."""
    by_key: dict[str, dict[str, Any]] = {}
    for row in rows:
        state = by_key.get(row["scope_key"])
        if state is None:
            state = by_key[row["scope_key"]] = {
                "scope_key": row["scope_key"],
                "tenant": row["tenant"],
                "agent": row["agent"],
                "user": row["user"],
                "project": row["project"],
                "session": "",
                "last_event_at": row["at"],
                "last_received_at": row["received_at"],
                "pending_count": 0,
                "session_end": False,
                "last_consolidated_at": None,
            }
        state["pending_count"] += 1
        state["last_event_at"] = max(state["last_event_at"], row["at"])
        if row["kind"] == EventKind.session_end.value:
            state["session_end"] = True
    return [by_key[k] for k in sorted(by_key)]


def _dead_letter(
    client: redis_lib.Redis,
    keys: Keys,
    engine: Engine,
    settings: Settings,
    consumer: str,
    entries: Sequence[Entry],
    failed: dict[str, str],
) -> list[str]:
    """Move failed entries delivered ``max_deliveries`` times to ``dead_letter``; their ids."""
    counts = stream.delivery_counts(client, keys, consumer=consumer, ids=list(failed))
    by_id = {e.id: e for e in entries}
    rows: list[dict[str, Any]] = [
        {
            "stream_id": sid,
            "payload": _redacted_payload(by_id[sid]),
            "error": redact(error[:MAX_ERROR_CHARS]).text,
            "deliveries": counts[sid],
            "at": datetime.now(UTC),
        }
        for sid, error in sorted(failed.items())
        if counts.get(sid, 0) >= settings.max_deliveries
    ]
    if not rows:
        return []
    insert = pg_insert if engine.dialect.name == "postgresql" else sqlite_insert
    try:
        with engine.begin() as conn:
            conn.execute(
                insert(DEAD_LETTER).on_conflict_do_nothing(index_elements=["stream_id"]), rows
            )
    except TRANSIENT_DB_ERRORS as exc:
        raise TransientError(f"database unavailable: {type(exc).__name__}") from exc
    for row in rows:
        log.warning(
            "drain.dead_letter",
            consumer=consumer,
            stream_id=row["stream_id"],
            deliveries=row["deliveries"],
            error=row["error"][:200],
        )
    return [row["stream_id"] for row in rows]


def _redacted_payload(entry: Entry) -> str:
    raw = entry.payload or orjson.dumps(
        {k.decode(errors="replace"): v.decode(errors="replace") for k, v in entry.fields.items()}
    )
    text = raw.decode("utf-8", errors="replace").replace("\x00", "\\u0000")
    return redact(text[:MAX_PAYLOAD_CHARS]).text


def _describe_db_error(exc: BaseException) -> str:
    # str() of a SQLAlchemy error embeds the statement's parameters, i.e. event content:
    # keep the driver's own message only.
    orig = getattr(exc, "orig", None)
    message = str(orig if orig is not None else exc).splitlines()[0] if str(exc) else ""
    return f"{type(orig or exc).__name__}: {message}"[:MAX_ERROR_CHARS]
