"""First use and the documented client, against a real server (the embedded runtime with
its API on a free port): the generated local key, refusal off loopback, every client
method sync and async, tenant enforcement, and the forgetting sweep leaving pins alone."""

from __future__ import annotations

import asyncio
import json
import os
import re
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis as redis_lib
from support import REDIS_URL, wait_for

from sleepmem.client import AsyncClient, Client
from sleepmem.core.errors import (
    AuthError,
    ConfigurationError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    ValidationError,
)
from sleepmem.core.localkey import DEFAULT_TENANT, key_file
from sleepmem.core.settings import Settings
from sleepmem.models import ConflictGroup
from sleepmem.models.views import MemoryView
from sleepmem.runtime import Runtime, announce_lines

SCOPE = {"tenant": DEFAULT_TENANT, "agent": "bot", "user": "ann"}
TALK = [
    "Hi, I'm Ann and I live in Berlin.",
    "I always prefer a window seat.",
    "My order number is 88231.",
]


def server_settings(tmp: Path, namespace: str, **over: object) -> Settings:
    values: dict[str, object] = dict(
        data_dir=tmp / "data", redis_url=REDIS_URL, database_url=f"sqlite:///{tmp / 'db.sqlite'}",
        namespace=namespace, embedder="hashing", host="127.0.0.1", port=0,
        tick_seconds=0.2, idle_seconds=0.5, log_level="WARNING", _env_file=None,
    )
    values.update(over)
    return Settings(**values)  # type: ignore[arg-type]


@contextmanager
def running_server(tmp: Path) -> Iterator[Runtime]:
    """An unconfigured server (auth on, no keys, loopback) with one consolidated session."""
    namespace = f"smtest-{uuid.uuid4().hex[:10]}"
    runtime = Runtime(server_settings(tmp, namespace)).start()
    try:
        with Client(data_dir=runtime.settings.data_dir, session="s1", **SCOPE) as mem:
            mem.emit_many([{"content": text} for text in TALK])
            mem.end_session()
            assert wait_for(lambda: len(mem.list(SCOPE).items) >= 3, timeout=60)
        yield runtime
    finally:
        runtime.stop()
        client = redis_lib.Redis.from_url(REDIS_URL)
        for key in client.scan_iter(match=f"{namespace}:*", count=1000):
            client.delete(key)
        client.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    with running_server(tmp_path_factory.mktemp("srv")) as runtime:
        yield runtime


@pytest.fixture
def mem(server: Runtime) -> Iterator[Client]:
    with Client(data_dir=server.settings.data_dir, **SCOPE) as client:
        yield client


def find(mem: Client, word: str) -> MemoryView:
    for item in mem.list(SCOPE, limit=500).items:
        if word in item.statement:
            return item
    raise AssertionError(f"no memory mentions {word!r}")


class TestUnconfiguredServe:
    def test_a_loopback_server_without_keys_generates_one_into_a_private_key_file(
        self, server: Runtime
    ) -> None:
        path = key_file(server.settings.data_dir)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert server.local_key is not None and server.local_key.tenant == DEFAULT_TENANT
        assert server.local_key.url == server.api_url
        lines = "\n".join(announce_lines(server))
        assert server.local_key.key in lines and "curl" in lines and str(path) in lines

    def test_a_request_without_the_key_is_told_what_to_set(self, server: Runtime) -> None:
        with Client(server.api_url, api_key=None, data_dir=server.settings.data_dir / "none",
                    **SCOPE) as stranger, pytest.raises(AuthError) as err:
            stranger.search("where does Ann live?")
        message = str(err.value)
        assert "Authorization: Bearer" in message and "SLEEPMEM_API_KEY" in message
        # Where the key lives, relative to the data directory: an unauthenticated caller is
        # never shown the server's absolute path.
        assert f"<data dir>/{key_file(server.settings.data_dir).name}" in message
        assert str(server.settings.data_dir.resolve()) not in message

    def test_a_second_start_on_the_same_data_directory_keeps_the_key(
        self, server: Runtime
    ) -> None:
        from sleepmem.core.localkey import prepare_auth

        again = prepare_auth(server.settings.model_copy(update={"api_keys": {}}))
        assert not again.created and again.local_key is not None
        assert again.local_key.key == server.local_key.key  # type: ignore[union-attr]

    def test_off_loopback_without_keys_the_server_refuses_to_start(self, tmp_path: Path) -> None:
        settings = server_settings(tmp_path, "smtest-refuse", host="0.0.0.0")
        with pytest.raises(ConfigurationError, match=r"refusing to listen on 0\.0\.0\.0") as err:
            Runtime(settings)
        assert "\n" not in str(err.value) and "SLEEPMEM_API_KEYS" in str(err.value)
        assert not key_file(settings.data_dir).exists()


