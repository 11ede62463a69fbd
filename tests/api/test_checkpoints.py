"""Session checkpoints: versioned, compare-and-set, redacted, bounded, mirrored, retired.

Real Redis (the test's own namespace) and SQLite/PostgreSQL; the HTTP routes through the
app; a real API process killed with SIGKILL between two checkpoints.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis as redis_lib
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import delete as sa_delete
from sqlmodel import Session, col, select
from support import all_at_once, wait_for

from sleepmem.api.app import create_app
from sleepmem.core.errors import ConflictError, NotFoundError, ValidationError
from sleepmem.core.keys import Keys, scope_digest
from sleepmem.core.settings import Settings
from sleepmem.models import Scope, SessionCheckpoint
from sleepmem.resources import Resources, build_resources
from sleepmem.working import WorkingMemory, checkpoint_job, mirror_checkpoints

SCOPE = {"tenant": "acme", "agent": "bot", "user": "ann", "session": "trip-42"}
KEY = Scope(**SCOPE).key


def state(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "goal": "Book a train from Munich to Vienna for Friday",
        "plan": ["find trains", "pick the 9:14", "pay", "send the ticket"],
        "current_step": "pay",
        "completed": [
            {"key": "search:munich-vienna:fri", "step": "found 6 trains"},
            {"key": "hold:rj-62", "step": "held seat 45 on RJ 62", "result": {"seat": 45}},
        ],
        "variables": {"budget_eur": 120, "passenger": "Ann"},
        "tool_results": [{"tool": "rail.search", "result": {"count": 6}}],
        "verified": ["RJ 62 leaves Munich at 9:14 and arrives in Vienna at 13:14."],
    }
    base.update(over)
    return base


@pytest.fixture
def wm(resources: Resources) -> WorkingMemory:
    return WorkingMemory(resources)


class TestVersions:
    def test_a_first_write_creates_version_one_and_a_read_returns_it(
        self, wm: WorkingMemory
    ) -> None:
        written = wm.put(SCOPE, state(), base_version=0)
        read = wm.get(SCOPE)
        assert written.version == read.version == 1
        assert read.state.done("hold:rj-62") is not None
        assert read.state.done("pay:rj-62") is None
        assert read.state.variables == {"budget_eur": 120, "passenger": "Ann"}

    def test_each_write_names_the_version_it_replaces_and_gets_the_next(
        self, wm: WorkingMemory
    ) -> None:
        v = 0
        for step in ("find trains", "pick the 9:14", "pay"):
            v = wm.put(SCOPE, state(current_step=step), base_version=v).version
        assert v == 3
        assert wm.get(SCOPE).state.current_step == "pay"
        assert [c.version for c in wm.history(SCOPE).versions] == [3, 2, 1]

    def test_a_stale_write_is_refused_with_the_current_version_and_nothing_is_merged(
        self, wm: WorkingMemory
    ) -> None:
        wm.put(SCOPE, state(), base_version=0)
        wm.put(SCOPE, state(current_step="send the ticket"), base_version=1)
        with pytest.raises(ConflictError) as refused:
            wm.put(SCOPE, state(current_step="pay", goal="something else"), base_version=1)
        assert refused.value.current_version == 2
        assert "base_version 2" in str(refused.value)
        current = wm.get(SCOPE)
        assert (current.version, current.state.current_step) == (2, "send the ticket")
        assert current.state.goal.startswith("Book a train")

    def test_creating_a_checkpoint_that_exists_is_a_conflict_too(self, wm: WorkingMemory) -> None:
        wm.put(SCOPE, state(), base_version=0)
        with pytest.raises(ConflictError):
            wm.put(SCOPE, state(), base_version=0)

    def test_concurrent_writers_with_the_same_base_version_exactly_one_wins(
        self, wm: WorkingMemory
    ) -> None:
        wm.put(SCOPE, state(), base_version=0)
        counter = iter(range(100))

        def write() -> int:
            n = next(counter)
            return wm.put(SCOPE, state(current_step=f"writer {n}"), base_version=1).version

        won, lost = all_at_once(12, write)
        assert won == [2]
        assert len(lost) == 11
        assert all(isinstance(e, ConflictError) and e.current_version == 2 for e in lost)
        assert wm.get(SCOPE).version == 2
        assert [c.version for c in wm.history(SCOPE).versions] == [2, 1]

    def test_sessions_are_separate_documents(self, wm: WorkingMemory) -> None:
        wm.put(SCOPE, state(), base_version=0)
        other = {**SCOPE, "session": "trip-43"}
        assert wm.put(other, state(goal="Hotel in Vienna"), base_version=0).version == 1
        assert wm.get(SCOPE).state.goal.startswith("Book a train")
        with pytest.raises(NotFoundError):
            wm.get({**SCOPE, "session": "never"})


class TestInput:
    def test_a_scope_without_a_session_is_refused_with_the_field_named(
        self, wm: WorkingMemory
    ) -> None:
        with pytest.raises(ValidationError) as bad:
            wm.put({**SCOPE, "session": ""}, state(), base_version=0)
        assert bad.value.field == "scope.session"

    def test_an_unknown_state_field_is_refused_and_variables_are_suggested(
        self, wm: WorkingMemory
    ) -> None:
        with pytest.raises(ValidationError) as bad:
            wm.put(SCOPE, state(notes="x"), base_version=0)
        assert bad.value.field == "state.notes"

    def test_two_completed_steps_with_one_idempotency_key_are_refused(
        self, wm: WorkingMemory
    ) -> None:
        twice = [{"key": "pay:rj-62"}, {"key": "pay:rj-62"}]
        with pytest.raises(ValidationError) as bad:
            wm.put(SCOPE, state(completed=twice), base_version=0)
        assert "appears twice" in bad.value.message

    def test_an_oversized_state_is_refused_with_its_size_and_the_limit(
        self, resources: Resources
    ) -> None:
        resources.settings = resources.settings.model_copy(update={"checkpoint_max_bytes": 2000})
        wm = WorkingMemory(resources)
        with pytest.raises(ValidationError) as bad:
            wm.put(SCOPE, state(variables={"page": "x" * 5000}), base_version=0)
        assert bad.value.field == "state"
        assert "over the limit of 2000" in bad.value.message
        assert "SLEEPMEM_CHECKPOINT_MAX_BYTES" in bad.value.message
        with pytest.raises(NotFoundError):
            wm.get(SCOPE)

    def test_secrets_never_reach_redis_or_sql(
        self, wm: WorkingMemory, resources: Resources, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        secret = "sk-live-9f8e7d6c5b4a39281706f5e4d3c2b1a0"
        wm.put(SCOPE, state(
            variables={"stripe_api_key": secret, "note": f"my api key is {secret}"},
            tool_results=[{"tool": "login", "result": "the password is Tr0ub4dor&3"}],
        ), base_version=0)
        mirror_checkpoints(resources)
        digest = scope_digest(KEY)
        stored = b"".join([
            *redis.hgetall(keys.checkpoint(digest)).values(),
            *redis.lrange(keys.checkpoint_history(digest), 0, -1),
        ])
        assert b"REDACTED" in stored
        assert secret.encode() not in stored and b"Tr0ub4dor" not in stored
        with Session(resources.engine) as s:
            row = s.exec(select(SessionCheckpoint)).one()
        blob = orjson.dumps(row.state)
        assert secret.encode() not in blob and b"Tr0ub4dor" not in blob
        assert wm.get(SCOPE).state.variables["stripe_api_key"] == "[REDACTED:secret]"


class TestDurability:
    def test_the_mirror_copies_every_version_to_sql(
        self, wm: WorkingMemory, resources: Resources
    ) -> None:
        for v in range(3):
            wm.put(SCOPE, state(current_step=f"step {v}"), base_version=v)
        assert mirror_checkpoints(resources) == {"sessions": 1, "versions": 3}
        assert mirror_checkpoints(resources) == {"sessions": 0, "versions": 0}
        with Session(resources.engine) as s:
            rows = s.exec(select(SessionCheckpoint).order_by(col(SessionCheckpoint.version))).all()
        assert [(r.version, r.state["current_step"]) for r in rows] == [
            (1, "step 0"), (2, "step 1"), (3, "step 2")]
        assert {r.scope_key for r in rows} == {KEY}

    def test_a_checkpoint_redis_lost_is_read_and_continued_from_the_sql_mirror(
        self, wm: WorkingMemory, resources: Resources, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        wm.put(SCOPE, state(), base_version=0)
        wm.put(SCOPE, state(current_step="send the ticket"), base_version=1)
        mirror_checkpoints(resources)
        digest = scope_digest(KEY)
        redis.delete(keys.checkpoint(digest), keys.checkpoint_history(digest))
        assert wm.get(SCOPE).version == 2
        redis.delete(keys.checkpoint(digest), keys.checkpoint_history(digest))
        assert wm.put(SCOPE, state(current_step="done"), base_version=2).version == 3

    def test_an_ended_checkpoint_is_kept_then_archived_then_deleted(
        self, wm: WorkingMemory, resources: Resources, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        wm.put(SCOPE, state(), base_version=0)
        wm.end_session({"scope": SCOPE, "outcome": "ticket sent"})
        s = resources.settings
        t0 = datetime.now(UTC)
        assert checkpoint_job(resources, "t") == {
            "sessions": 1, "versions": 1, "archived": 0, "deleted": 0, "values_expired": 0}
        assert wm.get(SCOPE).ended_at is not None

        resources.clock = lambda: t0 + timedelta(seconds=s.checkpoint_keep_s + 60)
        assert checkpoint_job(resources, "t")["archived"] == 1
        assert not redis.exists(keys.checkpoint(scope_digest(KEY)))
        with pytest.raises(NotFoundError):
            wm.get(SCOPE)  # archived rows are not resumed from

        resources.clock = lambda: t0 + timedelta(
            seconds=s.checkpoint_keep_s + s.checkpoint_delete_after_s + 120)
        assert checkpoint_job(resources, "t")["deleted"] == 1
        with Session(resources.engine) as session:
            assert session.exec(select(SessionCheckpoint)).all() == []

    def test_a_session_that_never_ends_is_archived_once_idle(
        self, wm: WorkingMemory, resources: Resources
    ) -> None:
        wm.put(SCOPE, state(), base_version=0)
        t0 = datetime.now(UTC)
        assert checkpoint_job(resources, "t")["archived"] == 0
        resources.clock = lambda: t0 + timedelta(seconds=resources.settings.checkpoint_idle_s + 1)
        assert checkpoint_job(resources, "t")["archived"] == 1


ACME_KEY = "acme-key-7c6b5a49"


@pytest.fixture
def http(settings: Settings, redis: redis_lib.Redis) -> Iterator[TestClient]:
    secured = settings.model_copy(
        update={"auth_enabled": True, "api_keys": {"acme": SecretStr(ACME_KEY),
                                                    "globex": SecretStr("globex-key-1234")}}
    )
    with TestClient(create_app(secured),
                    headers={"Authorization": f"Bearer {ACME_KEY}"}) as client:
        yield client


class TestHttp:
    def test_put_get_and_history_round_trip(self, http: TestClient) -> None:
        first = http.put("/v1/checkpoints", json={"scope": SCOPE, "state": state(),
                                                  "base_version": 0})
        assert first.status_code == 200, first.text
        assert first.json()["version"] == 1
        second = http.put("/v1/checkpoints", json={
            "scope": SCOPE, "state": state(current_step="send the ticket"), "base_version": 1})
        assert second.json()["version"] == 2
        got = http.get("/v1/checkpoints", params={"scope": KEY})
        assert got.status_code == 200
        assert got.json()["state"]["current_step"] == "send the ticket"
        assert got.json()["scope"] == {**SCOPE, "project": ""}
        hist = http.get("/v1/checkpoints/history", params={"scope": KEY, "limit": 5})
        assert [v["version"] for v in hist.json()["versions"]] == [2, 1]

    def test_a_stale_write_answers_409_with_the_current_version(self, http: TestClient) -> None:
        body = {"scope": SCOPE, "state": state(), "base_version": 0}
        assert http.put("/v1/checkpoints", json=body).status_code == 200
        stale = http.put("/v1/checkpoints", json=body)
        assert stale.status_code == 409
        assert stale.json()["error"]["current_version"] == 1
        assert "stale" in stale.json()["error"]["message"]

    def test_bad_bodies_answer_422_naming_the_field(self, http: TestClient) -> None:
        resp = http.put("/v1/checkpoints", json={"scope": SCOPE, "state": state(),
                                                 "base_version": -1})
        assert resp.status_code == 422
        assert resp.json()["error"]["field"] == "base_version"
        missing = http.get("/v1/checkpoints", params={"scope": KEY})
        assert missing.status_code == 404

    def test_another_tenants_key_is_refused(self, http: TestClient) -> None:
        resp = http.put("/v1/checkpoints", json={"scope": SCOPE, "state": state(),
                                                 "base_version": 0},
                        headers={"Authorization": "Bearer globex-key-1234"})
        assert resp.status_code == 403
        resp = http.get("/v1/checkpoints", params={"scope": KEY},
                        headers={"Authorization": "Bearer globex-key-1234"})
        assert resp.status_code == 403

    def test_the_routes_and_their_bodies_are_in_the_openapi_document(
        self, http: TestClient
    ) -> None:
        doc = http.get("/openapi.json").json()
        for path in ("/v1/checkpoints", "/v1/checkpoints/history", "/v1/sessions/evict",
                     "/v1/sessions/end", "/v1/context"):
            assert path in doc["paths"], path
        assert "409" in doc["paths"]["/v1/checkpoints"]["put"]["responses"]
        schemas = doc["components"]["schemas"]
        assert {"CheckpointPut", "CheckpointState", "CompletedStep", "ContextResult"} <= set(
            schemas)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_api(settings: Settings, port: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        "SLEEPMEM_REDIS_URL": str(settings.redis_url),
        "SLEEPMEM_DATABASE_URL": settings.sql_url,
        "SLEEPMEM_NAMESPACE": settings.namespace,
        "SLEEPMEM_DATA_DIR": str(settings.data_dir),
        "SLEEPMEM_EMBEDDER": "hashing",
        # The api role names its stores; the embedded index is the one-host choice.
        "SLEEPMEM_INDEX_BACKEND": "edge",
        "SLEEPMEM_AUTH_ENABLED": "false",
        "SLEEPMEM_PORT": str(port),
        "SLEEPMEM_LOG_LEVEL": "WARNING",
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", "from sleepmem.cli import main; main()", "api"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )

    def up() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    assert wait_for(up, timeout=60, poll=0.1), "the API process did not start"
    return proc


class TestCrash:
    def test_an_api_process_killed_with_sigkill_resumes_from_the_last_acknowledged_version(
        self, settings: Settings, redis: redis_lib.Redis
    ) -> None:
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        proc = _start_api(settings, port)
        try:
            acked = 0
            for step in ("find trains", "pick the 9:14"):
                resp = httpx.put(f"{base}/v1/checkpoints", timeout=10, json={
                    "scope": SCOPE, "state": state(current_step=step), "base_version": acked})
                assert resp.status_code == 200
                acked = resp.json()["version"]
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        assert acked == 2

        proc = _start_api(settings, port)
        try:
            got = httpx.get(f"{base}/v1/checkpoints", params={"scope": KEY}, timeout=10).json()
            assert (got["version"], got["state"]["current_step"]) == (2, "pick the 9:14")
            resumed = httpx.put(f"{base}/v1/checkpoints", timeout=10, json={
                "scope": SCOPE, "state": state(current_step="pay"), "base_version": 2})
            assert resumed.json()["version"] == 3
        finally:
            os.kill(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)

        # And with the SQL mirror as the only copy (a Redis without AOF lost everything):
        res = build_resources(settings)
        try:
            mirror_checkpoints(res)
            for key in redis.scan_iter(match=f"{settings.namespace}:ckpt:*"):
                redis.delete(key)
            assert WorkingMemory(res).get(SCOPE).version == 3
        finally:
            res.close()


class TestErasure:
    def test_erasing_a_scope_removes_its_checkpoints_from_redis_and_sql(
        self, wm: WorkingMemory, resources: Resources, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        from sleepmem.services import create_erase_job, run_erasure

        bob = {**SCOPE, "user": "bob"}
        wm.put(SCOPE, state(), base_version=0)
        wm.put(bob, state(), base_version=0)
        mirror_checkpoints(resources)  # one version in SQL and Redis ...
        wm.put(SCOPE, state(current_step="x"), base_version=1)  # ... one in Redis only
        ann = Scope(tenant="acme", agent="bot", user="ann").key
        job = create_erase_job(resources, tenant="acme", scope_key=ann)
        done = run_erasure(resources, job.id)
        assert done.result["removed"]["checkpoints"] == 1
        assert done.result["removed"]["checkpoint_versions"] == 1
        with pytest.raises(NotFoundError):
            wm.get(SCOPE)
        digest = scope_digest(KEY)
        assert not redis.exists(keys.checkpoint(digest), keys.checkpoint_history(digest))
        assert redis.zscore(keys.checkpoints_dirty, digest) is None
        assert wm.get(bob).version == 1  # a sibling's session is untouched
        with Session(resources.engine) as s:
            assert {r.user for r in s.exec(select(SessionCheckpoint))} == {"bob"}


class TestPostgres:
    def test_mirror_reseed_and_retirement_work_on_postgresql(
        self, settings: Settings, pg_database: str, redis: redis_lib.Redis, keys: Keys
    ) -> None:
        res = build_resources(settings.model_copy(update={"database_url": pg_database}))
        try:
            wm = WorkingMemory(res)
            wm.put(SCOPE, state(), base_version=0)
            wm.put(SCOPE, state(current_step="send the ticket"), base_version=1)
            assert mirror_checkpoints(res) == {"sessions": 1, "versions": 2}
            digest = scope_digest(KEY)
            redis.delete(keys.checkpoint(digest), keys.checkpoint_history(digest))
            assert wm.get(SCOPE).state.current_step == "send the ticket"
            assert [v.version for v in wm.history(SCOPE).versions] == [2, 1]
            wm.end_session({"scope": SCOPE})
            t0 = datetime.now(UTC)
            checkpoint_job(res, "t")
            res.clock = lambda: t0 + timedelta(seconds=res.settings.checkpoint_keep_s + 1)
            assert checkpoint_job(res, "t")["archived"] == 1
            res.clock = lambda: t0 + timedelta(
                seconds=res.settings.checkpoint_keep_s + res.settings.checkpoint_delete_after_s
                + 2)
            assert checkpoint_job(res, "t")["deleted"] == 2
        finally:
            with Session(res.engine) as s:
                s.execute(sa_delete(SessionCheckpoint))
                s.commit()
            res.close()
