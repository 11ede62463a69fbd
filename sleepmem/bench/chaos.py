"""`sleepmem bench chaos`: kill workers and restart the stores while events flow in.

The distributed setup in miniature, on servers of its own (:mod:`sleepmem.bench.servers`):
a redis-server with the AOF on, a PostgreSQL cluster, real ``celery worker`` processes
built by the worker command's own app factory and process hooks, and the leader-gated
scheduler queueing drains and consolidations. An agent emits conversations through the
SDK (facts repeated across sessions and places that change, so dedup and supersede run)
while the harness SIGKILLs a worker's pool process or the whole worker mid-drain or
mid-consolidation, kills redis-server and restarts it from its AOF, and stops PostgreSQL
as in a crash (``-m immediate``) and starts it again.

Once everything settles it counts what docs/security.md promises: every accepted event stored
exactly once, no memory current twice, no scope left pending, leased or undrained, and the
vector index holding exactly the memory rows of SQL. ``tests/runtime/test_chaos.py`` runs a short
version of the same code in CI; the long one is this command.

Only the broker's visibility timeout is shortened (from minutes to seconds), so a message
held by a killed worker comes back within the run; the rest is production configuration
with short timings (tick, idle, lease, dead-consumer claim).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import redis as redis_lib
import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from sleepmem.bench.corpus import conversations
from sleepmem.bench.servers import (
    ScratchPostgres,
    ScratchRedis,
    postgres_binaries,
    redis_binary,
)
from sleepmem.core.errors import SleepmemError, TransientError
from sleepmem.core.keys import DRAIN_GROUP
from sleepmem.core.settings import Settings
from sleepmem.pipelines.write.index import reconcile
from sleepmem.resources import Resources, build_resources
from sleepmem.schedules.leader import LeaderElector
from sleepmem.schedules.scheduler import Scheduler, celery_sender
from sleepmem.sdk import MemoryClient
from sleepmem.tasks import names

TENANT = "bench"
T = TypeVar("T")
_STORE_ERRORS = (redis_lib.RedisError, SQLAlchemyError, SleepmemError, OSError)


@dataclass(frozen=True, slots=True)
class ChaosPlan:
    """How much to send and break. ``kills`` alternate: a pool process, then a whole worker."""

    events: int = 300
    users: int = 6
    kills: int = 5
    redis_restarts: int = 1
    pg_restarts: int = 1
    batch: int = 10
    settle_timeout: float = 300.0
    seed: int = 11
    lease_seconds: float = 6.0
    visibility_seconds: float = 10.0


@dataclass(slots=True)
class _Tally:
    accepted: list[str] = field(default_factory=list)
    emit_retries: int = 0
    pool_kills: int = 0
    worker_exits: int = 0
    worker_kills: int = 0
    redis_restarts: int = 0
    pg_restarts: int = 0
    kills_in_flight: int = 0
    # Batches the emitter may send by now: released share by share as the disruptions go,
    # so events keep arriving through every kill and restart.
    allowed: int = 0
    gate: threading.Condition = field(default_factory=threading.Condition)

    def allow(self, batches: int) -> None:
        with self.gate:
            self.allowed = max(self.allowed, batches)
            self.gate.notify_all()

    def wait_allowed(self, batch: int) -> None:
        with self.gate:
            self.gate.wait_for(lambda: self.allowed > batch)


def services_available() -> str | None:
    """Why the crash bench cannot run here, or None when it can."""
    if redis_binary() is None:
        return "no redis-server binary on PATH"
    if postgres_binaries() is None:
        return "no PostgreSQL server binaries (initdb, pg_ctl)"
    return None


@contextmanager
def scratch_services(home: Path) -> Iterator[tuple[ScratchRedis, ScratchPostgres]]:
    """A redis-server and a PostgreSQL cluster of our own, removed afterwards."""
    binary, pg_bin = redis_binary(), postgres_binaries()
    if binary is None or pg_bin is None:
        raise RuntimeError(services_available() or "servers missing")
    redis_server = ScratchRedis(home / "redis", binary)
    postgres = ScratchPostgres(pg_bin)
    try:
        redis_server.start()
        postgres.start()
        yield redis_server, postgres
    finally:
        redis_server.remove()
        postgres.remove()


def chaos_settings(
    plan: ChaosPlan, *, redis_url: str, database_url: str, data_dir: Path
) -> Settings:
    """Production settings with short timings, so a crash is noticed in seconds."""
    return Settings(
        data_dir=data_dir,
        redis_url=redis_url,
        database_url=database_url,
        namespace="chaos",
        embedder="hashing",
        auth_enabled=False,
        log_level="WARNING",
        tick_seconds=1.0,
        idle_seconds=1.0,
        lease_seconds=plan.lease_seconds,
        claim_idle_ms=2000,
        drain_budget_seconds=5.0,
        _env_file=None,
    )


class Workers:
    """``celery worker`` processes (prefork, one pool process: the embedded vector index
    belongs to one process at a time), each in a session of its own so that a kill takes
    the worker and its pool together."""

    def __init__(self, settings: Settings, *, visibility_seconds: float, logs: Path) -> None:
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                filter(
                    None, [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")]
                )
            ),
            "SLEEPMEM_NAMESPACE": settings.namespace,
            "SLEEPMEM_REDIS_URL": str(settings.redis_url),
            "SLEEPMEM_DATABASE_URL": str(settings.database_url),
            "SLEEPMEM_DATA_DIR": str(settings.data_dir),
            "SLEEPMEM_EMBEDDER": settings.embedder,
            "SLEEPMEM_LEASE_SECONDS": str(settings.lease_seconds),
            "SLEEPMEM_CLAIM_IDLE_MS": str(settings.claim_idle_ms),
            "SLEEPMEM_DRAIN_BUDGET_SECONDS": str(settings.drain_budget_seconds),
            "SLEEPMEM_LOG_LEVEL": "WARNING",
            "SLEEPMEM_AUTH_ENABLED": "false",
            "SLEEPMEM_CHAOS_VISIBILITY_S": str(visibility_seconds),
        }
        self.logs = logs
        self.current: subprocess.Popen[bytes] | None = None
        self.started = 0

    def start(self) -> subprocess.Popen[bytes]:
        self.started += 1
        with (self.logs / f"worker-{self.started}.log").open("ab") as log:
            self.current = subprocess.Popen(
                [sys.executable, "-m", "sleepmem.bench.chaos"],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self.current

    def pool_pid(self) -> int | None:
        if self.current is None or self.current.poll() is not None:
            return None
        pid = self.current.pid
        # Any thread of the worker may fork the pool's replacement: look under each.
        children: list[str] = []
        for task in Path(f"/proc/{pid}/task").glob("*/children"):
            try:
                children += task.read_text().split()
            except OSError:
                continue
        return int(min(children, key=int)) if children else None

    def kill_pool(self, timeout: float = 60.0) -> bool:
        """SIGKILL the pool process; True when the worker forked a new one. False when the
        worker exited instead: Celery gives up ("Could not start worker processes") when a
        pool process dies before it is ready, leaving the restart to a supervisor."""
        pid = _wait_value(self.pool_pid, timeout)
        if pid is None:
            return False
        os.kill(pid, signal.SIGKILL)

        def outcome() -> bool | None:
            if self.current is None or self.current.poll() is not None:
                return False
            new = self.pool_pid()
            return True if new not in (None, pid) else None

        return bool(_wait_value(outcome, timeout))

    def kill_worker(self) -> None:
        """SIGKILL the worker and its pool, as a crashed host, and start another."""
        if self.current is not None and self.current.poll() is None:
            os.killpg(self.current.pid, signal.SIGKILL)
            self.current.wait(30)
        self.start()

    def stop(self, timeout: float = 60.0) -> None:
        """Warm shutdown (running tasks finish), SIGKILL if it does not come."""
        proc, self.current = self.current, None
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def _wait_value(get: Callable[[], Any], timeout: float, poll: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = get()
        if value is not None or time.monotonic() > deadline:
            return value
        time.sleep(poll)


def _wait(predicate: Callable[[], bool], timeout: float, poll: float = 0.2) -> bool:
    return bool(_wait_value(lambda: True if _safe(predicate) else None, timeout, poll))


def _strike_while(busy: Callable[[], bool], rng: random.Random, *, timeout: float) -> bool:
    """Wait for a moment somewhere inside a piece of work, not at its start: busy, and
    still busy after a short random pause. A task that ended during the pause (a loaded
    machine makes these windows short and uneven) sends us back to wait for the next one,
    until the timeout; then the disruption goes ahead on an idle system and says so."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _wait(busy, timeout=max(0.0, deadline - time.monotonic()), poll=0.05):
            return False
        time.sleep(rng.uniform(0.0, 0.1))
        if _safe(busy):
            return True
    return False


