"""Distributed mode as shipped: docker-compose.yml, the Dockerfile, and the docs around them.

No Docker engine runs here, so the compose file is checked for what it promises: every
service, AOF, healthchecks, URLs from the environment that Settings accepts, and commands
the CLI really has.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from sleepmem.cli import app as cli_app
from sleepmem.core.settings import Settings
from sleepmem.tasks import names

ROOT = Path(__file__).resolve().parents[2]
APP_SERVICES = ("api", "worker", "scheduler")
ONE_SHOT = ("migrate",)  # jobs that run to completion; the roles wait for them to succeed


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]  # type: ignore[no-any-return]


def constraints() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version
    return pins


def cli_commands() -> set[str]:
    return {
        c.name or (c.callback.__name__ if c.callback else "") for c in cli_app.registered_commands
    }


class TestComposeServices:
    def test_it_runs_every_part_of_the_distributed_mode(self, compose: dict[str, Any]) -> None:
        assert set(services(compose)) >= {"redis", "postgres", "qdrant", *APP_SERVICES}

    def test_redis_keeps_accepted_events_across_restarts_with_aof(
        self, compose: dict[str, Any]
    ) -> None:
        command = " ".join(services(compose)["redis"]["command"])
        assert "--appendonly yes" in command

    def test_qdrant_is_the_real_server_image(self, compose: dict[str, Any]) -> None:
        assert services(compose)["qdrant"]["image"].startswith("qdrant/qdrant")

    def test_every_long_running_service_has_a_healthcheck(self, compose: dict[str, Any]) -> None:
        missing = [
            name for name, svc in services(compose).items()
            if name not in ONE_SHOT and "healthcheck" not in svc
        ]
        assert missing == []

    def test_app_services_wait_for_healthy_stores_and_the_migration(
        self, compose: dict[str, Any]
    ) -> None:
        for name in APP_SERVICES:
            depends = services(compose)[name]["depends_on"]
            assert {d: v["condition"] for d, v in depends.items()} == {
                "redis": "service_healthy",
                "postgres": "service_healthy",
                "qdrant": "service_healthy",
                "migrate": "service_completed_successfully",
            }, name


class TestTheMigrationJob:
    def test_runs_once_after_postgres_and_upgrades(self, compose: dict[str, Any]) -> None:
        migrate = services(compose)["migrate"]
        assert migrate["command"] == ["sleepmem", "migrate"]
        assert "migrate" in cli_commands()
        assert migrate["restart"] == "no"
        assert migrate["depends_on"] == {"postgres": {"condition": "service_healthy"}}
        assert migrate["environment"]["SLEEPMEM_AUTO_MIGRATE"] == "true"

    def test_the_roles_only_check_the_schema(self, compose: dict[str, Any]) -> None:
        for name in APP_SERVICES:
            assert services(compose)[name]["environment"]["SLEEPMEM_AUTO_MIGRATE"] == "false"


class TestTheImage:
    def test_installs_pinned_versions_of_every_runtime_dependency(self) -> None:
        dockerfile = (ROOT / "Dockerfile").read_text()
        assert re.search(r"^RUN pip install \. -c constraints\.txt ", dockerfile, re.M)
        assert re.search(r"^COPY pyproject.toml README.md .*constraints.txt ./$", dockerfile, re.M)
        pins = constraints()
        project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
        for requirement in project["dependencies"]:
            name = canonicalize_name(Requirement(requirement).name)
            assert name in pins, f"{name} is not pinned: run scripts/lock-deps"
            assert Requirement(requirement).specifier.contains(pins[name]), name

    def test_the_qdrant_client_speaks_to_the_server_image(self, compose: dict[str, Any]) -> None:
        # qdrant-client supports servers at most one minor version away.
        client = Version(constraints()["qdrant-client"])
        server = Version(services(compose)["qdrant"]["image"].split(":v", 1)[1])
        assert client.major == server.major and abs(client.minor - server.minor) <= 1

    def test_the_build_context_leaves_out_what_the_image_does_not_need(self) -> None:
        ignored = {
            line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
            if line.strip() and not line.startswith("#")
        }
        assert {".git", ".venv", "tests", ".env", "**/__pycache__"} <= ignored
        for needed in ("sleepmem", "models", "pipelines", "tasks", "workers", "schedules",
                       "pyproject.toml", "README.md", "constraints.txt"):
            assert needed not in ignored


class TestDockerComposeAcceptsTheFile:
    def test_docker_compose_config_is_valid(self) -> None:
        docker = shutil.which("docker")
        if docker is None:
            pytest.skip("no docker CLI: the YAML structure tests above stand in")
        probe = subprocess.run([docker, "compose", "version"], capture_output=True, timeout=30)
        if probe.returncode != 0:
            pytest.skip("the docker CLI has no compose plugin: the YAML structure tests stand in")
        done = subprocess.run(
            [docker, "compose", "-f", str(ROOT / "docker-compose.yml"), "config", "--quiet"],
            capture_output=True, text=True, timeout=60,
            env={**os.environ, "SLEEPMEM_API_KEYS": '{"acme": "change-me"}'},
        )
        assert done.returncode == 0, done.stderr


class TestComposeCommands:
    def test_each_role_runs_a_real_cli_command(self, compose: dict[str, Any]) -> None:
        for name in APP_SERVICES:
            command = services(compose)[name]["command"]
            assert command[0] == "sleepmem" and command[1] == name
            assert name in cli_commands()

    def test_the_worker_is_prefork_and_consumes_every_queue(self, compose: dict[str, Any]) -> None:
        command = services(compose)["worker"]["command"]
        assert command[command.index("--pool") + 1] == "prefork"
        assert tuple(command[command.index("--queues") + 1].split(",")) == names.QUEUES

    def test_there_is_a_standby_scheduler_behind_the_leader(self, compose: dict[str, Any]) -> None:
        assert services(compose)["scheduler"]["deploy"]["replicas"] == 2

    def test_the_image_installs_the_package_and_defaults_to_a_role(self) -> None:
        dockerfile = (ROOT / "Dockerfile").read_text()
        assert re.search(r"^RUN pip install \.", dockerfile, re.M)
        # pyproject.toml names LICENSE in license-files: the build needs it in the image.
        assert re.search(r"^COPY pyproject.toml README.md LICENSE ", dockerfile, re.M)
        for folder in ("sleepmem", "models", "pipelines", "tasks", "workers", "schedules"):
            assert f"COPY {folder} ./{folder}" in dockerfile
        assert 'CMD ["sleepmem", "api"]' in dockerfile


class TestComposeEnvironment:
    def test_every_variable_is_a_setting(self, compose: dict[str, Any]) -> None:
        fields = set(Settings.model_fields)
        for name in APP_SERVICES:
            for var in services(compose)[name]["environment"]:
                assert var.startswith("SLEEPMEM_"), var
                assert var.removeprefix("SLEEPMEM_").lower() in fields, var

    def test_the_environment_configures_distributed_mode(
        self, compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        env = dict(services(compose)["api"]["environment"])
        env["SLEEPMEM_API_KEYS"] = '{"acme": "change-me"}'  # what the operator passes in
        for var, value in env.items():
            monkeypatch.setenv(var, str(value))
        settings = Settings(_env_file=None)  # type: ignore[call-arg]
        assert not settings.embedded
        assert settings.sql_url.startswith("postgresql+psycopg://")
        assert settings.vector_backend == "qdrant"
        assert settings.auth_enabled and settings.host == "0.0.0.0"
        assert settings.api_keys["acme"].get_secret_value() == "change-me"

    def test_api_keys_must_be_given_to_start(self, compose: dict[str, Any]) -> None:
        value = services(compose)["api"]["environment"]["SLEEPMEM_API_KEYS"]
        assert value.startswith("${SLEEPMEM_API_KEYS:?")


class TestReadme:
    def test_the_quick_start_is_exactly_two_commands_that_exist(self) -> None:
        readme = (ROOT / "README.md").read_text()
        quick = readme.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
        commands = [line.split("#")[0].strip() for line in quick.strip().splitlines()]
        assert commands == ["scripts/demo", "scripts/test"]
        for command in commands:
            path = ROOT / command
            assert path.is_file() and path.stat().st_mode & 0o111, command

    def test_ci_runs_the_readme_test_command(self) -> None:
        ci = (ROOT / ".ci" / "run").read_text()
        assert "set -euo pipefail" in ci
        assert "exec scripts/test" in ci

    def test_every_setting_is_documented(self) -> None:
        operations = (ROOT / "docs" / "operations.md").read_text()
        undocumented = [
            f"SLEEPMEM_{name.upper()}"
            for name in Settings.model_fields
            if f"SLEEPMEM_{name.upper()}`" not in operations
        ]
        assert undocumented == []

    def test_the_readme_fits_on_a_few_screens(self) -> None:
        lines = (ROOT / "README.md").read_text().splitlines()
        assert len(lines) <= 300, len(lines)

    def test_every_relative_link_of_the_readme_and_docs_resolves(self) -> None:
        broken = []
        for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
            for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
                if re.match(r"[a-z]+:", target) or target.startswith("#"):
                    continue
                if not (doc.parent / target.split("#", 1)[0]).exists():
                    broken.append(f"{doc.relative_to(ROOT)}: {target}")
        assert broken == []
