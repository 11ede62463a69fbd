"""/metrics: a real embedded service counts what an ingest → drain → consolidate → search
run did, exposes it in the Prometheus format, and never puts content or ids in a label."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import orjson
from prometheus_client.parser import text_string_to_metric_families
from sqlmodel import Session
from support import stop, wait_for

from sleepmem.core.settings import Settings
from sleepmem.models import Scope, ScopeState
from sleepmem.runtime import Runtime

TENANT, AGENT, USER = "acme", "concierge", "user-4711"
OWNER = Scope(tenant=TENANT, agent=AGENT, user=USER).key
SECRETISH = "Bergstraße-17-Marzipan"
CONVERSATION = [
    {"kind": "message", "role": "user", "content": "Hi, I'm Ann and I live in Berlin."},
    {"kind": "message", "role": "user", "content": "I prefer an aisle seat on long flights."},
    {"kind": "message", "role": "user", "content": f"My street is {SECRETISH}."},
    {"kind": "session_end", "role": "system", "content": ""},
]


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = httpx.get(f"{url}/metrics", timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(response.text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def total(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str,
          **labels: str) -> float:
    return sum(
        v for (n, lab), v in samples.items()
        if n == name and all(dict(lab).get(k) == x for k, x in labels.items())
    )


def settings_in(data_dir: Path) -> Settings:
    return Settings(
        data_dir=data_dir, redis_url=None, database_url=None, qdrant_url=None, port=0,
        auth_enabled=False, embedder="hashing", tick_seconds=0.2, log_level="WARNING",
        _env_file=None,  # type: ignore[call-arg]
    )


class TestTheServiceCountsWhatARunDid:
    def test_a_scrape_after_ingest_drain_consolidate_search_finds_its_counts(
        self, tmp_path: Path
    ) -> None:
        with Runtime(settings_in(tmp_path / "data")) as rt:
            url = rt.api_url
            before = scrape(url)
            scope = {"tenant": TENANT, "agent": AGENT, "user": USER, "session": "s1"}
            events = [{**scope, **e} for e in CONVERSATION]
            assert httpx.post(f"{url}/v1/events", json=events, timeout=10).status_code == 202
            bad = httpx.post(f"{url}/v1/events", json={"kind": "message"}, timeout=10)
            assert bad.status_code == 422

            assert rt.resources is not None
            engine = rt.resources.engine

            def consolidated() -> bool:
                with Session(engine) as s:
                    state = s.get(ScopeState, OWNER)
                return state is not None and state.last_consolidated_at is not None

            assert wait_for(consolidated, timeout=60)
            found = httpx.post(
                f"{url}/v1/search",
                json={"query": "Where does Ann live?", "scope": scope, "k": 3},
                timeout=10,
            )
            assert found.status_code == 200
            after = scrape(url)
            text = httpx.get(f"{url}/metrics", timeout=10).text

        def delta(name: str, **labels: str) -> float:
            return total(after, name, **labels) - total(before, name, **labels)

        assert delta("sleepmem_events_accepted_total") == len(CONVERSATION)
        assert delta("sleepmem_events_rejected_total", reason="invalid") == 1
        assert delta("sleepmem_events_drained_total", outcome="inserted") == len(CONVERSATION)
        assert delta("sleepmem_consolidation_runs_total", outcome="ok") >= 1
        assert delta("sleepmem_consolidation_events_total") == len(CONVERSATION)
        assert delta("sleepmem_memory_ops_total", op="ADD") >= 1
        assert delta("sleepmem_consolidation_stage_seconds_count", stage="extract") >= 1
        assert delta("sleepmem_search_seconds_count") == 1
        # The shared-state gauges: everything drained, nothing left behind.
        assert total(after, "sleepmem_stream_lag") == 0
        assert total(after, "sleepmem_stream_pending") == 0
        assert total(after, "sleepmem_state_up", store="redis") == 1
        assert total(after, "sleepmem_state_up", store="sql") == 1
        assert ("sleepmem_index_backlog", ()) in after
        # Labels are fixed vocabularies: no tenant, user, scope or content in the output.
        for leaked in (TENANT, AGENT, USER, SECRETISH, "Berlin"):
            assert leaked not in text


class TestPreforkWorkersAreScrapedAsOne:
    def test_counts_from_several_processes_sum_in_one_scrape(self, tmp_path: Path) -> None:
        """PROMETHEUS_MULTIPROC_DIR: each process writes its own file, render() sums them."""
        shared = tmp_path / "prom"
        shared.mkdir()
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(shared),
               "PYTHONPATH": os.pathsep.join(sys.path)}
        count = textwrap.dedent("""
            from sleepmem.core.metrics import MEMORY_OPS
            MEMORY_OPS.labels(op="ADD").inc(3)
        """)
        for _ in range(2):
            subprocess.run([sys.executable, "-c", count], env=env, check=True, timeout=60)
        read = textwrap.dedent("""
            from sleepmem.core.metrics import render
            print(render().decode())
        """)
        out = subprocess.run(
            [sys.executable, "-c", read], env=env, check=True, timeout=60,
            capture_output=True, text=True,
        ).stdout
        families = {f.name: f for f in text_string_to_metric_families(out)}
        ops = families["sleepmem_memory_ops"]
        assert [s.value for s in ops.samples if s.labels.get("op") == "ADD"] == [6.0]


class TestTheWorkerMetricsPort:
    def test_a_prefork_worker_serves_what_its_children_counted(self, tmp_path: Path) -> None:
        import socket
        import uuid

        import redis as redis_lib
        from support import REDIS_URL

        from sleepmem.sdk import MemoryClient
        from sleepmem.tasks import names
        from sleepmem.workers.app import create_celery

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        namespace = f"smtest-{uuid.uuid4().hex[:10]}"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(sys.path),
            "SLEEPMEM_REDIS_URL": REDIS_URL,
            "SLEEPMEM_NAMESPACE": namespace,
            "SLEEPMEM_DATA_DIR": str(tmp_path / "data"),
            "SLEEPMEM_EMBEDDER": "hashing",
            "SLEEPMEM_HOST": "127.0.0.1",
            "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prom"),
            # A distributed role names its stores: SQLite and the embedded index on one host.
            "SLEEPMEM_DATABASE_URL": f"sqlite:///{tmp_path / 'data' / 'sleepmem.db'}",
            "SLEEPMEM_INDEX_BACKEND": "edge",
        }
        settings = Settings(redis_url=REDIS_URL, namespace=namespace, data_dir=tmp_path / "data",
                            embedder="hashing", _env_file=None)  # type: ignore[call-arg]
        log = (tmp_path / "worker.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-c", "from sleepmem.cli import main; main()", "worker",
             "--pool", "prefork", "--concurrency", "2", "--queues", "drain",
             "--metrics-port", str(port)],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )
        client = redis_lib.Redis.from_url(REDIS_URL)
        try:
            with MemoryClient(settings, client=client, tenant="acme", agent="bot",
                              user="ann", session="s1") as sdk:
                sdk.emit_many([{"kind": "message", "role": "user", "content": f"note {i}"}
                               for i in range(5)])
            celery = create_celery(settings, broker_url=REDIS_URL)
            celery.send_task(names.DRAIN)

            def drained() -> float:
                try:
                    body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
                except httpx.HTTPError:
                    return 0.0
                return sum(
                    s.value for f in text_string_to_metric_families(body) for s in f.samples
                    if s.name == "sleepmem_events_drained_total"
                    and s.labels.get("outcome") == "inserted"
                )

            # On failure, the worker's own account says whether the task ran at all.
            assert wait_for(lambda: drained() == 5, timeout=60, poll=0.5), (
                drained(), (tmp_path / "worker.log").read_text(encoding="utf-8")[-4000:])
        finally:
            stop(proc)
            log.close()
            lines = (tmp_path / "worker.log").read_text(encoding="utf-8").splitlines()
            # One JSON object per line; Celery prints its shutdown notice from the signal
            # handler straight to stdout, the one line no logging set-up reaches.
            for line in lines:
                if line.strip() and not line.startswith("worker: Warm shutdown"):
                    assert {"event", "level", "timestamp"} <= set(orjson.loads(line))
            for key in client.scan_iter(match=f"{namespace}:*", count=1000):
                client.delete(key)
            client.close()
