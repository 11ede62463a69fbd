"""Every ``sleepmem bench …`` and ``sleepmem eval …`` command runs, at a tiny size, and
exits 0: none can crash unseen. The commands are read from the typer app, so a new one
fails the coverage test until it has a line in SMALL."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import structlog
import typer
from typer.main import get_command
from typer.testing import CliRunner

from sleepmem.cli import app

STORIES = Path(__file__).parent.parent / "stories"

LOCOMO = [{
    "sample_id": "smoke",
    "conversation": {
        "speaker_a": "Ana", "speaker_b": "Ben",
        "session_1_date_time": "9:00 am on 3 March, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I love hiking in the mountains."},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "I work as a nurse in Porto."},
        ],
    },
    "observation": {"session_1_observation": {
        "Ana": [["Ana loves hiking in the mountains.", "D1:1"]],
        "Ben": [["Ben works as a nurse.", "D1:2"]],
    }},
    "qa": [{"question": "Where does Ben work?", "answer": "Porto", "evidence": ["D1:2"],
            "category": 4}],
}]

LONGMEMEVAL = [{
    "question_id": "smoke-1", "question_type": "single-session-user",
    "question": "What instrument do I play?", "question_date": "2023/05/30 (Tue) 10:00",
    "answer": "cello", "answer_session_ids": ["s1"], "haystack_session_ids": ["s1", "s2"],
    "haystack_dates": ["2023/05/01 (Mon) 09:01", "2023/05/02 (Tue) 09:02"],
    "haystack_sessions": [
        [{"role": "user", "content": "I play the cello every evening.", "has_answer": True}],
        [{"role": "user", "content": "The weather in Lisbon was lovely.", "has_answer": False}],
    ],
}]


def _locomo(tmp: Path) -> str:
    path = tmp / "locomo.json"
    path.write_text(json.dumps(LOCOMO), encoding="utf-8")
    return str(path)


def _longmemeval(tmp: Path) -> str:
    path = tmp / "longmemeval.json"
    path.write_text(json.dumps(LONGMEMEVAL), encoding="utf-8")
    return str(path)


def _stories(tmp: Path) -> str:
    folder = tmp / "stories"
    folder.mkdir()
    shutil.copy(STORIES / "03-one-off.toml", folder)
    return str(folder)


# Each command's smallest useful arguments; a callable gets the test's tmp_path.
Arg = str | Callable[[Path], str]
SMALL: dict[str, list[Arg]] = {
    "bench consolidate": ["--events", "12", "--users", "2"],
    "bench extract": ["--events", "12"],
    "bench search": ["--memories", "12", "--users", "2", "--queries", "2", "--no-http"],
    "bench secrets": ["--per-kind", "1", "--json"],
    "bench ingest": ["--n", "3", "--batch-n", "3", "--http-n", "2", "--http-batch-n", "2",
                     "--http-clients", "1", "--drain-n", "3", "--json"],
    "bench sweep": ["--memories", "40", "--indexed", "10", "--json"],
    "bench reconsolidate": ["--events", "12", "--json"],
    "bench checkpoint": ["--n", "3", "--http-n", "1", "--no-http"],
    "bench context": ["--memories", "12", "--users", "2", "--turns", "2"],
    "bench session-end": ["--first", "30", "--second", "3", "--json"],
    "eval locomo": ["--data", _locomo, "--limit-questions", "1"],
    "eval extraction": ["--data", _locomo],
    "eval longmemeval": ["--data", _longmemeval],
    "eval scenarios": ["--dir", _stories],
}


# Commands whose smallest run is a test module of its own (named here); running them twice
# would only double the wait.
RUN_ELSEWHERE = {"bench chaos": "runtime/test_chaos.py"}


def app_commands() -> set[str]:
    """Every ``bench`` and ``eval`` subcommand the installed CLI offers."""
    root = get_command(app)
    assert isinstance(root, typer.core.TyperGroup)
    found = set()
    for group in ("bench", "eval"):
        sub = root.commands[group]
        assert isinstance(sub, typer.core.TyperGroup)
        found |= {f"{group} {name}" for name in sub.commands}
    return found


@pytest.fixture(autouse=True)
def logging_as_it_was() -> Iterator[None]:
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


def test_every_bench_and_eval_command_has_a_small_run() -> None:
    assert app_commands() == set(SMALL) | set(RUN_ELSEWHERE)
    for command, module in RUN_ELSEWHERE.items():
        assert f"sleepmem {command}" in (Path(__file__).parent.parent / module).read_text()


@pytest.mark.parametrize("command", sorted(SMALL))
def test_the_command_runs_at_a_tiny_size_and_exits_0(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    args = [a(tmp_path) if callable(a) else a for a in SMALL[command]]
    env = {"SLEEPMEM_DATA_DIR": str(tmp_path / "data"), "SLEEPMEM_EMBEDDER": "hashing",
           "SLEEPMEM_REDIS_URL": None, "SLEEPMEM_DATABASE_URL": None}
    result = CliRunner().invoke(app, [*command.split(), *args], env=env)
    assert result.exit_code == 0, (result.output[-3000:], result.exception)
