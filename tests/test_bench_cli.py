"""Benchmarks on the command line: with --json, stdout is one JSON object and nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest


def sleepmem(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SLEEPMEM_DATA_DIR": str(tmp_path / "data")}
    return subprocess.run(
        [sys.executable, "-c", "from sleepmem.cli import main; main()", *args],
        env=env, capture_output=True, text=True, timeout=240,
    )


class TestJsonOutput:
    def test_bench_consolidate_prints_only_its_result(self, tmp_path: Path) -> None:
        done = sleepmem("bench", "consolidate", "--events", "120", "--users", "3", "--json",
                        tmp_path=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        result = orjson.loads(done.stdout)  # a log line on stdout would make this fail
        assert result["events_stored"] == 120
        assert result["memories_not_indexed"] == 0

    @pytest.mark.parametrize("option", ["--http-n", "--n"])
    def test_bench_ingest_refuses_counts_it_cannot_measure(
        self, option: str, tmp_path: Path
    ) -> None:
        done = sleepmem("bench", "ingest", option, "0", tmp_path=tmp_path)
        assert done.returncode == 2
        assert option in done.stderr
