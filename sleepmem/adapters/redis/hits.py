"""Retrieval hits: recorded after the search answers, applied later by refresh.

Only memory ids and a timestamp go to Redis, never statement text.

A search's hits are written by a per-process thread, not on the request path: with the
embedded Redis's ``appendfsync always`` an XADD waits for an fsync (p95 5.6 ms of a 25 ms
search budget). A late write must not bring back the id of a memory erased meanwhile, so
erasure bumps ``hits_epoch`` before it clears the stream, and a hit is written only if the
epoch still has the value read *before* the search read any memory. Either the write lands
before the bump, and the erasure's scan finds it, or it comes after and is dropped.

Any epoch value read before the search is as safe as one read at its start: a bump since
then fails the write's check too. So searches take the value the writer last saw (it reads
the epoch with every batch it writes) instead of asking Redis: that GET queued behind the
writer's fsynced XADD and cost a search 0.8 ms at p50. A value older than
``epoch_max_age_s`` (an idle process) is read afresh; a stale one only drops hits, until the
writer's next batch, and its failed check, bring the new value.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import redis

from sleepmem.core.keys import Keys
from sleepmem.core.logs import get_logger
from sleepmem.core.metrics import HITS_NOT_RECORDED

MAX_HITS_STREAM = 1_000_000
# Searches whose hits wait for the writer; beyond this the writer is stuck (Redis down)
# and newer hits are counted and dropped instead of growing the process.
MAX_PENDING = 10_000
WRITE_BATCH = 256
EPOCH_MAX_AGE_S = 1.0
# How far back an explanation looks for hits not applied yet: refresh applies them hourly.
HITS_SCAN = 100_000

log = get_logger("sleepmem.hits")

_RECORD_IF_CURRENT = """
if (redis.call('GET', KEYS[2]) or '0') ~= ARGV[1] then return 0 end
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', 'ids', ARGV[3], 'at', ARGV[4])
return 1
"""


def record_hits(client: redis.Redis, keys: Keys, ids: Sequence[str], *, at: datetime) -> None:
    """Write hits now, unconditionally (operator tools and tests; searches use HitRecorder)."""
    if not ids:
        return
    client.xadd(
        keys.hits,
        {"ids": ",".join(ids), "at": f"{at.timestamp():.3f}"},
        maxlen=MAX_HITS_STREAM,
        approximate=True,
    )


def hits_epoch(client: redis.Redis, keys: Keys) -> str:
    """The erasure epoch, read before a search reads memories (see the module's doc)."""
    return _epoch_value(client.get(keys.hits_epoch))


def _epoch_value(raw: bytes | None) -> str:
    return raw.decode() if raw else "0"


def bump_hits_epoch(client: redis.Redis, keys: Keys) -> None:
    """Called by erasure before it clears hits: hits of searches already running drop."""
    client.incr(keys.hits_epoch)


@dataclass(frozen=True, slots=True)
class _Pending:
    ids: tuple[str, ...]
    at: datetime
    epoch: str


class HitRecorder:
    """One writer thread per process, started by the first hit, stopped by :meth:`close`."""

    def __init__(
        self, client: redis.Redis, keys: Keys, *, max_pending: int = MAX_PENDING,
        epoch_max_age_s: float = EPOCH_MAX_AGE_S,
    ):
        self._client = client
        self._keys = keys
        self._script = client.register_script(_RECORD_IF_CURRENT)
        self._queue: queue.Queue[_Pending | threading.Event | None] = queue.Queue(max_pending)
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()
        self._epoch_max_age_s = epoch_max_age_s
        # (value, monotonic time before it was read); replaced whole, so threads need no lock.
        self._epoch: tuple[str, float] | None = None

    def epoch(self) -> str:
        """The erasure epoch for a search about to start: the last value read, when it is
        fresh enough, else read now (see the module's doc)."""
        known, now = self._epoch, time.monotonic()
        if known is not None and now - known[1] < self._epoch_max_age_s:
            return known[0]
        value = hits_epoch(self._client, self._keys)
        self._learn_epoch(value, now)
        return value

    def _learn_epoch(self, value: str, read_at: float) -> None:
        known = self._epoch
        if known is None or read_at >= known[1]:
            self._epoch = (value, read_at)

    def record(self, ids: Sequence[str], *, at: datetime, epoch: str) -> None:
        """Queue hits read under ``epoch`` (:meth:`epoch`, taken before the search)."""
        if not ids:
            return
        self._start()
        try:
            self._queue.put_nowait(_Pending(tuple(ids), at, epoch))
        except queue.Full:
            HITS_NOT_RECORDED.labels(reason="backlog").inc(len(ids))

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every hit queued so far is written or dropped; False on timeout."""
        if self._thread is None:
            return True
        written = threading.Event()
        self._queue.put(written, timeout=timeout)
        return written.wait(timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued, then stop the writer."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None, timeout=timeout)
            thread.join(timeout)

    def _start(self) -> None:
        if self._thread is None:
            with self._starting:
                if self._thread is None:
                    thread = threading.Thread(target=self._run, name="sleepmem-hits", daemon=True)
                    thread.start()
                    self._thread = thread

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < WRITE_BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            self._write([b for b in batch if isinstance(b, _Pending)])
            for item in batch:
                if isinstance(item, threading.Event):
                    item.set()
            if None in batch:
                return

    def _write(self, pending: list[_Pending]) -> None:
        if not pending:
            return
        keys = [self._keys.hits, self._keys.hits_epoch]
        try:
            # One round trip and, with appendfsync always, one fsync for the whole batch;
            # the epoch read at its end is what the next searches start from.
            with self._client.pipeline(transaction=False) as pipe:
                for p in pending:
                    args = [p.epoch, MAX_HITS_STREAM, ",".join(p.ids), f"{p.at.timestamp():.3f}"]
                    self._script(keys=keys, args=args, client=pipe)
                pipe.get(self._keys.hits_epoch)
                read_at = time.monotonic()
                *written, epoch = pipe.execute()
        except redis.RedisError as exc:
            HITS_NOT_RECORDED.labels(reason="redis").inc(sum(len(p.ids) for p in pending))
            log.warning("hits_not_recorded", searches=len(pending), error=str(exc))
            return
        self._learn_epoch(_epoch_value(epoch), read_at)
        stale = sum(len(p.ids) for p, ok in zip(pending, written, strict=True) if not ok)
        if stale:
            HITS_NOT_RECORDED.labels(reason="erasure").inc(stale)


def read_hits(
    client: redis.Redis, keys: Keys, *, count: int = 10_000, after: str = "-"
) -> list[tuple[str, list[str], float]]:
    """(entry id, memory ids, epoch seconds) in stream order, starting after ``after``."""
    start = after if after == "-" else f"({after}"
    out: list[tuple[str, list[str], float]] = []
    for entry_id, fields in client.xrange(keys.hits, min=start, max="+", count=count):
        ids = fields.get(b"ids", b"").decode()
        out.append((entry_id.decode(), [i for i in ids.split(",") if i], float(fields[b"at"])))
    return out


def unapplied_hits(client: redis.Redis, keys: Keys, memory_id: str, *,
                   scan: int = HITS_SCAN) -> list[float]:
    """When ``memory_id`` was returned by searches whose hits the refresh has not applied to
    SQL yet (epoch seconds, newest first), among the newest ``scan`` entries: the stream
    holds only what the last refresh left, so this is what SQL does not know yet."""
    out: list[float] = []
    for _entry, fields in client.xrevrange(keys.hits, max="+", min="-", count=scan):
        if memory_id in fields.get(b"ids", b"").decode().split(","):
            out.append(float(fields[b"at"]))
    return out


def trim_hits(client: redis.Redis, keys: Keys, *, upto: str) -> int:
    """Drop applied entries (ids ≤ upto)."""
    applied = client.xrange(keys.hits, min="-", max=upto)
    if not applied:
        return 0
    return int(client.xdel(keys.hits, *[e for e, _ in applied]))
