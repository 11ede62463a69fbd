"""One process per embedded index: outside `serve`, a distributed role that would open the
edge (or Qdrant local) index either owns it alone or refuses to start, saying what to set."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_config_checks import clean_env, runner

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
