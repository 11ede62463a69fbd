"""The Redis stream adapter: the ingest stream every emit appends to and the drain reads.

Event content is redacted before XADD, so no secret ever sits in Redis. Entries are
acknowledged and deleted only after the drain's SQL commit; an entry left pending by a
dead consumer is claimed (XAUTOCLAIM) once it has been idle for ``claim_idle_ms``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import hiredis
import orjson
import redis

from sleepmem.core.errors import TransientError
from sleepmem.core.keys import DRAIN_GROUP, Keys
from sleepmem.core.redaction import TurnContexts, redact_json, redact_texts
from sleepmem.core.tracing import current_traceparent
from sleepmem.models.events import Event, EventFields

FIELD = "e"
_FIELD_BYTES = FIELD.encode()
# The W3C traceparent of the caller's span, present only while something is traced.
TRACE_FIELD = "t"
_TRACE_BYTES = TRACE_FIELD.encode()
# A batch is appended by script calls of many events each: all of a call or none of it
# lands, and redis-py packs one command of N arguments ~3x faster than a pipeline of N
# XADDs. The SDK sends each chunk as soon as it is encoded and reads the replies at the end,
# so that Redis runs one chunk while Python encodes the next: emit_many went from 7.0 to
# 4.0 µs an event, measured. Smaller chunks overlap more; 100-250 measured alike.
SEND_CHUNK = 250
APPEND_SCRIPT = """
local ids = {}
for i = 1, #ARGV do
  ids[i] = redis.call('XADD', KEYS[1], '*', 'e', ARGV[i])
