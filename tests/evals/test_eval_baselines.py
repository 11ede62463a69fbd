"""Raw-turn baselines: fusion and packing pinned by hand, and the two formats on real parts
(sleepmem's lexical tokens, rank-bm25, the hashing embedder, cl100k)."""

from __future__ import annotations

import pytest

from sleepmem.adapters.embedders import HashingEmbedder
from sleepmem.evals.baselines import NAMES, Baselines, RawTurns, pack, rrf
from sleepmem.evals.harness import count_tokens

TURNS = [
    "Ana: I baked sourdough bread on Sunday morning.",
    "Ben: The weather was awful. I started learning the cello last week. It is hard.",
    "Ana: I adopted a beagle named Biscuit.",
    "Ben: The train to Lyon was delayed by an hour.",
    "Ana: We watched a documentary about volcanoes and then went for a long walk.",
]


class TestReciprocalRankFusion:
    def test_each_item_scores_the_sum_of_one_over_sixty_plus_its_ranks(self) -> None:
        # 0: 1/61 + 1/62, 2: 1/63 + 1/61, 1: 1/62 + 1/63
        assert rrf([0, 1, 2], [2, 0, 1]) == [0, 2, 1]

    def test_an_item_one_ranking_lacks_still_counts_its_other_rank(self) -> None:
        assert rrf([5, 6], [6]) == [6, 5]


class TestPackingIntoABudget:
    def test_an_item_over_what_is_left_is_skipped_and_the_next_tried(self) -> None:
        costs = {0: 5, 1: 10, 2: 3, 3: 1, 4: 1}
        assert pack([0, 1, 2, 3, 4], costs.__getitem__, 9) == [0, 2, 3]

    def test_nothing_fits_a_budget_below_every_cost(self) -> None:
        assert pack([0, 1], {0: 5, 1: 7}.__getitem__, 4) == []


class TestBaselinesOverRawTurns:
    def _baselines(self, query: str) -> Baselines:
        embedder = HashingEmbedder()
        turns = RawTurns.build(TURNS, embedder)
        return Baselines.of(turns, query, embedder.embed([query], kind="query")[0],
                            count_tokens)

    def test_both_rankers_put_the_turn_sharing_the_query_words_first(self) -> None:
        base = self._baselines("Which instrument is Ben learning, the cello?")
        assert base.ranked["bm25"][0] == 1
        assert base.ranked["hybrid"][0] == 1
        assert sorted(base.ranked["hybrid"]) == list(range(len(TURNS)))

    def test_a_line_is_the_turns_best_sentence_behind_its_speaker(self) -> None:
        base = self._baselines("Which instrument is Ben learning, the cello?")
        assert base.text("lines", 1) == "Ben: I started learning the cello last week."
        assert base.text("turns", 1) == TURNS[1]

    def test_every_baseline_stays_within_the_budget_and_lines_read_more_turns(self) -> None:
        base = self._baselines("What did Ana do on Sunday and with the beagle?")
        budget = count_tokens(TURNS[0]) + count_tokens(TURNS[2]) + 3
        packed = {name: base.packed(name, budget) for name in NAMES}
        for name, p in packed.items():
            fmt = name.split("_", 1)[1]
            assert p.tokens == sum(count_tokens(base.text(fmt, i)) for i in p.turns)
            assert 0 < p.tokens <= budget
        assert len(packed["bm25_lines"].turns) >= len(packed["bm25_turns"].turns)
        assert {0, 2} <= set(packed["bm25_turns"].turns)

    def test_an_empty_scope_is_refused(self) -> None:
        with pytest.raises(ValueError, match="at least one turn"):
            RawTurns.build([], HashingEmbedder())
