"""Fixtures that start real services and clean up only what they made.

- Redis: the machine's server (SLEEPMEM_TEST_REDIS_URL, default redis://127.0.0.1:6379/0),
  with a namespace unique to the test, whose keys alone are deleted afterwards.
- SQL: a fresh SQLite file per test, and for PostgreSQL a database created for this
  test run (SLEEPMEM_TEST_PG_URL names the server) and dropped at the end. Both start
  migrated to head, as the PostgreSQL one always did: the SQLite file is a copy of one
  that ``make_engine`` migrated once per process (80 ms a test saved, some 500 tests).
  Migrating an empty database is tests/runtime/test_migrations.py's, on a file of its own.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis as redis_lib
from sqlalchemy.engine import Engine
from support import REDIS_URL, scratch_pg_database, wants_real_index

from sleepmem.adapters.embedders import HashingEmbedder
from sleepmem.adapters.sql import make_engine
from sleepmem.adapters.vectors.edge import EdgeIndex
from sleepmem.adapters.vectors.memory import MemoryIndex
from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.pipelines.ports import VectorIndex
from sleepmem.resources import Resources


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-llm", action="store_true", help="run tests against the real local LLM")
    parser.addoption(
        "--real-index", action="store_true",
        help="give every test's `index` fixture the embedded engine, not the in-memory index",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The files holding a test marked slow run first: in a parallel run (scripts/test hands
    # whole files to each worker) a two-minute suite that started last would finish alone.
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)
    if config.getoption("--run-llm") or os.environ.get("SLEEPMEM_TEST_LLM_URL"):
        return
    skip = pytest.mark.skip(reason="opt-in: pass --run-llm or set SLEEPMEM_TEST_LLM_URL")
    for item in items:
        if "llm" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def namespace() -> str:
    return f"smtest-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def keys(namespace: str) -> Keys:
    return Keys(namespace)


@pytest.fixture
def redis(namespace: str) -> Iterator[redis_lib.Redis]:
    client = redis_lib.Redis.from_url(REDIS_URL)
    client.ping()
    yield client
    for key in client.scan_iter(match=f"{namespace}:*", count=1000):
        client.delete(key)
    client.close()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file that ``make_engine`` built and migrated to head, closed (so its
    write-ahead log is folded in), for each test's own copy."""
    path = tmp_path_factory.mktemp("sqlite-template") / "sleepmem.db"
    make_engine(f"sqlite:///{path}").dispose()
    return path


def sqlite_copy(template: Path, tmp_path: Path) -> str:
    """The URL of the test's own copy of the migrated template, at tmp_path/sleepmem.db."""
    target = tmp_path / "sleepmem.db"
    for suffix in ("", "-wal", "-shm"):
        source = template.with_name(template.name + suffix)
        if source.exists():
            shutil.copyfile(source, target.with_name(target.name + suffix))
    return f"sqlite:///{target}"


@pytest.fixture
def sqlite_url(sqlite_template: Path, tmp_path: Path) -> str:
    return sqlite_copy(sqlite_template, tmp_path)


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A database of our own on the machine's PostgreSQL, dropped after the run."""
    with scratch_pg_database("sleepmem_test") as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Runs the test once on SQLite and once on PostgreSQL."""
    if request.param == "sqlite":
        return sqlite_copy(request.getfixturevalue("sqlite_template"), tmp_path)
    return str(request.getfixturevalue("pg_database"))


@pytest.fixture
def engine(sql_url: str) -> Iterator[Engine]:
    eng = make_engine(sql_url)
    yield eng
    if not sql_url.startswith("sqlite"):
        # Shared per-run PostgreSQL database: empty the tables this test filled.
        from sqlmodel import SQLModel

        with eng.begin() as conn:
            for table in reversed(SQLModel.metadata.sorted_tables):
                conn.execute(table.delete())
    eng.dispose()


@pytest.fixture
def settings(tmp_path: Path, namespace: str, sqlite_url: str) -> Settings:
    """Settings for a test: machine Redis, own namespace, SQLite in tmp, embedded index."""
    return Settings(
        data_dir=tmp_path / "data",
        redis_url=REDIS_URL,
        database_url=sqlite_url,
        namespace=namespace,
        embedder="hashing",
        auth_enabled=False,
        _env_file=None,  # type: ignore[call-arg]
    )


@pytest.fixture
def resources(
    request: pytest.FixtureRequest, settings: Settings, redis: redis_lib.Redis
) -> Iterator[Resources]:
    """The process resources a worker would build, installed as the current ones;
    ``redis`` cleans the namespace afterwards.

    Their vector index is the in-memory one, as for the ``index`` fixture, unless the test
    wants the real one: a test whose worker processes, server or second ``Resources`` open
    the index at ``settings.data_dir`` must be marked ``real_index`` to share it."""
    from sleepmem.resources import build_resources
    from sleepmem.tasks.context import install_resources, uninstall_resources

    res = build_resources(settings)
    if not wants_real_index(request):
        memory = MemoryIndex()
        memory.ensure(dim=res.embedder.dim)
        res._index = memory
    install_resources(res)
    yield res
    uninstall_resources()
    res.close()


@pytest.fixture
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorIndex]:
    """A vector index of the test's own, sized for the hashing embedder
    (``support.store_memory`` fills it).

    The in-memory index, which passes the same contract suite as the engines
    (tests/runtime/test_vector_index_contract.py) and opens in no time, where an embedded shard
    takes 0.2-1.5 s per test. A test marked ``real_index`` gets the embedded engine on
    disk, and so does every test under ``--real-index``.
    """
    idx: VectorIndex = EdgeIndex(tmp_path / "index") if wants_real_index(request) else MemoryIndex()
    idx.ensure(dim=HashingEmbedder().dim)
    yield idx
    idx.close()