def _safe(predicate: Callable[[], bool]) -> bool:
    """A store being restarted answers nothing: not yet."""
    try:
        return predicate()
    except _STORE_ERRORS:
        return False


def _safe_value(get: Callable[[], T], default: T) -> T:
    try:
        return get()
    except _STORE_ERRORS:
        return default


def _events(plan: ChaosPlan) -> list[dict[str, Any]]:
    """The bench conversations with ids of our own: a batch resent after a failure is the
    same events again (the drain stores an event id once)."""
    out = []
    for fields in conversations(events=plan.events, users=plan.users, seed=plan.seed):
        fields["event_id"] = uuid.uuid4().hex
        fields["at"] = fields["at"].isoformat()
        out.append(fields)
    return out


def _emit(settings: Settings, plan: ChaosPlan, events: list[dict[str, Any]], tally: _Tally) -> None:
    """Send the batches as the harness allows them; a batch that fails (Redis down) is
    resent until Redis acknowledges it, as an agent with a retrying client would."""
    with MemoryClient(settings, redis_url=str(settings.redis_url)) as client:
        for n, i in enumerate(range(0, len(events), plan.batch)):
            tally.wait_allowed(n)
            chunk = events[i : i + plan.batch]
            while True:
                try:
                    tally.accepted.extend(client.emit_many(chunk))
                    break
                except (TransientError, redis_lib.RedisError, OSError):
                    tally.emit_retries += 1
                    time.sleep(0.2)
            time.sleep(0.05)