class TestClientReads:
    def test_search_finds_what_the_session_said(self, mem: Client) -> None:
        statements = [c.statement for c in mem.search("where does Ann live?", k=3).flat()]
        assert any("Berlin" in s for s in statements)

    def test_context_renders_cards_within_the_token_budget(self, mem: Client) -> None:
        ctx = mem.context("where does Ann live?", budget_tokens=60)
        assert "Berlin" in ctx.text
        assert 0 < ctx.tokens <= 60

    def test_list_pages_through_a_scope_and_filters_by_type(self, mem: Client) -> None:
        everything = mem.list(SCOPE, limit=500).items
        first = mem.list(SCOPE, limit=1)
        assert len(first.items) == 1 and first.next_cursor is not None
        second = mem.list(SCOPE, limit=500, cursor=first.next_cursor)
        assert [m.id for m in first.items + second.items] == [m.id for m in everything]
        kinds = {m.type for m in everything}
        one = sorted(kinds)[0]
        assert {m.type for m in mem.list(SCOPE, type=one).items} == {one}

    def test_get_history_and_explain_describe_one_memory(self, mem: Client) -> None:
        item = find(mem, "window")
        assert mem.get(item.id).statement == item.statement
        assert [v.id for v in mem.history(item.id)] == [item.id]
        assert mem.explain(item.id).memory_id == item.id


class TestClientCorrections:
    def test_an_edit_appends_a_human_version_and_closes_the_old_one(self, mem: Client) -> None:
        old = find(mem, "order number")
        new = mem.update(old.id, "The user's order number is 99100.", reason="typo")
        assert (new.trust, new.version, new.supersedes) == ("human", old.version + 1, old.id)
        versions = mem.history(new.id)
        assert [v.id for v in versions] == [old.id, new.id]
        assert versions[0].status == "superseded" and versions[0].superseded_by == new.id
        assert "edited by a person: typo" in [a.reason for a in mem.explain(old.id).audits]

    def test_pin_clears_expiry_and_unpin_restores_it(self, mem: Client) -> None:
        item = find(mem, "window")
        pinned = mem.pin(item.id)
        assert pinned.pinned and pinned.expires_at is None
        unpinned = mem.unpin(item.id)
        assert not unpinned.pinned and unpinned.expires_at is not None

    def test_helpful_raises_importance_and_wrong_invalidates(self, mem: Client) -> None:
        item = find(mem, "Berlin")
        assert mem.feedback(item.id, "helpful").importance > item.importance
        wrong = mem.feedback(item.id, "wrong", note="she moved")
        assert wrong.status == "superseded" and wrong.invalidated_at is not None
        assert item.id not in {c.id for c in mem.search("where does Ann live?", k=10).flat()}

    def test_forget_erases_a_memory_and_returns_a_receipt(self, server: Runtime) -> None:
        with Client(data_dir=server.settings.data_dir, **SCOPE) as mem:
            ids = mem.emit_many([{"content": "I am allergic to kiwis.", "session": "s9"}])
            mem.end_session("s9")
            assert wait_for(lambda: any("kiwi" in m.statement
                                        for m in mem.list(SCOPE, limit=500).items), timeout=30)
            target = find(mem, "kiwi")
            receipt = mem.forget(target.id)
            assert receipt.memory_id == target.id and ids
            with pytest.raises(NotFoundError):
                mem.get(target.id)


