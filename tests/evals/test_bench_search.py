"""The search benchmark on a small store: it fills, measures both paths and stays scoped."""

from __future__ import annotations

import pytest

from sleepmem.bench.search import run_search_bench
from sleepmem.core.errors import ValidationError
from sleepmem.core.settings import Settings


class TestSearchBenchmark:
    def test_a_small_run_reports_ordered_percentiles_for_both_paths(
        self, settings: Settings
    ) -> None:
        report = run_search_bench(settings, memories=600, users=20, queries=25)
        assert report["memories"] == 600
        assert 0 < report["p50_ms"] <= report["p95_ms"] <= report["p99_ms"]
        assert 0 < report["http_p50_ms"] <= report["http_p95_ms"] <= report["http_p99_ms"]

    def test_the_same_run_baseline_is_cheaper_than_the_search_and_gives_the_ratios(
        self, settings: Settings
    ) -> None:
        report = run_search_bench(settings, memories=600, users=20, queries=40, http=False)
        assert 0 < report["baseline_p50_ms"] <= report["baseline_p95_ms"]
        # The baseline (embed, one dense search) is a part of what every search does, so
        # the search costs more at the median.
        assert report["p50_ms"] > report["baseline_p50_ms"]
        assert report["p50_vs_baseline"] == pytest.approx(
            report["p50_ms"] / report["baseline_p50_ms"], rel=0.05)
        assert report["p95_vs_baseline"] == pytest.approx(
            report["p95_ms"] / report["baseline_p95_ms"], rel=0.05)

    def test_no_query_sees_another_users_memories_and_most_find_the_asked_kind(
        self, settings: Settings
    ) -> None:
        report = run_search_bench(settings, memories=600, users=20, queries=40, http=False)
        assert report["foreign_cards"] == 0
        # 30 memories per user: most queries have something of the asked kind to find, and
        # a search that works puts one in the top k for most of them (0.74 with the
        # hashing embedder of the tests; a search that ignores the query scores near 0.2).
        assert report["attribute_hit_rate"] >= 0.5
        assert "http_p95_ms" not in report

    def test_a_store_of_no_memories_is_refused(self, settings: Settings) -> None:
        with pytest.raises(ValidationError, match="positive"):
            run_search_bench(settings, memories=0)