class _Probe:
    """What the harness reads from the stores to know where the system stands."""

    def __init__(self, res: Resources) -> None:
        self.res = res

    def scalar(self, sql: str, **params: Any) -> int:
        with self.res.engine.connect() as conn:
            return int(conn.execute(sa.text(sql), params).scalar() or 0)

    def leases(self) -> int:
        return sum(
            1
            for _ in self.res.redis.scan_iter(
                match=f"{self.res.keys.namespace}:lease:consolidate:*", count=1000
            )
        )

    def stream_backlog(self) -> tuple[int, int]:
        """(entries delivered to a consumer and not acknowledged, entries never delivered)."""
        r, stream = self.res.redis, self.res.keys.events
        if not r.exists(stream):
            return 0, 0
        groups = {g["name"].decode(): g for g in r.xinfo_groups(stream)}
        group = groups.get(DRAIN_GROUP)
        if group is None:
            return 0, int(r.xlen(stream))
        after = "(" + group["last-delivered-id"].decode()
        undelivered = len(r.xrange(stream, min=after, max="+"))
        return int(group["pending"]), undelivered

    def lease_tokens(self) -> set[bytes]:
        r, ns = self.res.redis, self.res.keys.namespace
        keys = list(r.scan_iter(match=f"{ns}:lease:consolidate:*", count=1000))
        return {v for v in (r.mget(keys) if keys else []) if v is not None}

    def busy(self, pool_pid: int | None, stale: set[bytes]) -> bool:
        """The current worker's pool process is at work: it holds a consolidation lease
        taken since the last disruption (a lease a killed holder left runs on until it
        expires), or entries it is draining (its consumer name carries its pid)."""
        if pool_pid is None:
            return False
        if self.lease_tokens() - stale:
            return True
        r, stream = self.res.redis, self.res.keys.events
        if not r.exists(stream):
            return False
        try:
            consumers = r.xinfo_consumers(stream, DRAIN_GROUP)
        except redis_lib.ResponseError:  # no group yet
            return False
        mine = f"-{pool_pid}-"
        return any(c["pending"] > 0 and mine in c["name"].decode() for c in consumers)

    def stored(self) -> int:
        return self.scalar("SELECT count(*) FROM raw_event WHERE tenant = :t", t=TENANT)

    def unconsolidated(self) -> int:
        return self.scalar("SELECT count(*) FROM raw_event WHERE consolidated = false")

    def pending_scopes(self) -> int:
        return self.scalar("SELECT count(*) FROM scope_state WHERE pending_count > 0")

    def settled(self, accepted: int) -> bool:
        return (
            self.stored() >= accepted
            and self.unconsolidated() == 0
            and self.pending_scopes() == 0
            and self.leases() == 0
            and self.stream_backlog() == (0, 0)
        )


