"""docs/architecture.md "Retries": tasks are acknowledged late and rejected when their
worker dies, so a crash redelivers instead of losing work.

Real ``celery worker`` processes (the production app factory and process hooks) run a
consolidation whose first delivery hangs; the test kills them with SIGKILL mid-task and
watches the same message run to its end on a worker that is alive. Only the broker's
visibility timeout is shortened (from an hour to seconds) so the test stays short.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis as redis_lib
from support import wait_for

from sleepmem.core.settings import Settings
from sleepmem.models import Scope
from sleepmem.resources import Resources
from sleepmem.tasks import names
from sleepmem.workers.app import create_celery

ROOT = Path(__file__).resolve().parents[2]
ANN = Scope(tenant="acme", agent="bot", user="ann").key
VISIBILITY_S = 2

WORKER = """
import os, sys, time
import redis
from sleepmem.core.settings import Settings
from sleepmem.pipelines.write.consolidate import ConsolidationReport
from sleepmem.resources import redis_urls
from sleepmem.workers.app import create_celery
from sleepmem.workers.process import connect_process_hooks

pool = sys.argv[1]
settings = Settings()
marks = redis.Redis.from_url(settings.redis_url)
started, done = settings.namespace + ":test:started", settings.namespace + ":test:done"

def pipeline(*, scope, **_):
    # The first delivery hangs until the test kills its process; later ones finish.
    if marks.rpush(started, os.getpid()) == 1:
        time.sleep(300)
    marks.rpush(done, os.getpid())
    return ConsolidationReport(scope_key=scope.key)

_, broker, _ = redis_urls(settings)
app = create_celery(settings, broker_url=broker, consolidate_pipeline=pipeline)
app.conf.broker_transport_options = {
    **app.conf.broker_transport_options,
    "visibility_timeout": VISIBILITY_S,
    "unacked_restore_interval": 1,
    "unacked_restore_throttle": 1,
}
connect_process_hooks()
app.worker_main(["worker", "--pool", pool, "--concurrency", "1", "-Q", "consolidate",
                 "--without-heartbeat", "--without-mingle", "--without-gossip",
                 "--loglevel", "WARNING"])
""".replace("VISIBILITY_S", str(VISIBILITY_S))


class Workers:
    """``celery worker`` processes of the test, killed at the end whatever happened."""

    def __init__(self, settings: Settings, tmp_path: Path) -> None:
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                        os.environ.get("PYTHONPATH")])),
            "SLEEPMEM_NAMESPACE": settings.namespace,
            "SLEEPMEM_REDIS_URL": str(settings.redis_url),
            "SLEEPMEM_DATABASE_URL": str(settings.database_url),
            "SLEEPMEM_DATA_DIR": str(tmp_path / "worker"),
            "SLEEPMEM_EMBEDDER": "hashing",
            # The killed run's lease must run out before the redelivery can take it.
            "SLEEPMEM_LEASE_SECONDS": "2",
        }
        self.cwd = tmp_path
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, pool: str) -> subprocess.Popen[bytes]:
        # A session of its own: the whole worker (main process and pool) can be killed.
        proc = subprocess.Popen([sys.executable, "-c", WORKER, pool], env=self.env,
                                cwd=self.cwd, start_new_session=True)
        self.procs.append(proc)
        return proc

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


@pytest.fixture
def workers(resources: Resources, tmp_path: Path) -> Iterator[Workers]:
    w = Workers(resources.settings, tmp_path)
    yield w
    w.close()


def marks(redis: redis_lib.Redis, ns: str, what: str) -> list[int]:
    return [int(p) for p in redis.lrange(f"{ns}:test:{what}", 0, -1)]


class TestRedelivery:
    def test_a_worker_killed_mid_task_loses_nothing_another_worker_finishes_it(
        self, resources: Resources, workers: Workers
    ) -> None:
        ns, r = resources.settings.namespace, resources.redis
        create_celery(resources.settings, broker_url=resources.broker_url).send_task(
            names.CONSOLIDATE, args=[ANN])
        first = workers.start("prefork")
        assert wait_for(lambda: len(marks(r, ns, "started")) == 1, timeout=60), "never started"
        os.killpg(first.pid, signal.SIGKILL)  # the worker and its pool, as a crashed host
        first.wait(10)
        assert marks(r, ns, "done") == []

        workers.start("prefork")
        # Unacknowledged for longer than the visibility timeout: the broker hands it out again.
        assert wait_for(lambda: len(marks(r, ns, "done")) == 1, timeout=90), "not redelivered"
        started = marks(r, ns, "started")
        assert len(started) == 2 and started[0] != started[1]
        assert marks(r, ns, "done") == [started[1]]

    def test_a_pool_process_killed_mid_task_has_its_message_rejected_and_run_again(
        self, resources: Resources, workers: Workers
    ) -> None:
        ns, r = resources.settings.namespace, resources.redis
        create_celery(resources.settings, broker_url=resources.broker_url).send_task(
            names.CONSOLIDATE, args=[ANN])
        parent = workers.start("prefork")
        assert wait_for(lambda: len(marks(r, ns, "started")) == 1, timeout=60), "never started"
        [child] = marks(r, ns, "started")
        assert child != parent.pid
        os.kill(child, signal.SIGKILL)
        # The worker sees its pool process die and rejects the message back to the queue.
        assert wait_for(lambda: len(marks(r, ns, "done")) == 1, timeout=90), "not redelivered"
        started = marks(r, ns, "started")
        assert len(started) == 2 and started[0] == child and started[1] != child
        assert marks(r, ns, "done") == [started[1]]
        assert parent.poll() is None  # the worker itself lived on
