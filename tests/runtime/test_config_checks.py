"""Configuration is checked when a process starts: typos, partial maps, missing stores and
bad URLs are one clear line, never silence and never a traceback."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from sleepmem.cli import app
from sleepmem.core.errors import ConfigurationError
from sleepmem.core.settings import DAY, DEFAULT_TTL_S, Settings, check_environment

runner = CliRunner()


def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("SLEEPMEM_") and not name.startswith("SLEEPMEM_TEST_"):
            monkeypatch.delenv(name)


class TestUnknownNames:
    @pytest.mark.parametrize(("typo", "meant"), [
        ("SLEEPMEM_REDIS_URI", "SLEEPMEM_REDIS_URL"),
        ("SLEEPMEM_IDLE_SECOND", "SLEEPMEM_IDLE_SECONDS"),
        ("SLEEPMEM_TTL", "SLEEPMEM_TTL_S"),
    ])
    def test_a_typo_is_an_error_that_names_the_nearest_setting(self, typo: str, meant: str) -> None:
        with pytest.raises(ConfigurationError, match=f"unknown setting {typo}") as err:
            check_environment({typo: "x"})
        assert f"did you mean {meant}" in str(err.value)

    def test_settings_client_names_nested_keys_and_test_harness_names_are_accepted(self) -> None:
        check_environment({
            "SLEEPMEM_REDIS_URL": "redis://h", "SLEEPMEM_API_KEY": "k", "SLEEPMEM_TENANT": "t",
            "SLEEPMEM_TTL_S__TASK": "60", "SLEEPMEM_TEST_REDIS_URL": "redis://h",
            "OTHER_THING": "ignored",
        })

    def test_the_cli_refuses_to_start_with_one_line(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        clean_env(monkeypatch)
        monkeypatch.setenv("SLEEPMEM_DATABSE_URL", "sqlite:///x.db")
        result = runner.invoke(app, ["serve"])
        assert result.exit_code == 2
        lines = result.output.strip().splitlines()
        assert lines == [lines[0]] and lines[0].startswith("error: unknown setting")
        assert "SLEEPMEM_DATABASE_URL" in lines[0]


class TestPartialMaps:
    def test_one_type_in_ttl_s_changes_that_type_and_keeps_the_others(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        clean_env(monkeypatch)
        monkeypatch.setenv("SLEEPMEM_TTL_S", '{"task": 3600}')
        s = Settings(_env_file=None)  # type: ignore[call-arg]
        assert s.ttl_s["task"] == 3600
        assert s.ttl_s["preference"] == DEFAULT_TTL_S["preference"] == 90 * DAY
        assert s.ttl("fact") is not None

    def test_the_nested_form_merges_too(self, monkeypatch: pytest.MonkeyPatch) -> None:
        clean_env(monkeypatch)
        monkeypatch.setenv("SLEEPMEM_HALF_LIFE_S__TASK", "60")
        s = Settings(_env_file=None)  # type: ignore[call-arg]
        assert s.half_life_s["task"] == 60 and s.half_life_s["fact"] == 90 * DAY

    def test_an_unknown_type_is_refused_with_the_nearest_one(self) -> None:
        with pytest.raises(Exception, match="did you mean 'preference'"):
            Settings(ttl_s={"preferences": 10}, _env_file=None)  # type: ignore[call-arg]


class TestDistributedRoles:
    @pytest.mark.parametrize("role", ["api", "worker"])
    def test_without_qdrant_the_role_refuses_to_start(
        self, role: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        clean_env(monkeypatch)
        monkeypatch.setenv("SLEEPMEM_REDIS_URL", "redis://127.0.0.1:6379/0")
        monkeypatch.setenv("SLEEPMEM_DATABASE_URL", "sqlite:///x.db")
        result = runner.invoke(app, [role])
        assert result.exit_code == 2
        assert result.output.strip().splitlines() == [
            f"error: `sleepmem {role}` is a distributed role and needs the shared store: "
            "set SLEEPMEM_QDRANT_URL (or run `sleepmem serve` for everything in one process)"
        ]

    def test_an_explicit_local_index_backend_is_the_operators_choice(self) -> None:
        Settings(redis_url="redis://h", database_url="sqlite:///x.db",  # type: ignore[call-arg]
                 index_backend="edge", _env_file=None).require_stores("api")

    def test_the_scheduler_needs_redis_and_sql(self) -> None:
        with pytest.raises(ConfigurationError, match="SLEEPMEM_REDIS_URL, SLEEPMEM_DATABASE_URL"):
            Settings(_env_file=None).require_stores("scheduler")  # type: ignore[call-arg]


class TestBadUrls:
    @pytest.mark.parametrize(("name", "value", "says"), [
        ("SLEEPMEM_REDIS_URL", "localhost:6379", "redis:// or rediss:// or unix://"),
        ("SLEEPMEM_QDRANT_URL", "qdrant:6333", "http:// or https://"),
        ("SLEEPMEM_DATABASE_URL", "postgres is here", "not a SQLAlchemy URL"),
    ])
    def test_a_bad_url_is_one_line_naming_the_variable(
        self, name: str, value: str, says: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        clean_env(monkeypatch)
        monkeypatch.setenv(name, value)
        result = runner.invoke(app, ["serve"])
        assert result.exit_code == 2
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {name}: ")
        assert says in lines[0] and "Traceback" not in result.output
