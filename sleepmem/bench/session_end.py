"""`sleepmem bench session-end`: a session end sent while its scope is being consolidated.

Embedded mode in a temporary data directory (worker, drain and scheduler, as served). One
scope's first session is consolidated; while that run holds the scope's lease, a second
session of the same scope is emitted and ended, and is in the raw log before the run ends.
The figure is the delay from the first run's end (its lease released) to the second
session consolidated and indexed. Before this was measured, that session waited for the
idle timer (``idle_seconds``, 60 s by default).

The baseline, measured in the same run: the second run's own time (its lease taken to the
session searchable), so the ratio says what waiting for the lease added to the work. Also
given: the same session consolidated on request in a quiet scope of its own (fewer
memories to judge it against, so faster).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sleepmem.bench.corpus import conversations
from sleepmem.core.settings import Settings
from sleepmem.freshness import check, request_consolidation, wait
from sleepmem.models import Scope
from sleepmem.models.positions import EventIds
from sleepmem.resources import Resources
from sleepmem.runtime import Runtime
from sleepmem.schedules.scheduler import celery_sender
from sleepmem.sdk import MemoryClient
from sleepmem.tasks import names

POLL_S = 0.001
LIMIT_S = 120.0


def _session(user: str, session: str, events: int, seed: int) -> list[dict[str, Any]]:
    turns = [{**e, "user": user, "session": session}
             for e in conversations(events=events, users=1, seed=seed)]
    return [*turns, {"tenant": "bench", "agent": "assistant", "user": user, "session": session,
                     "kind": "session_end", "role": "system", "content": ""}]


def _until(condition: Callable[[], bool], what: str) -> float:
    """Poll ``condition`` tightly (a benchmark measures, it does not wait on a tick);
    the time it turned true."""
    deadline = time.perf_counter() + LIMIT_S
    while not condition():
        if time.perf_counter() > deadline:
            raise TimeoutError(f"bench session-end: {what} did not happen within {LIMIT_S:g} s")
        time.sleep(POLL_S)
    return time.perf_counter()


def _drained(res: Resources, key: str, ids: EventIds) -> Callable[[], bool]:
    return lambda: check(res, scope_key=key, position=ids.position).drained


def _fresh(res: Resources, key: str, ids: EventIds) -> Callable[[], bool]:
    return lambda: check(res, scope_key=key, position=ids.position).done


def run_session_end_bench(
    settings: Settings | None = None, *, first: int = 1200, second: int = 24
) -> dict[str, Any]:
    """``first`` events in the session being consolidated, ``second`` in the one ended
    during it."""
    base = settings or Settings(_env_file=None)
    with tempfile.TemporaryDirectory(prefix="sleepmem-bench-") as tmp:
        cfg = base.model_copy(update={
            "data_dir": Path(tmp) / "data", "database_url": None, "redis_url": None,
            "qdrant_url": None, "log_level": "WARNING"})
        with Runtime(cfg, api=False) as rt:
            res = rt.resources
            assert res is not None and rt.celery is not None
            send = celery_sender(rt.celery)

            def consolidate(key: str) -> None:
                send(names.CONSOLIDATE, args=(key,))

            return _measure(res, consolidate, first=first, second=second)


def _measure(res: Resources, consolidate: Callable[[str], None], *, first: int,
             second: int) -> dict[str, Any]:
    ann = Scope(tenant="bench", agent="assistant", user="ann").key
    bob = Scope(tenant="bench", agent="assistant", user="bob").key
    lease = res.keys.lease(ann)
    with MemoryClient(res.settings, redis_url=res.redis_url) as client:
        one = client.emit_many(_session("ann", "s1", first, seed=1))
        _until(_drained(res, ann, one), "the first session's drain")
        request_consolidation(res.redis, res.keys, res.settings, ann, consolidate,
                              reason="bench")
        _until(lambda: bool(res.redis.exists(lease)), "the first run's start")
        # The run is known by its lease token: its end is when the token changes, whether
        # the lease is then free or already taken by the next run.
        token = res.redis.get(lease)
        two = client.emit_many(_session("ann", "s2", second, seed=2))
        _until(_drained(res, ann, two), "the second session's drain")
        overlapped = token is not None and res.redis.get(lease) == token
        run_end = _until(lambda: res.redis.get(lease) != token, "the first run's end")
        # A short second run can start and end between two polls: the session found
        # fresh also says it ran (then its start is read as that moment, an upper bound).
        fresh = _fresh(res, ann, two)
        second_start = _until(lambda: res.redis.get(lease) not in (None, token) or fresh(),
                              "the second run's start")
        done = _until(_fresh(res, ann, two), "the second session's consolidation")
        # The baseline: the same session in a quiet scope, consolidated on request.
        alone = client.emit_many(_session("bob", "s2", second, seed=2))
        _until(_drained(res, bob, alone), "the baseline's drain")
        started = time.perf_counter()
        state = wait(res, scope_key=bob, position=alone.position, timeout_s=LIMIT_S,
                     send=consolidate)
        baseline = time.perf_counter() - started
    delay = done - run_end
    second_run = done - second_start
    return {
        "bench": "session_end",
        "first_session_events": len(one),
        "second_session_events": len(two),
        "ended_during_the_run": overlapped,
        "delay_after_run_end_s": round(delay, 4),
        # The parts of that delay: the lease free until the next run holds it, then the
        # next run's own work (the baseline: what consolidating the session costs there).
        "lease_free_to_next_run_s": round(second_start - run_end, 4),
        "second_run_s": round(second_run, 4),
        "ratio_to_second_run": round(delay / second_run, 3) if second_run > 0 else None,
        "same_session_in_a_quiet_scope_s": round(baseline, 4),
        "quiet_scope_done": state.done,
        "within_2s": delay <= 2.0,
        "idle_seconds": res.settings.idle_seconds,
        "tick_seconds": res.settings.tick_seconds,
    }
