"""docs/security.md "Crashes lose nothing": crashes lose nothing and duplicate nothing.

One run of the crash bench's own code (``sleepmem bench chaos``, short): a redis-server
(AOF on) and a PostgreSQL cluster of this test's own, real ``celery worker`` processes and
the leader-gated scheduler; 300 events through the SDK over six users, with facts repeated
across sessions and places that change. While drains and consolidations run, a worker's
pool process or the whole worker is SIGKILLed five times (a new worker each time), Redis
is SIGKILLed and restarted from its AOF once, and PostgreSQL is stopped as in a crash and
started again once. The tests then read what the run left behind.

Without redis-server or the PostgreSQL server binaries the tests skip, except in CI
(CI=true), where missing servers are a broken environment and fail.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from sleepmem.bench.chaos import ChaosPlan, disruption_order, run_chaos, services_available

PLAN = ChaosPlan(
    events=300, users=6, kills=5, redis_restarts=1, pg_restarts=1, settle_timeout=240.0
)

# One run takes about a minute on a quiet 2-core machine; the bound is for a loaded one
# (each wait inside the run is bounded too: a run that never settles reports it).
pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    missing = services_available()
    if missing is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{missing}: CI must provide them")
        pytest.skip(missing)
    home: Path = tmp_path_factory.mktemp("chaos")
    return run_chaos(PLAN, home=home)


class TestTheRunBrokeWhatItSaid:
    def test_every_kill_and_restart_happened_with_work_in_flight(self, run: dict[str, Any]) -> None:
        assert run["kills"] == 5 and run["pool_kills"] == 3 and run["worker_kills"] == 2
        assert run["redis_restarts"] == 1 and run["pg_restarts"] == 1
        # Kills aimed at a live lease or entries a live drain held, not at an idle worker.
        assert run["kills_with_work_in_flight"] >= 3, run

    def test_the_store_restarts_fall_between_the_kills(self) -> None:
        order = disruption_order(PLAN)
        assert sorted(order) == sorted(["pool", "worker"] * 2 + ["pool", "redis", "postgres"])
        assert order[0] in ("pool", "worker")


class TestEveryAcceptedEventIsStoredExactlyOnce:
    def test_no_accepted_event_is_lost_or_stored_twice(self, run: dict[str, Any]) -> None:
        assert run["events_lost"] == 0 and run["events_duplicated"] == 0, run
        assert run["events_accepted"] == run["events_stored"] == run["events_sent"] == 300
        assert run["events_unexpected"] == 0 and run["dead_letters"] == 0


class TestNoMemoryIsCurrentTwice:
    def test_no_statement_lineage_or_slot_has_two_current_versions(
        self, run: dict[str, Any]
    ) -> None:
        assert run["current_memories"] > 0
        assert run["duplicate_current_memories"] == 0
        assert run["duplicate_current_lineages"] == 0
        assert run["duplicate_current_slots"] == 0

    def test_repeats_and_corrections_ran_through_dedup_and_supersede(
        self, run: dict[str, Any]
    ) -> None:
        ops = run["audit_ops"]
        assert ops.get("NOOP", 0) > 0, ops  # a fact said again
        assert ops.get("UPDATE", 0) + ops.get("CONFLICT", 0) > 0, ops  # a place that changed


class TestNothingIsLeftStuck:
    def test_every_scope_settles_consolidated_unleased_and_drained(
        self, run: dict[str, Any]
    ) -> None:
        assert run["settled"], run
        assert run["stuck_scopes"] == 0 and run["unconsolidated_events"] == 0
        assert run["leases_left"] == 0
        assert run["stream_pending"] == 0 and run["stream_undelivered"] == 0


class TestTheIndexEqualsSql:
    def test_after_the_reconciler_every_memory_row_is_a_point_and_no_point_is_extra(
        self, run: dict[str, Any]
    ) -> None:
        assert run["memories"] > 0
        assert run["sql_index_missing"] == 0 and run["sql_index_orphans"] == 0
        assert run["sql_index_payload_mismatches"] == 0
