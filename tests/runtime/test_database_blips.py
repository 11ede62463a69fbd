"""A database blip is a retry, not a failure: driver errors become TransientError at the
SQL adapter, a consolidation cut off mid-batch leaves everything pending without cooling
the scope down, and the batch lands once when the database is back.

The PostgreSQL here is a scratch cluster of this test's own (initdb + pg_ctl into a tmp
dir, on a free port), because stopping the machine's shared server would break every other
run. Without the PostgreSQL server binaries the test skips, except in CI (CI=true), where a
missing server is a broken environment and fails.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis as redis_lib
import sqlalchemy as sa
from consolidation_support import (
    HookedExtractor,
    audits,
    current_statements,
    emit_and_drain,
    key_of,
    pending_ids,
    pipeline_with,
)
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from support import REDIS_URL, wait_for

from sleepmem.adapters.sql import make_engine
from sleepmem.bench.servers import ScratchPostgres, postgres_binaries
from sleepmem.core.errors import TransientError
from sleepmem.core.settings import Settings
from sleepmem.resources import Resources, build_resources
from sleepmem.services import run_consolidation
from sleepmem.tasks import names
from sleepmem.tasks.context import install_resources, uninstall_resources
from sleepmem.workers.app import create_celery
from sleepmem.workers.thread import ThreadWorker

CONTENTS = ["I live in Lisbon.", "I'm vegetarian.", "我喜欢爬山。", "My sister is called Ana."]


@pytest.fixture
def postgres() -> Iterator[ScratchPostgres]:
    bin_dir = postgres_binaries()
    if bin_dir is None:
        reason = "no PostgreSQL server binaries (initdb, pg_ctl) on this machine"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason}: CI must provide them")
        pytest.skip(reason)
    server = ScratchPostgres(bin_dir)
    try:
        server.start()
        yield server
    finally:
        server.remove()


@pytest.fixture
def pg_resources(
    postgres: ScratchPostgres, tmp_path: Path, namespace: str, redis: redis_lib.Redis
) -> Iterator[Resources]:
    settings = Settings(
        data_dir=tmp_path / "data", redis_url=REDIS_URL, database_url=postgres.url,
        namespace=namespace, embedder="hashing", auth_enabled=False,
        _env_file=None,  # type: ignore[call-arg]
    )
    res = build_resources(settings)
    res.index.count()  # opened beforehand: the blip is the database's, not a slow open
    yield res
    res.close()


class TestPostgresStopsMidBatch:
    def test_the_run_raises_a_transient_error_and_leaves_everything_pending(
        self, postgres: ScratchPostgres, pg_resources: Resources
    ) -> None:
        res, key = pg_resources, key_of("ann")
        emit_and_drain(res, "ann", CONTENTS)
        waiting = pending_ids(res.engine, "ann")
        with pytest.raises(TransientError) as raised:
            run_consolidation(res, scope_key=key,
                              pipeline=pipeline_with(HookedExtractor(postgres.stop)))
        assert not isinstance(raised.value, SQLAlchemyError)
        assert "database unavailable" in str(raised.value)
        # A blip is retried, not cooled down like a scope that fails every time.
        assert res.redis.get(res.keys.queued(key)) != b"failed"
        assert res.redis.exists(res.keys.lease(key)) == 0

        postgres.start()
        assert pending_ids(res.engine, "ann") == waiting
        report = run_consolidation(res, scope_key=key,
                                   pipeline=pipeline_with(HookedExtractor(lambda: None)))
        assert report.events == len(CONTENTS)
        assert pending_ids(res.engine, "ann") == []
        landed = current_statements(res.engine, "ann")
        assert len(landed) == len(set(landed)), f"a memory landed twice: {landed}"
        assert any("Lisbon" in text for _kind, text in landed)
        assert len(audits(res.engine, "ann", "ADD")) == len(landed)
        assert run_consolidation(res, scope_key=key, pipeline=pipeline_with(
            HookedExtractor(lambda: None))).events == 0

    def test_the_consolidate_task_retries_until_the_database_is_back(
        self, postgres: ScratchPostgres, pg_resources: Resources
    ) -> None:
        res, key = pg_resources, key_of("ann")
        emit_and_drain(res, "ann", CONTENTS)
        restarted = threading.Event()

        def blip() -> None:
            postgres.stop()

            def back() -> None:
                postgres.start()
                restarted.set()

            threading.Timer(1.0, back).start()

        app = create_celery(res.settings, broker_url=res.broker_url,
                            consolidate_pipeline=pipeline_with(HookedExtractor(blip)))
        install_resources(res)
        try:
            with ThreadWorker(app, concurrency=1, queues=(names.QUEUE_CONSOLIDATE,)):
                app.send_task(names.CONSOLIDATE, args=[key])
                assert wait_for(restarted.is_set, timeout=30)
                assert wait_for(lambda: not _pending_or_down(res), timeout=60)
        finally:
            uninstall_resources()
        landed = current_statements(res.engine, "ann")
        assert len(landed) == len(set(landed)), f"a memory landed twice: {landed}"
        assert len(audits(res.engine, "ann", "ADD")) == len(landed) > 0
        assert len(audits(res.engine, "ann", "ERROR")) == 0


def _pending_or_down(res: Resources) -> bool:
    try:
        return bool(pending_ids(res.engine, "ann"))
    except TransientError:
        return True


class TestWhatIsNotABlip:
    def test_a_missing_table_on_sqlite_stays_a_plain_error(self, tmp_path: Path) -> None:
        engine = make_engine(f"sqlite:///{tmp_path / 'x.db'}")
        try:
            with pytest.raises(OperationalError, match="no such table") as raised, \
                    engine.connect() as conn:
                conn.execute(sa.text("SELECT * FROM no_such_table"))
            assert not isinstance(raised.value, TransientError)
        finally:
            engine.dispose()