def seed_conflict(mem: Client, user: str, session: str) -> tuple[str, dict[str, str]]:
    """The user names one city, a trusted CRM record another: a conflict set.
    Returns the set's id and its sides by city."""
    where = {**SCOPE, "user": user}
    mem.emit_many([
        {**where, "session": session, "role": "user", "content": "I live in Portland, Oregon."},
        {**where, "session": session, "role": "tool", "kind": "tool_result",
         "meta": {"source": "crm", "trusted": True},
         "content": json.dumps({"customer": {"user": user, "city": "Seattle",
                                             "verified": True}})},
        {**where, "session": session, "kind": "session_end", "role": "system", "content": ""},
    ])

    def sides() -> list[MemoryView]:
        return [m for m in mem.list(where, limit=500).items if m.status == "pending_confirmation"]

    assert wait_for(lambda: len(sides()) == 2, timeout=60), mem.list(where, limit=500).items
    found = sides()
    assert len({m.conflict_set for m in found}) == 1 and found[0].conflict_set
    by_city = {("Seattle" if "Seattle" in m.statement else "Portland"): m.id for m in found}
    return found[0].conflict_set, by_city


def conflicts_in(mem: Client, user: str) -> list[ConflictGroup]:
    result = mem.search("Which city does the user live in?", {**SCOPE, "user": user}, k=10)
    return [c for c in result.cards if isinstance(c, ConflictGroup)]


class TestConflictResolution:
    def test_keeping_one_side_confirms_it_and_invalidates_the_other(self, mem: Client) -> None:
        conflict_set, side = seed_conflict(mem, "cara", "c1")
        assert [g.conflict_set for g in conflicts_in(mem, "cara")] == [conflict_set]
        done = mem.resolve_conflict(conflict_set, side["Portland"], reason="she told us")
        assert done.kept.id == side["Portland"]
        assert (done.kept.status, done.kept.trust) == ("active", "human")
        assert [m.id for m in done.invalidated] == [side["Seattle"]]
        loser = mem.get(side["Seattle"])
        assert loser.status == "superseded" and loser.superseded_by == side["Portland"]
        assert loser.valid_to is not None and loser.invalidated_at is not None
        audit = [a for a in mem.explain(side["Seattle"]).audits if a.op == "RESOLVE"]
        assert audit and "she told us" in audit[0].reason
        assert not conflicts_in(mem, "cara")
        cards = mem.search("Which city does the user live in?", {**SCOPE, "user": "cara"}, k=10)
        assert side["Portland"] in {c.id for c in cards.flat()}
        assert side["Seattle"] not in {c.id for c in cards.flat()}
        with pytest.raises(NotFoundError, match="no open conflict set"):
            mem.resolve_conflict(conflict_set, side["Portland"])

    def test_editing_one_side_resolves_the_set_in_favour_of_the_edit(self, mem: Client) -> None:
        conflict_set, side = seed_conflict(mem, "dora", "d1")
        edited = mem.update(side["Seattle"], "The user lives in Seattle, Washington.")
        assert edited.status == "active" and edited.trust == "human"
        other = mem.get(side["Portland"])
        assert other.status == "superseded" and other.superseded_by == edited.id
        assert "RESOLVE" in {a.op for a in mem.explain(side["Portland"]).audits}
        with pytest.raises(NotFoundError):
            mem.resolve_conflict(conflict_set, side["Portland"])

    def test_a_memory_outside_the_set_cannot_be_kept(self, mem: Client) -> None:
        conflict_set, _ = seed_conflict(mem, "emma", "e1")
        stranger = find(mem, "window")
        with pytest.raises(ValidationError, match="not a side of this conflict set"):
            mem.resolve_conflict(conflict_set, stranger.id)


    def test_the_async_client_resolves_too(self, server: Runtime, mem: Client) -> None:
        conflict_set, side = seed_conflict(mem, "fay", "f1")

        async def run() -> None:
            async with AsyncClient(data_dir=server.settings.data_dir, **SCOPE) as amem:
                done = await amem.resolve_conflict(conflict_set, side["Seattle"])
                assert done.kept.trust == "human"
                assert [m.id for m in done.invalidated] == [side["Portland"]]

        asyncio.run(run())
        assert mem.get(side["Portland"]).superseded_by == side["Seattle"]