def _disrupt(
    kind: str,
    *,
    workers: Workers,
    redis_server: ScratchRedis,
    postgres: ScratchPostgres,
    tally: _Tally,
) -> None:
    if kind == "pool":
        tally.pool_kills += 1
        if not workers.kill_pool():
            # The worker went down with its pool: start another, as its supervisor would.
            tally.worker_exits += 1
            workers.kill_worker()
    elif kind == "worker":
        workers.kill_worker()
        tally.worker_kills += 1
    elif kind == "redis":
        redis_server.kill()
        time.sleep(1.0)
        redis_server.start()
        tally.redis_restarts += 1
    elif kind == "postgres":
        postgres.stop()
        time.sleep(1.0)
        postgres.start()
        tally.pg_restarts += 1


def disruption_order(plan: ChaosPlan) -> list[str]:
    """Kills alternating pool / whole worker, the store restarts spread among them."""
    kills = ["pool" if i % 2 == 0 else "worker" for i in range(plan.kills)]
    stores = ["redis"] * plan.redis_restarts + ["postgres"] * plan.pg_restarts
    order = list(kills)
    rng = random.Random(plan.seed)
    for i, store in enumerate(stores):
        # Evenly among the kills, never first: something must be in flight to break.
        at = 1 + (i + 1) * len(order) // (len(stores) + 1)
        order.insert(min(at + rng.randint(0, 1), len(order)), store)
    return order


def run_chaos(plan: ChaosPlan, *, home: Path | None = None) -> dict[str, Any]:
    """Start the servers, run the plan, count; the servers go away afterwards."""
    with tempfile.TemporaryDirectory(prefix="sleepmem-chaos-") as tmp:
        base = home or Path(tmp)
        with scratch_services(base) as (redis_server, postgres):
            return run_chaos_on(plan, redis_server=redis_server, postgres=postgres, home=base)


