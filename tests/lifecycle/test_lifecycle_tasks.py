"""The lifecycle task adapters: hits read from and trimmed in Redis, leases, cancel flags."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
import redis as redis_lib
from lifecycle_support import T0, Clock, current, ingest, say
from sqlmodel import Session

from sleepmem.adapters.redis.hits import read_hits, record_hits
from sleepmem.adapters.redis.locks import Lease
from sleepmem.core.errors import LeaseHeldError
from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.models import Job, Scope
from sleepmem.pipelines.lifecycle.reconsolidate import create_job
from sleepmem.resources import Resources, build_resources
from sleepmem.services import (
    cancel_job,
    create_erase_job,
    give_up,
    recover_jobs,
    refresh_job,
    run_erasure,
    run_reconsolidation,
    sweep_job,
)
from sleepmem.tasks import names, retry
from sleepmem.workers.app import create_celery

ANN = Scope(tenant="acme", agent="bot", user="ann")


@pytest.fixture
def res(settings: Settings, redis: redis_lib.Redis) -> Iterator[Resources]:
    resources = build_resources(settings)
    resources.clock = Clock(T0 + timedelta(hours=1))
    yield resources
    resources.close()


@pytest.fixture
def ann(res: Resources, keys: Keys) -> list[str]:
    ingest(res.redis, res.keys, res.engine, res.settings, res.ports(),
           [say("I love listening to jazz music while I work.", at=T0, scope=ANN)])
    return [m.id for m in current(res.engine)]


class TestMaintenanceJobs:
    def test_refresh_applies_the_recorded_hits_and_trims_them(
        self, res: Resources, ann: list[str]
    ) -> None:
        record_hits(res.redis, res.keys, ann, at=T0 + timedelta(minutes=30))
        record_hits(res.redis, res.keys, ann, at=T0 + timedelta(minutes=40))
        counts = refresh_job(res, "t1")
        assert counts["entries"] == 2 and counts["memories_hit"] == len(ann)
        assert read_hits(res.redis, res.keys) == []
        assert {m.access_count for m in current(res.engine)} == {2}

    def test_sweep_reports_its_counts(self, res: Resources, ann: list[str]) -> None:
        res.clock.advance(timedelta(days=400))
        counts = sweep_job(res, "t2")
        assert counts["expired"] == len(ann) and counts["scanned"] == len(ann)

    def test_every_lifecycle_task_is_registered_on_the_maintenance_queue(
        self, settings: Settings
    ) -> None:
        app = create_celery(settings, broker_url="redis://127.0.0.1:6379/0")
        for name in (names.SWEEP, names.REFRESH, names.RECONCILE, names.RECONSOLIDATE,
                     names.ERASE):
            assert name in app.tasks
            assert name not in names.ROUTES  # default queue: maintenance
        assert app.conf.task_default_queue == names.QUEUE_MAINTENANCE


class TestOperatorJobs:
    def test_a_reconsolidation_waits_while_the_scope_is_being_consolidated(
        self, res: Resources, ann: list[str]
    ) -> None:
        job = create_job(engine=res.engine, scope_key=ANN.key, now=T0)
        with Lease(res.redis, res.keys.lease(ANN.key), ttl_s=30), \
                pytest.raises(LeaseHeldError):
            run_reconsolidation(res, job.id)
        assert run_reconsolidation(res, job.id).status == "done"

    def test_a_cancel_request_stops_the_job_before_its_next_chunk(
        self, res: Resources, ann: list[str]
    ) -> None:
        job = create_job(engine=res.engine, scope_key=ANN.key, now=T0, apply=True)
        cancel_job(res, job.id)
        stopped = run_reconsolidation(res, job.id)
        assert stopped.status == "cancelled" and stopped.done == 0
        assert run_reconsolidation(res, job.id, resume=True).status == "done"

    def test_an_erasure_job_keeps_its_receipt_and_does_not_run_twice(
        self, res: Resources, ann: list[str]
    ) -> None:
        job = create_erase_job(res, tenant="acme", scope_key=ANN.key)
        done = run_erasure(res, job.id)
        assert done.status == "done" and done.result["removed"]["memories"] == len(ann)
        again = run_erasure(res, job.id)
        assert again.result == done.result and current(res.engine) == []


@pytest.fixture
def worker_res(res: Resources) -> Iterator[Resources]:
    """``res``, installed as the process's resources, as a worker's tasks find them."""
    from sleepmem.tasks.context import install_resources, uninstall_resources

    install_resources(res)
    yield res
    uninstall_resources()


def _status(res: Resources, job_id: str) -> Job:
    with Session(res.engine) as s:
        row = s.get(Job, job_id)
    assert row is not None
    return row


def _erasure_of_no_scope(res: Resources) -> Job:
    """A queued erasure whose row an older client wrote: its scope is no scope key, so the
    erasure refuses it when it runs."""
    job = create_erase_job(res, tenant="acme", scope_key=ANN.key)
    with Session(res.engine) as s:
        row = s.get(Job, job.id)
        assert row is not None
        row.params = {**row.params, "scope": "ann's diary"}
        s.add(row)
        s.commit()
    return job


class TestAJobWhoseTaskFailsEndsFailed:
    """Run as the worker runs them (the real tasks, applied in this process): a task that
    stops, by an error or by spending its retries, leaves its job failed, never queued."""

    def test_an_erasure_that_raises_is_failed_with_the_error_type_only(
        self, worker_res: Resources, ann: list[str]
    ) -> None:
        job = _erasure_of_no_scope(worker_res)
        app = create_celery(worker_res.settings, broker_url=worker_res.broker_url)
        result = app.tasks[names.ERASE].apply(args=[job.id])
        assert result.failed()
        failed = _status(worker_res, job.id)
        assert failed.status == "failed" and failed.finished_at is not None
        assert failed.error.startswith("ValidationError:") and "diary" not in failed.error

    def test_a_reconsolidation_whose_scope_stays_busy_is_failed_once_its_retries_are_spent(
        self, worker_res: Resources, ann: list[str]
    ) -> None:
        job = create_job(engine=worker_res.engine, scope_key=ANN.key, now=T0)
        app = create_celery(worker_res.settings, broker_url=worker_res.broker_url)
        # A consolidation holds the scope for longer than every retry; applied in this
        # process, the retries run one after another without their backoff.
        with Lease(worker_res.redis, worker_res.keys.lease(ANN.key), ttl_s=300):
            result = app.tasks[names.RECONSOLIDATE].apply(args=[job.id])
        assert result.failed() and isinstance(result.result, LeaseHeldError)
        failed = _status(worker_res, job.id)
        assert failed.status == "failed"
        assert f"gave up after {retry.MAX_RETRIES + 1} attempts" in failed.error

    def test_a_queued_erasure_that_raises_at_start_up_recovery_is_failed_and_start_up_goes_on(
        self, worker_res: Resources, ann: list[str]
    ) -> None:
        job = _erasure_of_no_scope(worker_res)
        counts = recover_jobs(worker_res, lambda _job_id: None)
        assert counts == {"requeued": 0, "failed": 1}
        assert _status(worker_res, job.id).status == "failed"

    def test_a_job_that_ended_keeps_its_own_ending(
        self, worker_res: Resources, ann: list[str]
    ) -> None:
        job = create_erase_job(worker_res, tenant="acme", scope_key=ANN.key)
        assert run_erasure(worker_res, job.id).status == "done"
        kept = give_up(worker_res, job.id, LeaseHeldError("busy"), attempts=13)
        assert kept is not None and kept.status == "done"
        assert give_up(worker_res, "f" * 32, LeaseHeldError("busy"), attempts=1) is None