class TestJobs:
    def test_a_dry_run_reconsolidation_is_queued_and_can_be_read_back(self, mem: Client) -> None:
        owner = "t=default/a=bot/u=ann/p=/s="
        job = mem.reconsolidate(owner)
        assert job.kind == "reconsolidate" and job.scope_key == owner
        assert wait_for(lambda: mem.job(job.id).status in ("done", "failed"), timeout=30)
        assert mem.job(job.id).status == "done"
        assert job.id in {j.id for j in mem.jobs()}

    def test_maintenance_runs_on_the_server(self, mem: Client) -> None:
        counts = mem.run_maintenance("sweep")
        assert "scanned" in counts


class TestTenancy:
    def test_the_local_key_reads_and_writes_only_its_own_tenant(self, server: Runtime) -> None:
        with Client(data_dir=server.settings.data_dir) as mem:
            with pytest.raises(ForbiddenError, match="SLEEPMEM_API_KEYS"):
                mem.search("anything", {"tenant": "acme"})
            with pytest.raises(ForbiddenError):
                mem.emit(content="hi", tenant="acme", agent="bot")
            with pytest.raises(ForbiddenError):
                mem.list({"tenant": "acme"})

    def test_an_unknown_memory_id_is_not_found(self, mem: Client) -> None:
        with pytest.raises(NotFoundError):
            mem.get("0" * 32)


class TestAsyncClient:
    def test_the_async_client_offers_the_same_calls(self, server: Runtime) -> None:
        async def run() -> None:
            async with AsyncClient(data_dir=server.settings.data_dir, **SCOPE) as mem:
                ids = await mem.emit_many([{"content": "I like green tea.", "session": "a1"}])
                assert len(ids) == 1 and await mem.emit(content="ok", session="a1")
                await mem.end_session("a1")
                for _ in range(300):
                    page = await mem.list(SCOPE, limit=500)
                    if any("tea" in m.statement for m in page.items):
                        break
                    await asyncio.sleep(0.1)
                tea = next(m for m in page.items if "tea" in m.statement)
                assert (await mem.get(tea.id)).id == tea.id
                assert any("tea" in c.statement
                           for c in (await mem.search("what does Ann drink?", k=5)).flat())
                assert "tea" in (await mem.context("what does Ann drink?")).text
                edited = await mem.update(tea.id, "The user likes jasmine tea.")
                assert edited.trust == "human"
                assert len(await mem.history(edited.id)) == 2
                assert (await mem.pin(edited.id)).pinned
                assert not (await mem.unpin(edited.id)).pinned
                assert (await mem.feedback(edited.id, "helpful")).importance >= edited.importance
                assert (await mem.explain(edited.id)).memory_id == edited.id
                job = await mem.reconsolidate("t=default/a=bot/u=ann/p=/s=")
                assert (await mem.job(job.id)).id == job.id
                assert job.id in {j.id for j in await mem.jobs()}
                assert (await mem.forget(edited.id)).memory_id == edited.id

        asyncio.run(run())


