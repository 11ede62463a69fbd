"""Retrieval ranking: min-max fusion of dense and lexical candidates, then the rerank by
recency, importance and confidence (docs/semantics.md, rule 7 "Retrieval")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from sleepmem.models import Memory
from sleepmem.pipelines.ports import Hit
from sleepmem.pipelines.read.fusion import Route, fuse
from sleepmem.pipelines.read.rank import RankWeights, score

NOW = datetime(2026, 6, 1, tzinfo=UTC)
W = RankWeights()


def hits(**scores: float) -> list[Hit]:
    return [Hit(id=k, score=v) for k, v in scores.items()]


def mem(**kw: object) -> Memory:
    base: dict[str, object] = {
        "id": "m", "scope_key": "t=acme/a=bot/u=ann/p=/s=", "tenant": "acme", "agent": "bot",
        "user": "ann", "type": "fact", "statement": "x", "valid_from": NOW,
        "last_access": NOW, "importance": 0.5, "confidence": 0.5,
    }
    base.update(kw)
    return Memory(**base)  # type: ignore[arg-type]


def _fuse(dense: list[Hit], lexical: list[Hit], dense_share: float) -> dict[str, float]:
    """The two base routes of a search, fused as search fuses them."""
    routes = [Route("dense", dense, dense_share), Route("lexical", lexical, 1.0 - dense_share)]
    return {mid: f.score for mid, f in fuse(routes).items()}


class TestMinMaxFusion:
    def test_each_list_is_normalised_over_its_own_candidates_then_mixed_by_share(
        self,
    ) -> None:
        # A narrow cosine band (0.40-0.50) and wide BM25 scores (2-12).
        fused = _fuse(hits(a=0.50, b=0.45, c=0.40), hits(c=12.0, b=7.0, d=2.0), 0.3)
        assert fused == pytest.approx({
            "a": 0.3 * 1.0,
            "b": 0.3 * 0.5 + 0.7 * 0.5,
            "c": 0.3 * 0.0 + 0.7 * 1.0,
            "d": 0.7 * 0.0,
        })

    def test_the_worst_candidate_of_a_list_stays_in_at_zero(self) -> None:
        fused = _fuse(hits(a=0.9, b=0.1), [], 0.3)
        assert fused == pytest.approx({"a": 0.3, "b": 0.0})

    def test_a_narrow_dense_band_does_not_outweigh_the_best_lexical_match(self) -> None:
        # Divide-by-max would put the dense-only runner-up at 0.3 × 0.96; min-max puts it at 0.
        fused = _fuse(hits(a=0.50, b=0.48), hits(c=10.0, e=1.0), 0.3)
        assert fused["c"] > fused["b"]
        assert fused["b"] == pytest.approx(0.0)

    def test_a_list_whose_candidates_tie_gives_each_its_full_share(self) -> None:
        fused = _fuse(hits(a=0.3, b=0.3), hits(a=5.0), 0.3)
        assert fused == pytest.approx({"a": 1.0, "b": 0.3})

    def test_the_shares_come_from_the_dense_share(self) -> None:
        assert _fuse(hits(a=1.0, b=0.0), hits(b=1.0, a=0.0), 0.8) == pytest.approx(
            {"a": 0.8, "b": 0.2}
        )


class TestRerank:
    def test_the_score_is_the_weighted_sum_of_relevance_recency_importance_confidence(
        self,
    ) -> None:
        m = mem(last_access=NOW - timedelta(seconds=W.recency_half_life_s), importance=0.8,
                confidence=0.4)
        expected = 0.7 * 0.6 + 0.1 * 0.5 + 0.1 * 0.8 + 0.1 * 0.4
        assert score(m, 0.6, NOW, W) == pytest.approx(expected)

    def test_recency_halves_every_half_life_since_the_last_access(self) -> None:
        fresh = score(mem(last_access=NOW), 0.0, NOW, W)
        one = score(mem(last_access=NOW - timedelta(days=30)), 0.0, NOW, W)
        two = score(mem(last_access=NOW - timedelta(days=60)), 0.0, NOW, W)
        assert fresh - one == pytest.approx(W.recency * 0.5)
        assert one - two == pytest.approx(W.recency * 0.25)

    @pytest.mark.parametrize("field", ["importance", "confidence"])
    def test_more_importance_or_confidence_ranks_an_equally_relevant_memory_higher(
        self, field: str
    ) -> None:
        low = score(mem(**{field: 0.1}), 0.5, NOW, W)
        high = score(mem(**{field: 0.9}), 0.5, NOW, W)
        assert high - low == pytest.approx(0.1 * 0.8)

    def test_relevance_dominates_the_other_terms_at_the_default_weights(self) -> None:
        relevant_but_stale = mem(last_access=NOW - timedelta(days=365), importance=0.0,
                                 confidence=0.0)
        fresh_but_off_topic = mem(last_access=NOW, importance=1.0, confidence=1.0)
        assert score(relevant_but_stale, 1.0, NOW, W) > score(fresh_but_off_topic, 0.5, NOW, W)

    def test_a_demoted_memory_is_still_scored_but_below_its_undemoted_twin(self) -> None:
        assert score(mem(demoted=True), 0.5, NOW, W) == pytest.approx(
            score(mem(), 0.5, NOW, W) - W.demoted_penalty
        )

    def test_a_naive_last_access_timestamp_is_read_as_utc(self) -> None:
        naive = mem(last_access=(NOW - timedelta(days=30)).replace(tzinfo=None))
        aware = mem(last_access=NOW - timedelta(days=30))
        assert score(naive, 0.2, NOW, W) == pytest.approx(score(aware, 0.2, NOW, W))
