"""One process per embedded index: outside `serve`, a distributed role that would open the
edge (or Qdrant local) index either owns it alone or refuses to start, saying what to set."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest
import redis as redis_lib
from support import REDIS_URL, stop, wait_for
from test_config_checks import clean_env, runner
from test_logs import free_port

from sleepmem.cli import app
from sleepmem.core.errors import ConfigurationError
from sleepmem.core.indexowner import own_index, refuse_worker
from sleepmem.core.settings import Settings
from sleepmem.tasks import names


def _edge_env(monkeypatch: pytest.MonkeyPatch, data_dir: Path, backend: str = "edge") -> None:
    clean_env(monkeypatch)
    monkeypatch.setenv("SLEEPMEM_REDIS_URL", "redis://127.0.0.1:6379/0")
    monkeypatch.setenv("SLEEPMEM_DATABASE_URL", f"sqlite:///{data_dir / 'x.db'}")
    monkeypatch.setenv("SLEEPMEM_DATA_DIR", str(data_dir))
    monkeypatch.setenv("SLEEPMEM_INDEX_BACKEND", backend)


def _settings(data_dir: Path, backend: str | None = "edge", qdrant: str | None = None) -> Settings:
    return Settings(redis_url="redis://h", database_url="sqlite:///x.db",
                    data_dir=data_dir, index_backend=backend, qdrant_url=qdrant, _env_file=None)


class TestAWorkerOnTheEmbeddedIndex:
    @pytest.mark.parametrize("backend", ["edge", "qdrant-local"])
    def test_it_refuses_to_start_in_one_line_naming_the_qdrant_url(
        self, backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        _edge_env(monkeypatch, tmp_path, backend)
        result = runner.invoke(app, ["worker", "--concurrency", "2"])
        assert result.exit_code == 2
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: `sleepmem worker`")
        assert "SLEEPMEM_QDRANT_URL" in lines[0] and backend in lines[0]

    def test_a_drain_only_worker_never_opens_the_index_and_is_allowed(
        self, tmp_path: Path
    ) -> None:
        drain_only = names.INDEX_QUEUES.intersection([names.QUEUE_DRAIN])
        refuse_worker(_settings(tmp_path), drain_only)  # no error
        with pytest.raises(ConfigurationError, match="consolidate"):
            refuse_worker(_settings(tmp_path), names.INDEX_QUEUES)

    def test_a_qdrant_server_lets_any_number_of_workers_start(self, tmp_path: Path) -> None:
        server = _settings(tmp_path, backend=None, qdrant="http://qdrant:6333")
        refuse_worker(server, names.INDEX_QUEUES)
        assert own_index(server, "api") is None


class TestTheApiOwnsTheEmbeddedIndex:
    def test_a_second_api_on_the_same_index_refuses_to_start(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        first = own_index(_settings(tmp_path), "api")
        assert first is not None
        try:
            _edge_env(monkeypatch, tmp_path)
            result = runner.invoke(app, ["api"])
        finally:
            first.release()
        assert result.exit_code == 2
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "already owns the embedded edge index" in lines[0]
        assert "SLEEPMEM_QDRANT_URL" in lines[0]

    def test_the_index_is_free_again_once_its_owner_releases_it(self, tmp_path: Path) -> None:
        first = own_index(_settings(tmp_path), "api")
        assert first is not None
        first.release()
        second = own_index(_settings(tmp_path), "api")
        assert second is not None
        second.release()


def _process_env(data_dir: Path, backend: str = "edge", port: int = 0) -> dict[str, str]:
    """The environment of a distributed role on one host: Redis, SQLite and the embedded
    index named explicitly, as the issue's probe ran it."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SLEEPMEM_") or k.startswith("SLEEPMEM_TEST_")}
    env.update({
        "PYTHONPATH": os.pathsep.join(sys.path),
        "SLEEPMEM_REDIS_URL": REDIS_URL,
        "SLEEPMEM_NAMESPACE": f"smtest-{uuid.uuid4().hex[:10]}",
        "SLEEPMEM_DATABASE_URL": f"sqlite:///{data_dir / 'sleepmem.db'}",
        "SLEEPMEM_DATA_DIR": str(data_dir),
        "SLEEPMEM_INDEX_BACKEND": backend,
        "SLEEPMEM_EMBEDDER": "hashing",
        "SLEEPMEM_AUTH_ENABLED": "false",
        "SLEEPMEM_HOST": "127.0.0.1",
        "SLEEPMEM_PORT": str(port),
    })
    return env


def _sleepmem(*args: str) -> list[str]:
    return [sys.executable, "-c", "from sleepmem.cli import main; main()", *args]


def _refused_in_one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "SLEEPMEM_QDRANT_URL" in lines[0]
    return lines[0]


class TestTheRealCommands:
    """The commands as an operator starts them, each its own process."""

    @pytest.mark.parametrize("backend", ["edge", "qdrant-local"])
    def test_a_worker_with_concurrency_2_exits_2_before_opening_the_index(
        self, backend: str, tmp_path: Path
    ) -> None:
        data = tmp_path / "data"
        result = subprocess.run(_sleepmem("worker", "--concurrency", "2"),
                                env=_process_env(data, backend), capture_output=True,
                                text=True, timeout=120)
        line = _refused_in_one_line(result)
        assert line.startswith("error: `sleepmem worker`") and backend in line
        # Refused before any pool process started or the index was created.
        assert not (data / "index").exists() and not (data / "qdrant").exists()

    def test_while_an_api_owns_the_index_it_answers_searches_and_other_roles_are_refused(
        self, tmp_path: Path
    ) -> None:
        data = tmp_path / "data"
        port = free_port()
        log = (tmp_path / "api.log").open("wb")
        env = _process_env(data, port=port)
        api = subprocess.Popen(_sleepmem("api"), env=env, stdout=log, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        scope = {"tenant": "acme", "agent": "bot", "user": "ann"}
        try:
            def searched() -> int:
                try:
                    return httpx.post(f"{base}/v1/search", timeout=10,
                                      json={"query": "tea", "scope": scope}).status_code
                except httpx.HTTPError:
                    return 0

            assert wait_for(lambda: searched() == 200, timeout=120, poll=0.5), (
                (tmp_path / "api.log").read_text(encoding="utf-8")[-4000:])
            # The index really is open in the api: a search reads it.
            assert (data / "index").exists()

            worker = subprocess.run(_sleepmem("worker", "--concurrency", "2"),
                                    env=_process_env(data), capture_output=True, text=True,
                                    timeout=120)
            assert "only one process may open" in _refused_in_one_line(worker)

            second = subprocess.run(_sleepmem("api"), env=_process_env(data, port=free_port()),
                                    capture_output=True, text=True, timeout=120)
            assert "already owns the embedded edge index" in _refused_in_one_line(second)

            # The refusals touched nothing: the owner still answers.
            assert searched() == 200
            assert api.poll() is None
        finally:
            stop(api)
            log.close()
            client = redis_lib.Redis.from_url(REDIS_URL)
            for key in client.scan_iter(match=f"{env['SLEEPMEM_NAMESPACE']}:*", count=1000):
                client.delete(key)
            client.close()