class TestWorkingMemoryThroughTheClient:
    def test_a_checkpoint_is_written_read_back_and_a_stale_write_is_refused(
        self, server: Runtime
    ) -> None:
        with Client(data_dir=server.settings.data_dir, session="trip-7", **SCOPE) as mem:
            first = mem.put_checkpoint({"goal": "Book Lisbon", "plan": ["flight", "hotel"]},
                                       base_version=0)
            second = mem.put_checkpoint(
                {"goal": "Book Lisbon", "plan": ["flight", "hotel"],
                 "completed": [{"key": "flight-TP1", "step": "flight"}]},
                base_version=first.version,
            )
            assert second.version == first.version + 1
            now = mem.get_checkpoint()
            assert now.version == second.version
            assert [c.key for c in now.state.completed] == ["flight-TP1"]
            assert [c.version for c in mem.checkpoint_history()] == [2, 1]
            with pytest.raises(ConflictError) as stale:
                mem.put_checkpoint({"goal": "stale"}, base_version=first.version)
            assert stale.value.current_version == second.version
            assert len(mem.evict([{"role": "user", "content": "Window seat, please."}])) == 1

    def test_a_checkpoint_needs_a_session(self, mem: Client) -> None:
        with pytest.raises(ValidationError, match="session"):
            mem.get_checkpoint()

    def test_the_async_client_reads_the_same_checkpoint(self, server: Runtime) -> None:
        async def run() -> None:
            async with AsyncClient(data_dir=server.settings.data_dir, session="trip-8",
                                   **SCOPE) as mem:
                made = await mem.put_checkpoint({"goal": "Rent a car"}, base_version=0)
                assert (await mem.get_checkpoint()).version == made.version
                assert [c.version for c in await mem.checkpoint_history()] == [made.version]

        asyncio.run(run())


class TestPinnedSurvivesTheSweep:
    def test_a_pinned_memory_is_never_expired_while_its_unpinned_sibling_is(
        self, server: Runtime, mem: Client
    ) -> None:
        from sleepmem.pipelines.lifecycle.forget import sweep
        from sleepmem.services import pin_memory

        res = server.resources
        assert res is not None
        mem.emit(content="I need a hotel near the station for May 3.", session="p1")
        mem.end_session("p1")
        mem.emit(content="I need a rental car in Lisbon for June 9.", session="p2")
        mem.end_session("p2")
        assert wait_for(lambda: sum(("hotel" in m.statement) or ("rental" in m.statement)
                                    for m in mem.list(SCOPE, limit=500).items) >= 2, timeout=30)
        hotel, car = find(mem, "hotel"), find(mem, "rental")
        assert hotel.id != car.id and {car.type, hotel.type}.isdisjoint({"identity", "procedure"})
        pin_memory(res, memory_id=hotel.id, tenant=DEFAULT_TENANT, pinned=True)
        later = datetime.now(UTC) + timedelta(days=800)
        sweep(engine=res.engine, ports=res.ports(clock=lambda: later), settings=res.settings)
        assert mem.get(hotel.id).status == "active"
        assert mem.get(car.id).status in ("expired", "archived")


