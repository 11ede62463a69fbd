"""A consolidation whose lease is lost mid-run commits nothing: it rolls back, says why in
the audit log and raises a retryable error; the lease's next holder lands the batch once.

Real Redis (the lease), SQLite and the embedded index; the real rules pipeline. The lease
is taken from under the run by a hook inside the extractor: it expires (deleted) and
another worker acquires it, as happens when a worker stalls longer than the lease TTL.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from consolidation_support import (
    HookedExtractor,
    audits,
    current_statements,
    emit_and_drain,
    key_of,
    memories,
    pending_ids,
    pipeline_with,
)

from sleepmem.adapters.redis.locks import RedisLock
from sleepmem.core.errors import LeaseLostError, TransientError
from sleepmem.resources import Resources
from sleepmem.services import run_consolidation

FIRST = ["I live in Lisbon.", "I'm vegetarian."]
SECOND = ["Actually I moved to Porto last month.", "My favourite tea is oolong.",
          "我喜欢爬山。"]


def losing_the_lease(res: Resources, key: str) -> tuple[RedisLock, Callable[[], None]]:
    """Another worker, and a hook that lets the run's lease expire so that worker takes it."""
    other = RedisLock(res.redis, res.keys.lease(key), ttl_s=30)

    def hook() -> None:
        res.redis.delete(res.keys.lease(key))  # expired
        assert other.acquire()

    return other, hook


class TestALeaseLostMidRun:
    @pytest.fixture
    def run_that_lost(self, resources: Resources) -> tuple[Resources, RedisLock, LeaseLostError]:
        res = resources
        key = key_of("ann")
        emit_and_drain(res, "ann", FIRST)
        run_consolidation(res, scope_key=key, pipeline=pipeline_with(HookedExtractor(
            lambda: None)))
        emit_and_drain(res, "ann", SECOND)
        self.before = memories(res.engine, "ann")
        self.indexed_before = res.index.count()
        self.pending_before = pending_ids(res.engine, "ann")
        other, hook = losing_the_lease(res, key)
        extractor = HookedExtractor(hook)
        with pytest.raises(LeaseLostError) as raised:
            run_consolidation(res, scope_key=key, pipeline=pipeline_with(extractor))
        return res, other, raised.value

    def test_commits_nothing(self, run_that_lost: tuple[Resources, RedisLock, Exception]) -> None:
        res, _other, _exc = run_that_lost
        assert memories(res.engine, "ann") == self.before
        assert pending_ids(res.engine, "ann") == self.pending_before
        assert len(self.pending_before) == len(SECOND)
        assert res.index.count() == self.indexed_before

    def test_audits_that_the_lease_was_lost(
        self, run_that_lost: tuple[Resources, RedisLock, Exception]
    ) -> None:
        res, _other, _exc = run_that_lost
        (error,) = audits(res.engine, "ann", "ERROR")
        assert "lease was lost" in error.reason
        assert sorted(error.input_event_ids) == self.pending_before

    def test_raises_a_retryable_error_and_does_not_cool_the_scope_down(
        self, run_that_lost: tuple[Resources, RedisLock, Exception]
    ) -> None:
        res, other, exc = run_that_lost
        assert isinstance(exc, TransientError)
        assert res.redis.get(res.keys.queued(key_of("ann"))) != b"failed"
        # Release is compare-and-delete: the lease's next holder still has it.
        assert other.held()

    def test_the_next_holder_lands_the_batch_exactly_once(
        self, run_that_lost: tuple[Resources, RedisLock, Exception]
    ) -> None:
        res, other, _exc = run_that_lost
        key = key_of("ann")
        assert other.release()
        report = run_consolidation(res, scope_key=key,
                                   pipeline=pipeline_with(HookedExtractor(lambda: None)))
        assert report.events == len(SECOND)
        assert pending_ids(res.engine, "ann") == []
        # The same events into a scope that never lost its lease: the same memories.
        emit_and_drain(res, "bob", FIRST)
        run_consolidation(res, scope_key=key_of("bob"),
                          pipeline=pipeline_with(HookedExtractor(lambda: None)))
        emit_and_drain(res, "bob", SECOND)
        run_consolidation(res, scope_key=key_of("bob"),
                          pipeline=pipeline_with(HookedExtractor(lambda: None)))
        landed = current_statements(res.engine, "ann")
        assert landed == current_statements(res.engine, "bob")
        assert len(landed) == len(set(landed)), f"a memory landed twice: {landed}"
        assert any("Porto" in text for _kind, text in landed)
        again = run_consolidation(res, scope_key=key,
                                  pipeline=pipeline_with(HookedExtractor(lambda: None)))
        assert again.events == 0
        assert current_statements(res.engine, "ann") == landed
