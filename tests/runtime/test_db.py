"""Opening the SQL store: a database that cannot be used is named, with the fix."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from support import PG_SERVER

from sleepmem.adapters.sql import make_engine
from sleepmem.core.errors import ConfigurationError, TransientError


def _server_with_password() -> str:
    scheme, _, rest = PG_SERVER.partition("://")
    user, _, host = rest.rpartition("@")
    return f"{scheme}://{user or 'postgres'}:hunter2-secret@{host}"


class TestAMissingDatabase:
    def test_is_a_configuration_error_that_says_how_to_create_it(self) -> None:
        name = f"sleepmem_missing_{uuid.uuid4().hex[:8]}"
        with pytest.raises(ConfigurationError) as caught:
            make_engine(f"{_server_with_password()}/{name}")
        message = str(caught.value)
        assert f'database "{name}" does not exist' in message
        assert f"createdb {name}" in message

    def test_never_shows_the_password(self) -> None:
        with pytest.raises(ConfigurationError) as caught:
            make_engine(f"{_server_with_password()}/sleepmem_missing_{uuid.uuid4().hex[:8]}")
        assert "hunter2-secret" not in str(caught.value)
        assert ":***@" in str(caught.value)


class TestAnUnreachableServer:
    def test_is_a_transient_error_naming_the_server(self) -> None:
        with pytest.raises(TransientError) as caught:
            make_engine("postgresql+psycopg://postgres@127.0.0.1:1/sleepmem")
        assert "cannot reach the database at postgresql+psycopg://postgres@127.0.0.1:1" in str(
            caught.value
        )


class TestTheCommandLine:
    def test_prints_a_sleepmem_error_as_one_line_and_exits_75_to_try_again_later(
        self, tmp_path: Path
    ) -> None:
        env = {
            **os.environ,
            "SLEEPMEM_DATA_DIR": str(tmp_path),
            "SLEEPMEM_DATABASE_URL": "postgresql+psycopg://postgres@127.0.0.1:1/x",
        }
        done = subprocess.run(
            [sys.executable, "-c", "from sleepmem.cli import main; main()", "sweep"],
            env=env, capture_output=True, text=True, timeout=120,
        )
        # Unreachable is transient (the CLI's table: TransientError → 75, EX_TEMPFAIL).
        assert done.returncode == 75
        assert done.stderr.startswith("error: cannot reach the database at postgresql")
        assert "Traceback" not in done.stderr