def cli(server: Runtime, *args: str, redis: bool = True) -> subprocess.CompletedProcess[str]:
    """The CLI in its own process, configured like the server (as a second shell would be);
    ``redis=False``: a shell that does not know the server's Redis."""
    s = server.settings
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLEEPMEM_")}
    env.update({
        "SLEEPMEM_DATA_DIR": str(s.data_dir),
        "SLEEPMEM_DATABASE_URL": str(s.database_url), "SLEEPMEM_NAMESPACE": s.namespace,
        "SLEEPMEM_EMBEDDER": "hashing", "SLEEPMEM_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    })
    if redis:
        env["SLEEPMEM_REDIS_URL"] = str(s.redis_url)
    command = [sys.executable, "-c", "from sleepmem.cli import main; main()", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


class TestCliNextToARunningServer:
    """The server holds the embedded index; the CLI asks it instead of opening it again."""

    def test_sweep_consolidate_reconsolidate_and_explain_go_through_the_server(
        self, server: Runtime, mem: Client
    ) -> None:
        swept = cli(server, "sweep", "--json")
        assert swept.returncode == 0, swept.stderr
        assert "WouldBlock" not in swept.stderr and "scanned" in json.loads(swept.stdout)
        owner = "t=default/a=bot/u=ann/p=/s="
        consolidated = cli(server, "consolidate", "--scope", owner)
        assert consolidated.returncode == 0, consolidated.stderr
        assert "ops" in json.loads(consolidated.stdout)
        replay = cli(server, "reconsolidate", "--scope", owner, "--json")
        assert replay.returncode == 0, replay.stderr
        assert json.loads(replay.stdout)["status"] == "done"
        item = mem.list(SCOPE).items[0]
        explained = cli(server, "explain", item.id, "--json")
        assert explained.returncode == 0 and json.loads(explained.stdout)["memory_id"] == item.id

    def test_emit_goes_through_the_server_from_a_shell_without_its_redis(
        self, server: Runtime, mem: Client
    ) -> None:
        sent = cli(server, "emit", "I restore old motorbikes in my garage.", "--agent", "bot",
                   "--user", "ann", "--session", "cli1", redis=False)
        assert sent.returncode == 0, sent.stderr
        (event_id,) = sent.stdout.split()
        assert mem.end_session("cli1")
        assert wait_for(lambda: any("motorbikes" in m.statement for m in mem.list(SCOPE).items),
                        timeout=60)
        (found,) = [m for m in mem.list(SCOPE).items if "motorbikes" in m.statement]
        assert event_id in mem.get(found.id).provenance

    def test_jobs_cancel_clears_a_job_stuck_in_queued(self, server: Runtime) -> None:
        from sleepmem.pipelines.lifecycle.jobs import get_job
        from sleepmem.pipelines.lifecycle.reconsolidate import create_job

        res = server.resources
        assert res is not None
        stuck = create_job(engine=res.engine, scope_key="t=default/a=bot/u=ann/p=/s=",
                           now=datetime.now(UTC))  # queued, never sent: a dead process's job
        done = cli(server, "jobs", "--cancel", stuck.id)
        assert done.returncode == 0, done.stderr
        assert get_job(engine=res.engine, job_id=stuck.id).status == "cancelled"


class TestStaleJobsAtStartUp:
    def test_queued_jobs_are_sent_again_and_orphaned_running_jobs_fail_with_how_to_resume(
        self, server: Runtime
    ) -> None:
        from sqlmodel import Session

        from sleepmem.models import Job
        from sleepmem.pipelines.lifecycle.jobs import get_job
        from sleepmem.pipelines.lifecycle.reconsolidate import create_job
        from sleepmem.services import recover_jobs

        res = server.resources
        assert res is not None
        owner = "t=default/a=bot/u=ann/p=/s="
        queued = create_job(engine=res.engine, scope_key=owner, now=datetime.now(UTC))
        orphan = create_job(engine=res.engine, scope_key=owner, now=datetime.now(UTC))
        with Session(res.engine) as session:
            row = session.get(Job, orphan.id)
            assert row is not None
            row.status = "running"
            session.add(row)
            session.commit()
        sent: list[str] = []
        recover_jobs(res, sent.append)
        assert queued.id in sent and orphan.id not in sent
        failed = get_job(engine=res.engine, job_id=orphan.id)
        assert failed.status == "failed" and "--resume" in failed.error


def python_blocks(path: Path) -> list[str]:
    text = path.read_text()
    # The working-memory loop calls a planner and a model of the reader's own; it runs in
    # tests/api/test_readme_working.py, with stand-ins for them.
    text = re.sub(r"## Working memory\n.*?(?=\n## )", "", text, flags=re.S)
    return [block.split("```", 1)[0] for block in text.split("```python\n")[1:]]


class TestDocExamples:
    """The examples in docs/client.md and the README run as printed."""

    ROOT = Path(__file__).resolve().parents[2]

    @pytest.mark.parametrize("doc", ["docs/client.md", "README.md"])
    def test_every_python_example_runs_against_a_fresh_unconfigured_server(
        self, doc: str, server: Runtime, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        for name in ("SLEEPMEM_API_URL", "SLEEPMEM_API_KEY", "SLEEPMEM_TENANT"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("SLEEPMEM_DATA_DIR", str(server.settings.data_dir))
        blocks = python_blocks(self.ROOT / doc)
        assert blocks, f"{doc} has no python example"
        for block in blocks:
            exec(compile(block, doc, "exec"), {"__name__": "__doc_example__"})
        assert "Traceback" not in capsys.readouterr().err
