"""The working-memory benchmarks on small stores: they measure, and they check themselves."""

from __future__ import annotations

import pytest

from sleepmem.bench.working import run_checkpoint_bench, run_context_bench
from sleepmem.core.errors import ValidationError
from sleepmem.core.settings import Settings


class TestCheckpointBench:
    def test_a_small_run_reports_ordered_percentiles_for_both_paths_and_a_baseline(
        self, settings: Settings
    ) -> None:
        report = run_checkpoint_bench(settings, n=60, http_n=30)
        for path in ("put", "get", "http_put", "http_get", "raw_hset"):
            assert 0 < report[f"{path}_p50_ms"] <= report[f"{path}_p95_ms"] \
                <= report[f"{path}_p99_ms"], path
        assert report["put_p50_vs_raw_hset"] > 0
        assert isinstance(report["floors_met"], bool)

    def test_counts_it_cannot_measure_are_refused(self, settings: Settings) -> None:
        with pytest.raises(ValidationError):
            run_checkpoint_bench(settings, n=0)


class TestContextBench:
    def test_the_prefix_is_stable_exactly_when_it_should_be_and_the_budget_holds(
        self, settings: Settings
    ) -> None:
        report = run_context_bench(settings, memories=800, users=10, turns=30, budget=800)
        assert report["turns_changed"] >= 4 and report["turns_unchanged"] >= 20
        assert report["prefix_identical_when_unchanged"] == 1.0
        assert report["prefix_changed_when_changed"] == 1.0
        assert report["turns_over_budget"] == 0 and report["max_tokens"] <= 800
        assert 0 < report["context_p50_ms"] <= report["context_p95_ms"]
        assert report["search_p95_ms"] > 0
