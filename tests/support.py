"""Small helpers the integration tests share (fixtures live in conftest.py)."""

from __future__ import annotations

import importlib
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import Session

from sleepmem.adapters.embedders import HashingEmbedder
from sleepmem.core.settings import Settings
from sleepmem.models import Memory, Scope
from sleepmem.pipelines.memories import new_memory
from sleepmem.pipelines.ports import Embedder, VectorIndex
from sleepmem.pipelines.types import Candidate
from sleepmem.pipelines.write.index import upsert_memories

if TYPE_CHECKING:
    from mcp.client.stdio import StdioServerParameters

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[1]
_EVENT_IDS = itertools.count()

# The Redis server the tests use; each test has its own key namespace on it.
REDIS_URL = os.environ.get("SLEEPMEM_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
# The PostgreSQL server the tests use; each test run makes its own database on it.
PG_SERVER = os.environ.get("SLEEPMEM_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432")


IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def require_extra(module: str, extra: str) -> ModuleType:
    """``module`` from the optional ``extra``; when it is not installed, the calling test
    (or, at module level, the whole file) is skipped with a reason naming the extra.

    In CI a missing extra is an error instead: scripts/bootstrap installs every extra the
    tests exercise, so a skip there could only hide a broken install and shrink the run.
    """
    if IN_CI:
        return importlib.import_module(module)
    return pytest.importorskip(
        module, reason=f"needs the [{extra}] extra: pip install -e '.[{extra}]'"
    )


def mcp_over_stdio(data_dir: Path) -> StdioServerParameters:
    """``sleepmem mcp`` as a child process on the runtime's data directory, with none of
    this process's SLEEPMEM_ settings."""
    # Imported here, not at the top: every test imports this module, and only the MCP
    # tests need the [mcp] extra.
    from mcp.client.stdio import StdioServerParameters

    env = {k: v for k, v in os.environ.items() if not k.startswith("SLEEPMEM_")}
    env.update({"SLEEPMEM_DATA_DIR": str(data_dir), "SLEEPMEM_LOG_LEVEL": "WARNING",
                "PYTHONPATH": str(ROOT)})
    return StdioServerParameters(
        command=sys.executable, args=["-c", "from sleepmem.cli import main; main()", "mcp"],
        env=env)


def stop(proc: subprocess.Popen[Any], sig: int = signal.SIGTERM) -> None:
    """Ask a child process to end with ``sig``; kill it if it has not within 30 s."""
    proc.send_signal(sig)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_for(predicate: Callable[[], bool], timeout: float = 15.0, poll: float = 0.02) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` seconds pass; its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(poll)
    return predicate()


def all_at_once(
    n: int, work: Callable[[], T], timeout: float = 60.0
) -> tuple[list[T], list[BaseException]]:
    """Run ``work`` in ``n`` threads released together; what they returned and raised."""
    start = threading.Barrier(n)
    results: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        start.wait()
        try:
            results.append(work())
        except BaseException as exc:  # reported to the caller, who asserts on it
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    return results, errors


def blas_threads() -> int:
    """BLAS threads for a USE embedder a test builds: this process's share of the cores.

    The embedder's default is one thread per available core, right for a process that has
    the machine to itself. Under pytest-xdist every worker would take every core, and
    OpenBLAS threads that spin for a core another worker holds make a batch of stories run
    about three times slower on two cores (two workers, 30 stories each: 60 s at two
    threads, 17 s at one). The vectors are the same; only the thread count differs."""
    from sleepmem.adapters.embedders import available_cores

    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or "1")
    return max(1, available_cores() // max(1, workers))


def wants_real_index(request: pytest.FixtureRequest) -> bool:
    """A test marked ``real_index``, or every test under ``--real-index``: the fixtures that
    hand out a vector index give it the embedded engine instead of the in-memory one."""
    return (request.node.get_closest_marker("real_index") is not None
            or bool(request.config.getoption("--real-index")))


@contextmanager
def scratch_pg_database(prefix: str) -> Iterator[str]:
    """A database of our own on PG_SERVER, dropped afterwards with its connections."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(f"{PG_SERVER}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield f"{PG_SERVER}/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(
                sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :n"
                ),
                {"n": name},
            )
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
        admin.dispose()


def store_memory(
    engine: Engine,
    index: VectorIndex,
    scope: Scope,
    statement: str,
    *,
    at: datetime,
    provenance: list[str] | None = None,
    type: str = "event",
    now: datetime | None = None,
    ttl: timedelta | None = None,
    embedder: Embedder | None = None,
    **fields: Any,
) -> Memory:
    """One memory as consolidation would write it (valid from ``at``, embedded by
    ``embedder``, the hashing one by default), committed and indexed; ``fields`` then
    override columns (importance, …)."""
    cand = Candidate(type=type, statement=statement,
                     provenance=provenance or [f"ev{next(_EVENT_IDS)}"], valid_from=at,
                     scope=scope)
    mem = new_memory(cand, scope_key=scope.owner.key, now=now or at, ttl=ttl, extractor="test")
    for key, value in fields.items():
        setattr(mem, key, value)
    with Session(engine) as s:
        s.add(mem)
        s.commit()
        s.refresh(mem)
    upsert_memories([mem], index=index, embedder=embedder or HashingEmbedder())
    return mem


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` on a loopback port in a background thread, for what cannot run here (a
    hosted model or embedding API); yields its ``/v1`` base URL and stops it afterwards.
    Request threads are daemons, so a handler a client gave up on never holds the test."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def embedded_server(tmp: Path, **over: Any) -> Iterator[Any]:
    """A started ``Runtime`` (API on a loopback port, worker, drain, scheduler) over the
    machine's Redis in a namespace of its own, SQLite in ``tmp``; its keys go afterwards."""
    import redis as redis_lib

    from sleepmem.core.settings import Settings
    from sleepmem.runtime import Runtime

    namespace = f"smtest-{uuid.uuid4().hex[:10]}"
    values: dict[str, Any] = dict(
        data_dir=tmp / "data", redis_url=REDIS_URL, database_url=f"sqlite:///{tmp / 'db.sqlite'}",
        namespace=namespace, embedder="hashing", host="127.0.0.1", port=0,
        log_level="WARNING", _env_file=None,
    )
    runtime = Runtime(Settings(**(values | over))).start()
    try:
        yield runtime
    finally:
        runtime.stop()
        client = redis_lib.Redis.from_url(REDIS_URL)
        for key in client.scan_iter(match=f"{namespace}:*", count=1000):
            client.delete(key)
        client.close()


def embedded_settings(data_dir: Path) -> Settings:
    """Embedded mode in ``data_dir``: no external store, the hashing embedder, a fast tick."""
    return Settings(
        data_dir=data_dir,
        redis_url=None,
        database_url=None,
        qdrant_url=None,
        port=0,
        auth_enabled=False,
        embedder="hashing",
        tick_seconds=0.2,
        log_level="WARNING",
        _env_file=None,  # type: ignore[call-arg]
    )