end
return ids
"""
# The same with each event's trace context: ARGV holds (payload, traceparent) pairs.
APPEND_TRACED_SCRIPT = """
local ids = {}
for i = 1, #ARGV, 2 do
  ids[#ids + 1] = redis.call('XADD', KEYS[1], '*', 'e', ARGV[i], 't', ARGV[i + 1])
end
return ids
"""


@dataclass(frozen=True, slots=True)
class Entry:
    """One stream entry as the drain sees it."""

    id: str
    fields: dict[bytes, bytes]

    @property
    def payload(self) -> bytes:
        return self.fields.get(_FIELD_BYTES, b"")

    @property
    def traceparent(self) -> str:
        return self.fields.get(_TRACE_BYTES, b"").decode("ascii", "replace")


# The sessions whose last message emitted from this process left a credential noun waiting
# for its value ("my pin is in the next message"): an emit's next message comes in the next
# call. The drain keeps its own (it reads what clients XADD without the SDK).
EMIT_TURNS = TurnContexts()


def session_of(event: EventFields | Event) -> tuple[object, ...]:
    """The session an event's message belongs to, as a key of ``TurnContexts``."""
    if isinstance(event, Event):
        return (event.tenant, event.agent, event.user, event.project, event.session)
    get = event.get
    return (get("tenant"), get("agent"), get("user"), get("project"), get("session"))


def redact_event(event: Event, turns: TurnContexts) -> tuple[Event, tuple[str, ...]]:
    """The event with secrets replaced in content and meta, and the kinds found; the content
    is read in its session's context in ``turns``."""
    content = turns.redact(session_of(event), event.content)
    kinds = list(content.kinds)
    meta = event.meta
    if meta:
        meta = redact_json(meta)
        if meta is not event.meta:
            kinds.append("meta")
    if not kinds:
        return event, ()
    return event.model_copy(update={"content": content.text, "meta": meta}), tuple(kinds)


def encode(event: EventFields) -> bytes:
    """The stream payload of a validated event, redacted. Read back with ``Event.from_stream``.

    Validation (sleepmem.ingest.validation) already proved that the redacted event fits the
    limits, so nothing here can fail for an accepted event: a batch is written whole.
    """
    # Every value is a str, enum, datetime or the meta that validation proved orjson dumps.
    content = event.get("content")
    clean = EMIT_TURNS.redact_text(session_of(event), content) if content else content
    return orjson.dumps(_redacted(event, clean))


def _redacted(event: EventFields, redacted_content: str | None) -> EventFields:
    """The event with its secrets replaced, its content already redacted."""
    content = event.get("content")
    meta = event.get("meta")
    clean_content = redacted_content if content else content
    clean_meta = redact_json(meta) if meta else meta
    if clean_content is not content or clean_meta is not meta:
        event = {**event, "content": clean_content or "", "meta": clean_meta or {}}
    return event


# Between two events of a batch serialised as one JSON list: each event starts with its id
# (validation returns the fields in order, and redaction keeps the order).
_ID_KEY = b'"event_id":'
_NEXT = b"},{" + _ID_KEY


def encode_many(events: Sequence[EventFields]) -> list[bytes]:
    """``[encode(e) for e in events]``, byte for byte, from one serialisation of the batch.

    One orjson call and one buffer for the whole batch, cut at the event boundaries: a
    separate call per event made a buffer of its own for each (a kilobyte from the system
    allocator, trimmed back), which cost twice what serialising did, measured.

    The cut is exact: in orjson's compact output, a quote inside a string is escaped, so
    ``"event_id":`` occurs only as a key. When it occurs once per event, each event's own
    key and nothing else, the ``},{"event_id":`` between two events is found exactly
    where one event ends and the next begins. Otherwise (an ``event_id`` key inside meta,
    or an event whose id is not its first field) each event is serialised on its own.
    """
    contents = redact_texts(
        [e.get("content") or "" for e in events], EMIT_TURNS, lambda i: session_of(events[i])
    )
    clean = [_redacted(e, c) for e, c in zip(events, contents, strict=True)]
    if len(clean) < 2:
        return [orjson.dumps(e) for e in clean]
    whole = orjson.dumps(clean)
    if whole.count(_ID_KEY) == len(clean):
        parts = whole[1:-1].split(_NEXT)
        if len(parts) == len(clean):
            last = parts.pop()
            out = [parts[0] + b"}"]
            out += [b'{"event_id":' + p + b"}" for p in parts[1:]]
            out.append(b'{"event_id":' + last)
            return out
    return [orjson.dumps(e) for e in clean]


def append(client: redis.Redis, keys: Keys, events: Sequence[EventFields]) -> list[str]:
    """XADD the events; returns their stream ids, in the order of ``events``.

    One event is one XADD. A batch goes as one atomic script call per ``SEND_CHUNK``
    events, all sent before any reply is read.
    """
    traceparent = current_traceparent()
    try:
        if len(events) == 1:
            fields = {FIELD: encode(events[0])}
            if traceparent:
                fields[TRACE_FIELD] = traceparent.encode()
            return [text(client.xadd(keys.events, fields))]
        return _append_chunks(client, keys, events, traceparent)
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise TransientError(f"event log unavailable: {type(exc).__name__}") from exc


def _append_chunks(
    client: redis.Redis, keys: Keys, events: Sequence[EventFields], traceparent: str = ""
) -> list[str]:
    script = client.register_script(APPEND_TRACED_SCRIPT if traceparent else APPEND_SCRIPT)
    tp = traceparent.encode()
    chunks = [events[i : i + SEND_CHUNK] for i in range(0, len(events), SEND_CHUNK)]
    payloads: list[list[bytes]] = []
    replies: list[Any] = []
    conn = client.connection_pool.get_connection()
    try:
        # Packed here with hiredis (what redis-py itself packs with) rather than through
        # send_command, whose per-argument checks cost as much as the packing.
        head = ("EVALSHA", script.sha, 1, conn.encoder.encode(keys.events))
        for chunk in chunks:
            if tp:
                payloads.append([part for p in encode_many(chunk) for part in (p, tp)])
            else:
                payloads.append(encode_many(chunk))
            conn.send_packed_command([hiredis.pack_command((*head, *payloads[-1]))])
        for _ in chunks:
            try:
                replies.append(conn.read_response())
            except redis.ResponseError as exc:  # one reply read: the connection is in step
                replies.append(exc)
    except BaseException:
        conn.disconnect()  # replies may be left unread: never hand this one back in use
        raise
    finally:
        client.connection_pool.release(conn)
    ids: list[str] = []
    for args, reply in zip(payloads, replies, strict=True):
        if isinstance(reply, redis.ResponseError):
            if not isinstance(reply, redis.exceptions.NoScriptError):
                raise reply
            # Not loaded yet (or flushed): the Script object loads it and calls again.
            reply = script(keys=[keys.events], args=args)
        ids.extend(text(i) for i in reply)
    return ids


# -- consumer group ------------------------------------------------------------------------


def ensure_group(client: redis.Redis, keys: Keys) -> None:
    """Create the drain group at the start of the stream (events emitted before count too)."""
    try:
        client.xgroup_create(keys.events, DRAIN_GROUP, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


def prune_consumers(client: redis.Redis, keys: Keys, *, idle_ms: int, keep: str = "") -> int:
    """Remove drain consumers idle for ``idle_ms`` that hold nothing pending; the count.

    Every worker process drains under a name of its own, so each restart left one more
    consumer in the group (29 after 20 restarts). One with pending entries is kept: its
    entries are claimed by a live consumer first (XAUTOCLAIM), and it goes on a later call.
    """
    try:
        consumers = client.xinfo_consumers(keys.events, DRAIN_GROUP)
    except redis.ResponseError:  # no stream or no group yet
        return 0
    removed = 0
    for info in consumers:
        name = text(info["name"])
        if name != keep and int(info["pending"]) == 0 and int(info["idle"]) >= idle_ms:
            client.xgroup_delconsumer(keys.events, DRAIN_GROUP, name)
            removed += 1
    return removed


def read_new(
    client: redis.Redis, keys: Keys, *, consumer: str, count: int, block_ms: int | None
) -> list[Entry]:
    """Entries never delivered to any consumer, at most ``count``."""
    reply = client.xreadgroup(
        DRAIN_GROUP, consumer, {keys.events: ">"}, count=count, block=block_ms
    )
    if not reply:
        return []
    # RESP2 answers [[stream, entries]], RESP3 {stream: [entries]}.
    streams: Any = reply.values() if isinstance(reply, dict) else (r[1] for r in reply)
    out: list[Entry] = []
    for entries in streams:
        out.extend(_entries(entries))
    return out


def claim_stale(
    client: redis.Redis, keys: Keys, *, consumer: str, min_idle_ms: int, count: int
) -> list[Entry]:
    """Take over entries another (dead or stuck) consumer has held for ``min_idle_ms``."""
    reply = client.xautoclaim(
        keys.events, DRAIN_GROUP, consumer, min_idle_time=min_idle_ms, start_id="0-0", count=count
    )
    # Redis 7 answers [next, entries, deleted ids]; deleted entries leave the PEL by themselves.
    return _entries(reply[1])


def ack(client: redis.Redis, keys: Keys, ids: Sequence[str]) -> None:
    """XACK and XDEL together: a stored entry leaves the group and the stream in one step."""
    if not ids:
        return
    pipe = client.pipeline(transaction=True)
    pipe.xack(keys.events, DRAIN_GROUP, *ids)
    pipe.xdel(keys.events, *ids)
    pipe.execute()


def delivery_counts(
    client: redis.Redis, keys: Keys, *, consumer: str, ids: Sequence[str]
) -> dict[str, int]:
    """How many times each of ``ids`` (pending on ``consumer``) has been delivered."""
    if not ids:
        return {}
    ordered = sorted(ids, key=_id_key)
    rows = client.xpending_range(
        keys.events,
        DRAIN_GROUP,
        min=ordered[0],
        max=ordered[-1],
        count=len(ids) * 2 + 100,
        consumername=consumer,
    )
    wanted = set(ids)
    return {
        mid: int(row["times_delivered"])
        for row in rows
        if (mid := text(row["message_id"])) in wanted
    }


def backlog(client: redis.Redis, keys: Keys) -> dict[str, int]:
    """Entries in the stream and entries delivered but not yet acknowledged."""
    length = int(client.xlen(keys.events))
    try:
        summary = client.xpending(keys.events, DRAIN_GROUP)
    except redis.ResponseError:
        return {"length": length, "pending": 0}
    return {"length": length, "pending": int(summary["pending"])}


def _entries(raw: Any) -> list[Entry]:
    # An entry deleted while pending comes back with no fields; it is skipped and acked.
    return [Entry(text(mid), fields or {}) for mid, fields in raw]


def text(value: Any) -> str:
    """A reply value as str (redis-py answers bytes unless told to decode)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _id_key(stream_id: str) -> tuple[int, int]:
    ms, _, seq = stream_id.partition("-")
    return int(ms), int(seq or 0)
