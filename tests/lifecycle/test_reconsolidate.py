"""Re-consolidation: replay the raw log through today's pipeline, diff, and swap on apply."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
import redis as redis_lib
from lifecycle_support import T0, Clock, current, ingest, say
from sqlalchemy.engine import Engine
from sqlalchemy.exc import StatementError
from sqlmodel import Session, col, select

from sleepmem.adapters.vectors.edge import EdgeIndex
from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.models import Audit, Job, Memory
from sleepmem.pipelines.lifecycle.explain import explain
from sleepmem.pipelines.lifecycle.jobs import eta_seconds
from sleepmem.pipelines.lifecycle.reconsolidate import create_job, run_job
from sleepmem.pipelines.ports import Ports
from sleepmem.pipelines.types import EventView, Extraction
from sleepmem.pipelines.write.extract.rules import RulesExtractor
from sleepmem.resources import Resources
from sleepmem.services import pin_memory, update_memory

STORY = [
    "I live in Beijing.",
    "I love listening to jazz music while I work.",
    "Lovely sunny weather today, isn't it?",
    "My favourite editor is Neovim.",
    "I enjoy hiking on weekends.",
    "I moved to Shanghai last week.",
]


class RewordingExtractor:
    """'Version 2' of the extractor: the same facts, worded differently, no small talk."""

    name = "rules-v2"

    def __init__(self) -> None:
        self.inner = RulesExtractor()

    def extract(self, events: list[EventView]) -> Extraction:
        out = self.inner.extract(events)
        kept = [replace(c, statement=c.statement.rstrip(".") + " (v2).")
                for c in out.candidates if c.type != "event"]
        return Extraction(candidates=kept, extractor=self.name)


@pytest.fixture
def scope_key(
    redis: redis_lib.Redis, keys: Keys, engine: Engine, settings: Settings, ports: Ports,
    clock: Clock,
) -> str:
    events = [say(text, at=T0 + timedelta(minutes=i), session=f"s{i // 3}")
              for i, text in enumerate(STORY)]
    (key,) = ingest(redis, keys, engine, settings, ports, events)
    clock.advance(timedelta(hours=1))
    return key


def v2(ports: Ports) -> Ports:
    return replace(ports, extractor=RewordingExtractor())


def snapshot(engine: Engine) -> tuple[list[tuple[str, str, str]], int]:
    with Session(engine) as s:
        mems = sorted((m.id, m.status, m.statement) for m in s.exec(select(Memory)))
        audits = len(s.exec(select(Audit)).all())
    return mems, audits


def run(engine: Engine, ports: Ports, settings: Settings, scope_key: str, clock: Clock,
        **kw: object) -> Job:
    apply = bool(kw.pop("apply", False))
    job = create_job(engine=engine, scope_key=scope_key, now=clock.now, apply=apply)
    return run_job(engine=engine, ports=ports, settings=settings, job_id=job.id, **kw)  # type: ignore[arg-type]


class TestDryRun:
    def test_the_same_pipeline_finds_nothing_to_change(
        self, engine: Engine, ports: Ports, settings: Settings, scope_key: str, clock: Clock
    ) -> None:
        job = run(engine, ports, settings, scope_key, clock)
        assert job.status == "done" and job.total == len(STORY) and job.done == len(STORY)
        counts = job.result["counts"]
        assert counts["unchanged"] == len(current(engine, scope_key)) > 0
        assert (counts["added"], counts["removed"], counts["changed"]) == (0, 0, 0)

    def test_a_dry_run_reports_the_diff_and_changes_nothing(
        self, engine: Engine, ports: Ports, settings: Settings, scope_key: str, clock: Clock
    ) -> None:
        before = snapshot(engine)
        job = run(engine, v2(ports), settings, scope_key, clock)
        diff = job.result["diff"]
        assert snapshot(engine) == before
        assert not job.result["applied"]
        assert any("Shanghai" in c["statement"] and "(v2)" in c["statement"]
                   and "(v2)" not in c["old_statement"] for c in diff["changed"])
        assert any("sunny" in r["statement"] for r in diff["removed"])
        assert all(item["reason"] for kind in diff.values() for item in kind)


class TestApply:
    def test_apply_swaps_the_set_and_a_second_replay_converges(
        self, engine: Engine, ports: Ports, settings: Settings, scope_key: str, clock: Clock,
        index: EdgeIndex,
    ) -> None:
        job = run(engine, v2(ports), settings, scope_key, clock, apply=True)
        now = current(engine, scope_key)
        assert job.result["applied"] and now
        assert all("(v2)" in m.statement for m in now)
        assert all(m.index_state == "indexed" for m in now)
        assert set(index.payloads([m.id for m in now])) == {m.id for m in now}
        again = run(engine, v2(ports), settings, scope_key, clock)
        assert again.result["counts"]["unchanged"] == len(now)
        assert sum(again.result["counts"][k] for k in ("added", "removed", "changed")) == 0

    def test_the_old_set_stays_explainable_pointing_at_its_replacement(
        self, engine: Engine, ports: Ports, settings: Settings, scope_key: str, clock: Clock
    ) -> None:
        (old,) = [m for m in current(engine, scope_key) if "Shanghai" in m.statement]
        job = run(engine, v2(ports), settings, scope_key, clock, apply=True)
        ex = explain(engine=engine, memory_id=old.id, settings=settings, now=clock.now)
        assert ex.status == "archived" and f"job {job.id}" in ex.why
        new = ex.versions[-1]
        assert new.supersedes == old.id and "(v2)" in new.statement and new.status == "active"

    def test_a_rerun_of_the_same_job_is_a_no_op(
        self, engine: Engine, ports: Ports, settings: Settings, scope_key: str, clock: Clock
    ) -> None:
        job = run(engine, v2(ports), settings, scope_key, clock, apply=True)
        after = snapshot(engine)
        rerun = run_job(engine=engine, ports=v2(ports), settings=settings, job_id=job.id)
        assert rerun.result == job.result and snapshot(engine) == after


class TestProgressAndCancel:
    def test_progress_is_written_chunk_by_chunk(
        self, engine: Engine, ports: Ports, settings: Settings, scope_key: str, clock: Clock
    ) -> None:
        seen: list[tuple[int, int, float | None]] = []
        run(engine, ports, settings, scope_key, clock, chunk=2,
            on_progress=lambda j: seen.append((j.done, j.total, eta_seconds(j))))
        assert [d for d, _t, _e in seen] == [2, 4, 6]
        assert {t for _d, t, _e in seen} == {len(STORY)}
        assert seen[0][2] is not None and seen[0][2] >= 0

    def test_a_cancelled_job_changes_nothing_and_can_be_resumed(
        self, engine: Engine, ports: Ports, settings: Settings, scope_key: str, clock: Clock
    ) -> None:
        before = snapshot(engine)
        job = create_job(engine=engine, scope_key=scope_key, now=clock.now, apply=True)
        calls = iter([False, True])
        cancelled = run_job(engine=engine, ports=v2(ports), settings=settings, job_id=job.id,
                            chunk=2, should_cancel=lambda: next(calls, True))
        assert cancelled.status == "cancelled" and cancelled.done == 2
        assert snapshot(engine) == before
        again = run_job(engine=engine, ports=v2(ports), settings=settings, job_id=job.id)
        assert again.status == "cancelled"  # stays cancelled unless resumed
        resumed = run_job(engine=engine, ports=v2(ports), settings=settings, job_id=job.id,
                          resume=True)
        assert resumed.status == "done" and resumed.result["applied"]


class TestSince:
    def test_only_events_since_the_time_are_replayed(
        self, engine: Engine, ports: Ports, settings: Settings, scope_key: str, clock: Clock
    ) -> None:
        job = create_job(engine=engine, scope_key=scope_key, now=clock.now, apply=True,
                         since=T0 + timedelta(minutes=3))
        done = run_job(engine=engine, ports=v2(ports), settings=settings, job_id=job.id)
        assert done.total == 3
        statements = [m.statement for m in current(engine, scope_key)]
        assert any("jazz" in s and "(v2)" not in s for s in statements)
        assert any("hiking" in s and "(v2)" in s for s in statements)
        with Session(engine) as s:
            assert s.exec(select(Audit).where(col(Audit.op) == "RECONSOLIDATE")).first()


def _as_resources(engine: Engine, ports: Ports, settings: Settings, redis: redis_lib.Redis,
                  keys: Keys, clock: Clock) -> Resources:
    """The API's use-cases over this module's engine, index and clock."""
    return Resources(settings=settings, redis=redis, engine=engine, keys=keys,
                     redis_url=settings.redis_url or "", broker_url="", _index=ports.index,
                     _embedder=ports.embedder, clock=clock)


class TestWhatAPersonDecidedIsHeld:
    def test_an_edited_memory_survives_an_apply_and_is_not_derived_again(
        self, engine: Engine, ports: Ports, settings: Settings, scope_key: str, clock: Clock,
        redis: redis_lib.Redis, keys: Keys,
    ) -> None:
        res = _as_resources(engine, ports, settings, redis, keys, clock)
        (jazz,) = [m for m in current(engine, scope_key) if "jazz" in m.statement]
        edited = update_memory(res, memory_id=jazz.id, tenant=None,
                               statement="The user likes jazz, but only while working.")
        job = run(engine, v2(ports), settings, scope_key, clock, apply=True)
        now = current(engine, scope_key)
        assert job.result["counts"]["held"] == 1
        assert edited.id in {m.id for m in now}
        assert not [m for m in now if "jazz" in m.statement and m.id != edited.id]
        # Everything the person did not touch was re-derived by version 2.
        assert all("(v2)" in m.statement for m in now if m.id != edited.id)

    def test_a_pinned_memory_is_neither_reworded_nor_removed(
        self, engine: Engine, ports: Ports, settings: Settings, scope_key: str, clock: Clock,
        redis: redis_lib.Redis, keys: Keys,
    ) -> None:
        res = _as_resources(engine, ports, settings, redis, keys, clock)
        (editor,) = [m for m in current(engine, scope_key) if "Neovim" in m.statement]
        pin_memory(res, memory_id=editor.id, tenant=None, pinned=True)
        run(engine, v2(ports), settings, scope_key, clock, apply=True)
        now = {m.id: m for m in current(engine, scope_key)}
        assert editor.id in now and now[editor.id].statement == editor.statement
        assert [m.id for m in now.values() if "Neovim" in m.statement] == [editor.id]


class TestAJobThatCannotRunEndsFailed:
    def test_a_stored_since_no_clock_can_hold_fails_the_job_never_leaving_it_queued(
        self, engine: Engine, ports: Ports, settings: Settings, clock: Clock
    ) -> None:
        key = "t=acme/a=bot/u=ann/p=/s="
        job = create_job(engine=engine, scope_key=key, now=clock.now)
        with Session(engine) as s:
            row = s.get(Job, job.id)
            assert row is not None
            # Written by a client older than the API's check: before year 1 once in UTC.
            row.params = {**row.params, "since": "0001-01-01T00:00:00+05:00"}
            s.add(row)
            s.commit()
        with pytest.raises((OverflowError, StatementError)):
            run_job(engine=engine, ports=ports, settings=settings, job_id=job.id)
        with Session(engine) as s:
            failed = s.get(Job, job.id)
        assert failed is not None and failed.status == "failed"
        assert "Error" in failed.error and failed.finished_at is not None