def run_chaos_on(
    plan: ChaosPlan, *, redis_server: ScratchRedis, postgres: ScratchPostgres, home: Path
) -> dict[str, Any]:
    started = time.perf_counter()
    rng = random.Random(plan.seed)
    settings = chaos_settings(
        plan, redis_url=redis_server.url, database_url=postgres.url, data_dir=home / "data"
    )
    logs = home / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    res = build_resources(settings)  # migrates the schema before any worker starts
    probe = _Probe(res)
    workers = Workers(settings, visibility_seconds=plan.visibility_seconds, logs=logs)
    from sleepmem.workers.app import create_celery

    celery = create_celery(settings, broker_url=res.broker_url)
    scheduler = Scheduler(
        resources=res,
        send=celery_sender(celery),
        elector=LeaderElector(res.redis, res.keys.scheduler_leader, ttl_s=5.0),
        available=set(celery.tasks),
    )
    tally = _Tally()
    events = _events(plan)
    emitter = threading.Thread(
        target=_emit, args=(settings, plan, events, tally), name="chaos-emit", daemon=True
    )
    result: dict[str, Any] = {}
    try:
        workers.start()
        scheduler.start()
        emitter.start()
        order = disruption_order(plan)
        batches = -(-len(events) // plan.batch)
        stale: set[bytes] = set()
        for n, kind in enumerate(order):
            tally.allow(-(-(n + 1) * batches // (len(order) + 1)))

            def busy(stale: set[bytes] = stale) -> bool:
                return probe.busy(workers.pool_pid(), stale)

            if _strike_while(busy, rng, timeout=30.0) and kind in ("pool", "worker"):
                tally.kills_in_flight += 1
            _disrupt(
                kind, workers=workers, redis_server=redis_server, postgres=postgres, tally=tally
            )
            stale = _safe_value(probe.lease_tokens, stale)
            time.sleep(rng.uniform(0.2, 1.0))
        tally.allow(batches)
        emitter.join(600)
        chaos_s = time.perf_counter() - started
        settle_started = time.perf_counter()
        settled = _wait(lambda: probe.settled(len(tally.accepted)), plan.settle_timeout, poll=0.5)
        result["settle_seconds"] = round(time.perf_counter() - settle_started, 1)
        result["chaos_seconds"] = round(chaos_s, 1)
        result["settled"] = settled
    finally:
        workers.stop()
        scheduler.stop()
    result.update(_count(res, probe, tally, plan, sent=len(events)))
    res.close()
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def _count(
    res: Resources, probe: _Probe, tally: _Tally, plan: ChaosPlan, *, sent: int
) -> dict[str, Any]:
    accepted = set(tally.accepted)
    with res.engine.connect() as conn:
        stored_rows = conn.execute(
            sa.text("SELECT event_id, count(*) FROM raw_event WHERE tenant = :t GROUP BY event_id"),
            {"t": TENANT},
        ).all()
        stuck = (
            conn.execute(
                sa.text(
                    "SELECT count(DISTINCT scope_key) FROM raw_event WHERE consolidated = false"
                )
            ).scalar()
            or 0
        )
        dup_statements = (
            conn.execute(
                sa.text(
                    "SELECT count(*) FROM (SELECT scope_key, type, statement FROM memory "
                    "WHERE status = 'active' AND valid_to IS NULL "
                    "GROUP BY scope_key, type, statement HAVING count(*) > 1) d"
                )
            ).scalar()
            or 0
        )
        dup_lineages = (
            conn.execute(
                sa.text(
                    "SELECT count(*) FROM (SELECT lineage FROM memory "
                    "WHERE status = 'active' AND valid_to IS NULL "
                    "GROUP BY lineage HAVING count(*) > 1) d"
                )
            ).scalar()
            or 0
        )
        dup_slots = (
            conn.execute(
                sa.text(
                    "SELECT count(*) FROM (SELECT scope_key, subject, attribute FROM memory "
                    "WHERE status = 'active' AND valid_to IS NULL AND attribute <> '' "
                    "AND attribute NOT LIKE 'rel:%' AND conflict_set IS NULL "
                    "GROUP BY scope_key, subject, attribute HAVING count(*) > 1) d"
                )
            ).scalar()
            or 0
        )
        memories = conn.execute(sa.text("SELECT id, scope_key, status FROM memory")).all()
        ops: dict[str, int] = {
            str(op): int(n)
            for op, n in conn.execute(sa.text("SELECT op, count(*) FROM audit GROUP BY op")).all()
        }
        dead = conn.execute(sa.text("SELECT count(*) FROM dead_letter")).scalar() or 0
        index_pending = (
            conn.execute(
                sa.text("SELECT count(*) FROM memory WHERE index_state <> 'indexed'")
            ).scalar()
            or 0
        )
    stored = {eid: n for eid, n in stored_rows}
    pending_entries, undelivered = probe.stream_backlog()
    # The reconciler's job (every five minutes in production): whatever a crash left
    # between the SQL commit and the index goes in now; then the index must equal SQL.
    repaired = reconcile(engine=res.engine, index=res.index, embedder=res.embedder)
    sql_ids = {mid: (scope, status) for mid, scope, status in memories}
    point_ids = res.index.all_ids(tenant=TENANT)
    payloads: dict[str, dict[str, Any]] = {}
    for i in range(0, len(point_ids), 1000):
        payloads.update(res.index.payloads(point_ids[i : i + 1000]))
    missing = [m for m in sql_ids if m not in payloads]
    orphans = [p for p in payloads if p not in sql_ids]
    wrong = [
        m
        for m, (scope, status) in sql_ids.items()
        if m in payloads
        and (payloads[m].get("scope_key") != scope or payloads[m].get("status") != status)
    ]
    return {
        "events_sent": sent,
        "events_accepted": len(accepted),
        "emit_retries": tally.emit_retries,
        "events_stored": sum(1 for eid in accepted if eid in stored),
        "events_lost": sum(1 for eid in accepted if eid not in stored),
        "events_duplicated": sum(n - 1 for n in stored.values() if n > 1),
        "events_unexpected": sum(1 for eid in stored if eid not in accepted),
        "dead_letters": int(dead),
        "kills": tally.pool_kills + tally.worker_kills,
        "kills_with_work_in_flight": tally.kills_in_flight,
        "pool_kills": tally.pool_kills,
        "worker_kills": tally.worker_kills,
        "workers_exited_after_a_pool_kill": tally.worker_exits,
        "redis_restarts": tally.redis_restarts,
        "pg_restarts": tally.pg_restarts,
        "memories": len(memories),
        "current_memories": sum(1 for _m, _s, st in memories if st == "active"),
        "duplicate_current_memories": int(dup_statements),
        "duplicate_current_lineages": int(dup_lineages),
        "duplicate_current_slots": int(dup_slots),
        "stuck_scopes": int(stuck) + probe.pending_scopes(),
        "unconsolidated_events": probe.unconsolidated(),
        "leases_left": probe.leases(),
        "stream_pending": pending_entries,
        "stream_undelivered": undelivered,
        "index_pending_before_reconcile": int(index_pending),
        "index_orphans_removed_by_reconcile": repaired.deleted,
        "sql_index_missing": len(missing),
        "sql_index_orphans": len(orphans),
        "sql_index_payload_mismatches": len(wrong),
        "audit_ops": dict(sorted(ops.items())),
        "plan": {
            "events": plan.events,
            "users": plan.users,
            "kills": plan.kills,
            "redis_restarts": plan.redis_restarts,
            "pg_restarts": plan.pg_restarts,
        },
    }


def _worker_main() -> None:
    """A worker as ``sleepmem worker`` builds it, with the visibility timeout shortened."""
    from sleepmem.workers.app import create_celery_from_env

    app = create_celery_from_env()
    app.conf.broker_transport_options = {
        **app.conf.broker_transport_options,
        "visibility_timeout": float(os.environ["SLEEPMEM_CHAOS_VISIBILITY_S"]),
        "unacked_restore_interval": 1,
        "unacked_restore_throttle": 1,
    }
    app.worker_main(
        [
            "--quiet",
            "worker",
            "--pool=prefork",
            "--concurrency=1",
            f"--queues={','.join(names.QUEUES)}",
            "--loglevel=WARNING",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
    )


if __name__ == "__main__":
    _worker_main()
