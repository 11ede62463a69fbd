"""The CLI turns the error hierarchy into exit codes from one table, the mirror of the HTTP
API's status table: bad input 2, not found 3, refused credentials 4, try again later 75."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from support import REDIS_URL
from typer.testing import CliRunner

from sleepmem.api.app import _STATUS
from sleepmem.cli import app
from sleepmem.cli.app import EXIT_CODES, exit_code
from sleepmem.core.errors import (
    ConfigurationError,
    LeaseHeldError,
    NotFoundError,
    SleepmemError,
    TransientError,
    ValidationError,
)


@pytest.fixture(autouse=True)
def logging_as_it_was() -> Iterator[None]:
    """A command configures logging onto CliRunner's stderr, closed once it returns: put
    back what the other tests log to."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


@pytest.fixture
def env(tmp_path: Path, namespace: str) -> dict[str, str]:
    return {
        "SLEEPMEM_DATA_DIR": str(tmp_path / "data"),
        "SLEEPMEM_REDIS_URL": REDIS_URL,
        "SLEEPMEM_DATABASE_URL": f"sqlite:///{tmp_path / 'sleepmem.db'}",
        "SLEEPMEM_NAMESPACE": namespace,
        "SLEEPMEM_EMBEDDER": "hashing",
    }


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class TestTheTable:
    def test_names_an_exit_code_for_every_error_the_api_gives_a_status(self) -> None:
        assert {kind for kind, _ in _STATUS} <= {kind for kind, _ in EXIT_CODES}

    def test_subclasses_take_their_parents_code_and_the_rest_exit_1(self) -> None:
        assert exit_code(LeaseHeldError("busy")) == exit_code(TransientError("x")) == 75
        assert exit_code(ValidationError("scope", "bad")) == 2
        assert exit_code(NotFoundError("gone")) == 3
        assert exit_code(ConfigurationError("no database")) == 1
        assert exit_code(SleepmemError("anything else")) == 1


class TestCommandsExitByTheTable:
    def test_a_malformed_scope_key_is_bad_input(self, env: dict[str, str]) -> None:
        result = CliRunner().invoke(app, ["consolidate", "--scope", "not a key"], env=env)
        assert result.exit_code == 2, result.output
        assert "error: " in result.output

    def test_an_unknown_memory_is_not_found(self, env: dict[str, str]) -> None:
        result = CliRunner().invoke(app, ["explain", "no-such-memory"], env=env)
        assert result.exit_code == 3, result.output

    def test_an_unreachable_api_is_a_try_again_later(self, env: dict[str, str]) -> None:
        result = CliRunner().invoke(
            app, ["search", "where do I live", "--tenant", "acme", "--user", "ann",
                  "--api-url", closed_port_url()], env=env,
        )
        assert result.exit_code == 75, result.output
        assert "unreachable" in result.output


class TestPythonDashM:
    def test_python_dash_m_sleepmem_is_the_same_command_line(self) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "sleepmem", "search", "--help"],
            capture_output=True, text=True, timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert "Usage: python -m sleepmem search" in done.stdout

    def test_an_unknown_command_exits_2_as_it_does_for_sleepmem(self) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "sleepmem", "no-such-command"],
            capture_output=True, text=True, timeout=60,
        )
        assert done.returncode == 2
