"""The CLI turns the error hierarchy into exit codes from one table, the mirror of the HTTP
API's status table: bad input 2, not found 3, refused credentials 4, try again later 75."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


class HealthyServer(ThreadingHTTPServer):
    """A real HTTP server that answers every GET with 200 and counts the requests."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests.append(self.path)
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])


@pytest.fixture
def other_server() -> Iterator[HealthyServer]:
    server = HealthyServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


SCOPE = "t=acme/a=bot/u=ann/p=/s="
# Every command that acts on a store: each one must stop at a configured API that is down.
STORE_COMMANDS = [
    ["forget", "--scope", SCOPE, "--yes"],
    ["forget", "--memory", "m1", "--yes"],
    ["sweep"],
    ["refresh"],
    ["jobs"],
    ["explain", "m1"],
    ["reconsolidate", "--scope", SCOPE],
    ["consolidate", "--scope", SCOPE],
    ["emit", "hello", "--tenant", "acme", "--user", "ann"],
]


class TestAConfiguredApiThatDoesNotAnswer:
    @pytest.mark.parametrize("command", STORE_COMMANDS, ids=lambda c: " ".join(c[:2]))
    def test_stops_the_command_with_75_naming_the_url_and_touches_no_other_store(
        self, command: list[str], env: dict[str, str], tmp_path: Path,
        other_server: HealthyServer,
    ) -> None:
        dead = closed_port_url()
        # The server on the configured host and port answers: the old fallback target.
        result = CliRunner().invoke(app, command, env={
            **env, "SLEEPMEM_API_URL": dead, "SLEEPMEM_HOST": "127.0.0.1",
            "SLEEPMEM_PORT": str(other_server.port)})
        assert result.exit_code == 75, result.output
        assert dead in result.output and "SLEEPMEM_API_URL" in result.output
        assert other_server.requests == []
        assert not (tmp_path / "data").exists()
        assert not (tmp_path / "sleepmem.db").exists()


class TestNoStoreAtAll:
    @pytest.fixture
    def bare_env(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str | None]:
        """No server, no configured database, the default data directory in an empty cwd."""
        monkeypatch.chdir(tmp_path)
        return {"SLEEPMEM_DATA_DIR": None, "SLEEPMEM_DATABASE_URL": None,
                "SLEEPMEM_API_URL": None, "SLEEPMEM_REDIS_URL": REDIS_URL,
                "SLEEPMEM_HOST": "127.0.0.1", "SLEEPMEM_PORT": closed_port_url().rsplit(":")[-1]}

    @pytest.mark.parametrize("command", [c for c in STORE_COMMANDS if c[0] != "emit"],
                             ids=lambda c: " ".join(c[:2]))
    def test_a_command_says_there_is_none_and_creates_nothing(
        self, command: list[str], bare_env: dict[str, str | None], tmp_path: Path
    ) -> None:
        result = CliRunner().invoke(app, command, env=bare_env)
        assert result.exit_code == 3, result.output
        assert "no sleepmem store" in result.output
        assert list(tmp_path.iterdir()) == []


class TestDestructiveCommandsCheckBeforeTheyAsk:
    @pytest.mark.parametrize("args", [["--scope", "garbage"], ["--scope", "u=ann/t=acme"],
                                      ["--memory", " "]])
    def test_a_bad_argument_is_refused_before_the_confirmation(
        self, args: list[str], env: dict[str, str], tmp_path: Path
    ) -> None:
        result = CliRunner().invoke(app, ["forget", *args], env=env, input="y\n")
        assert result.exit_code == 2, result.output
        assert "Erase" not in result.output
        assert not (tmp_path / "data").exists()

    def test_reconsolidate_refuses_a_bad_scope_before_opening_a_store(
        self, env: dict[str, str], tmp_path: Path
    ) -> None:
        result = CliRunner().invoke(app, ["reconsolidate", "--scope", "garbage"], env=env)
        assert result.exit_code == 2, result.output
        assert not (tmp_path / "data").exists()

    @pytest.mark.parametrize("since", ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00"])
    def test_reconsolidate_refuses_a_since_utc_cannot_hold_as_the_api_does(
        self, since: str, env: dict[str, str]
    ) -> None:
        result = CliRunner().invoke(app, ["reconsolidate", "--scope", "t=acme/a=bot/u=ann/p=/s=",
                                          "--since", since], env=env)
        assert result.exit_code == 2, result.output
        assert "since: is outside the supported range" in result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)


class TestABadSettingIsOneLine:
    def test_malformed_json_in_a_setting_names_the_variable_in_one_line(
        self, tmp_path: Path
    ) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "sleepmem", "sweep"],
            env={**os.environ, "SLEEPMEM_API_KEYS": "{not json",
                 "SLEEPMEM_DATA_DIR": str(tmp_path / "data")},
            capture_output=True, text=True, timeout=120,
        )
        assert done.returncode == 2
        assert done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith("error: SLEEPMEM_API_KEYS: ")
        assert not (tmp_path / "data").exists()


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
