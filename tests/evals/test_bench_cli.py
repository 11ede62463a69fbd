"""Benchmarks on the command line: with --json, stdout is one JSON object and nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import sqlalchemy as sa
from support import PG_SERVER, REDIS_URL


def sleepmem(
    *args: str, tmp_path: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "SLEEPMEM_DATA_DIR": str(tmp_path / "data"), **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", "from sleepmem.cli import main; main()", *args],
        env=full_env, capture_output=True, text=True, timeout=240,
    )


class TestJsonOutput:
    def test_bench_consolidate_prints_only_its_result(self, tmp_path: Path) -> None:
        done = sleepmem("bench", "consolidate", "--events", "120", "--users", "3", "--json",
                        tmp_path=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        result = orjson.loads(done.stdout)  # a log line on stdout would make this fail
        assert result["events_stored"] == 120
        assert result["memories_not_indexed"] == 0

    def test_bench_extract_prints_its_rate_against_the_tokeniser_baseline(
        self, tmp_path: Path
    ) -> None:
        done = sleepmem("bench", "extract", "--events", "200", "--json", tmp_path=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        result = orjson.loads(done.stdout)
        assert (result["events"], result["extractor"]) == (200, "rules")
        assert result["candidates"] > 0
        # The speed itself is the command's business (floor 2,000 events/s), not CI's.
        assert result["ok"] == (result["events_per_s"] >= result["floor_events_per_s"])

    @pytest.mark.parametrize("option", ["--http-n", "--n"])
    def test_bench_ingest_refuses_counts_it_cannot_measure(
        self, option: str, tmp_path: Path
    ) -> None:
        done = sleepmem("bench", "ingest", option, "0", tmp_path=tmp_path)
        assert done.returncode == 2
        assert option in done.stderr


def databases() -> set[str]:
    """The bench's scratch databases on the server (other test runs make their own)."""
    admin = sa.create_engine(f"{PG_SERVER}/postgres")
    try:
        with admin.connect() as conn:
            return set(conn.execute(sa.text(
                "SELECT datname FROM pg_database WHERE datname LIKE 'sleepmem\\_drain\\_%'"
            )).scalars())
    finally:
        admin.dispose()


class TestIngestBench:
    def test_a_small_run_drains_into_a_scratch_database_and_drops_it(
        self, tmp_path: Path
    ) -> None:
        before = databases()
        done = sleepmem(
            "bench", "ingest", "--json", "--n", "50", "--batch-n", "500", "--http-n", "50",
            "--http-batch-n", "1000", "--drain-n", "1500", "--pg-url", PG_SERVER,
            tmp_path=tmp_path, env={"SLEEPMEM_REDIS_URL": REDIS_URL},
        )
        assert done.returncode == 0, done.stderr[-2000:]
        result = orjson.loads(done.stdout)
        for target in ("sqlite", "postgresql"):
            assert result[f"drain_{target}_lost"] == 0
            assert result[f"drain_{target}_duplicated"] == 0
        # Its own scratch database is new and dropped; other runs on the same server may
        # create and drop theirs meanwhile, so only this run's is checked.
        own = result["drain_postgresql_database"]
        assert own.startswith("sleepmem_drain_")
        assert own not in before and own not in databases()
