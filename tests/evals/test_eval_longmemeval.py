"""LongMemEval: the paper's session metrics pinned by hand, and the run on tiny slices."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest

from sleepmem.core.settings import Settings
from sleepmem.evals.harness import eval_instance, ingest
from sleepmem.evals.longmemeval import (
    Item,
    ask,
    bm25_ranking,
    events_of,
    load,
    run_longmemeval,
    spread,
)
from sleepmem.evals.metrics import dcg, ndcg_any, rank_by_first_mention, recall_all, recall_any
from sleepmem.models import MemoryCard

REAL = Path(__file__).resolve().parents[3] / "shared/data/longmemeval/longmemeval_s_dev.json.gz"


class TestSessionMetricsMatchTheHandComputedValues:
    def test_recall_all_needs_every_answer_session_in_the_top_k(self) -> None:
        ranked = ["a", "b", "c", "d", "e", "f"]
        assert recall_all(ranked, {"b", "d"}, 2) == 0.0
        assert recall_all(ranked, {"b", "d"}, 4) == 1.0
        assert recall_any(ranked, {"b", "d"}, 2) == 1.0
        assert recall_any(ranked, {"x"}, 6) == 0.0

    def test_ndcg_uses_the_papers_discount_where_ranks_one_and_two_count_fully(self) -> None:
        # relevant at ranks 2 and 4: DCG = 1/log2(2) + 1/log2(4) = 1.5; ideal = 1 + 1 = 2.
        assert ndcg_any(["a", "b", "c", "d", "e"], {"b", "d"}, 5) == pytest.approx(0.75)
        # The textbook discount would give (1/log2(3) + 1/log2(5)) / (1 + 1/log2(3)).
        textbook = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
        assert ndcg_any(["a", "b", "c", "d", "e"], {"b", "d"}, 5) != pytest.approx(textbook)

    def test_ndcg_is_one_for_a_perfect_ranking_and_zero_when_nothing_relevant_is_found(
        self,
    ) -> None:
        assert ndcg_any(["b", "d", "a"], {"b", "d"}, 5) == pytest.approx(1.0)
        assert ndcg_any(["a", "c"], {"b"}, 5) == 0.0
        assert ndcg_any(["a", "c"], set(), 5) == 0.0

    def test_a_three_question_toy_run_averages_to_the_hand_computed_means(self) -> None:
        runs = [
            (["s1", "s2", "s3"], {"s1"}),  # recall_all@1 1, ndcg@1 1
            (["s2", "s1", "s3"], {"s1"}),  # recall_all@1 0, ndcg@1 0; @2: 1, 1/log2(2)=1
            (["s3", "s2", "s1"], {"s1", "s2"}),  # @2: recall_all 0, ndcg 1/(1+1) = 0.5
        ]
        at1 = [recall_all(r, rel, 1) for r, rel in runs]
        at2 = [ndcg_any(r, rel, 2) for r, rel in runs]
        assert sum(at1) / 3 == pytest.approx(1 / 3)
        assert sum(at2) / 3 == pytest.approx((1.0 + 1.0 + 0.5) / 3)

    def test_dcg_of_nothing_is_zero(self) -> None:
        assert dcg([], 5) == 0.0

    def test_sessions_are_ranked_by_the_first_card_that_reaches_them(self) -> None:
        cards = [["s3"], ["s1", "s3"], [], ["s2", "s1"]]
        assert rank_by_first_mention(cards) == ["s3", "s1", "s2"]


def _turn(role: str, content: str, has_answer: bool = False) -> dict[str, Any]:
    return {"role": role, "content": content, "has_answer": has_answer}


def _item(qid: str, question: str, sessions: dict[str, list[dict[str, Any]]],
          answers: list[str], qtype: str = "single-session-user") -> dict[str, Any]:
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": question,
        "question_date": "2023/05/30 (Tue) 10:00",
        "answer": "x",
        "answer_session_ids": answers,
        "haystack_session_ids": list(sessions),
        "haystack_dates": [
            f"2023/05/{d:02d} (Mon) 09:{d:02d}" for d in range(1, len(sessions) + 1)
        ],
        "haystack_sessions": list(sessions.values()),
    }


TOY = [
    _item(
        "q1",
        "What is the name of my dog?",
        {
            "s_a": [_turn("user", "Can you suggest a good pasta recipe for dinner tonight?"),
                    _turn("assistant", "Try spaghetti aglio e olio.")],
            "answer_1": [_turn("user", "I adopted a beagle, my dog is named Biscuit.", True),
                         _turn("assistant", "Congratulations on adopting Biscuit!")],
            "s_c": [_turn("user", "What's the weather usually like in Lisbon in May?"),
                    _turn("assistant", "Mild and sunny, my dog would love it.")],
        },
        ["answer_1"],
    ),
    _item(
        "q2",
        "Which city did I move to?",
        {
            "answer_2": [_turn("user", "I moved to Porto last month for my new job.", True)],
            "s_e": [_turn("user", "How do I repot a cactus without getting hurt?")],
        },
        ["answer_2"],
    ),
    _item(
        "q3_abs",
        "What is my cat's name?",
        {"s_f": [_turn("user", "I like tea.")]},
        ["s_f"],
    ),
]


@pytest.fixture
def toy_file(tmp_path: Path) -> Path:
    path = tmp_path / "toy.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump(TOY, fh)
    return path


class TestLoading:
    def test_gzip_input_is_read_and_abstention_questions_are_marked(self, toy_file: Path) -> None:
        items = load(toy_file)
        assert [i.question_id for i in items] == ["q1", "q2", "q3_abs"]
        assert [i.abstention for i in items] == [False, False, True]
        assert items[0].dates[1].isoformat() == "2023-05-02T09:02:00+00:00"

    def test_every_turn_becomes_an_event_that_maps_back_to_its_session(
        self, toy_file: Path
    ) -> None:
        item = load(toy_file)[0]
        events, session_of = events_of(item)
        assert len(events) == 6
        assert {session_of[e["event_id"]] for e in events} == {"s_a", "answer_1", "s_c"}
        assert [e["role"] for e in events[:2]] == ["user", "assistant"]
        assert all(e["user"] == "q1" and e["tenant"] == "longmemeval" for e in events)
        # Turn order inside a session survives as one second per turn.
        assert (events[1]["at"] - events[0]["at"]).total_seconds() == 1.0

    def test_the_papers_labels_drop_answer_sessions_without_user_side_evidence(self) -> None:
        item = Item(
            question_id="q", question_type="single-session-assistant", question="?",
            session_ids=["answer_x", "answer_y"], dates=[], sessions=[
                [_turn("user", "hi"), _turn("assistant", "the answer", True)],
                [_turn("user", "the answer", True)],
            ],
            answer_sessions=frozenset({"answer_x", "answer_y"}),
        )
        assert item.official_relevant() == frozenset({"answer_y"})


class TestQuickRunsSample:
    def test_a_limit_spreads_over_the_file_so_every_question_type_is_seen(
        self, toy_file: Path
    ) -> None:
        items = load(toy_file) * 5  # 15 items
        assert spread(items, 3) == [items[0], items[5], items[10]]
        assert spread(items, None) == items
        assert spread(items, 99) == items


class TestBm25Baseline:
    def test_sessions_are_ranked_by_their_user_turns_only(self, toy_file: Path) -> None:
        item = load(toy_file)[0]
        # "dog" is in answer_1's user turn and in s_c's assistant turn: only the first counts.
        assert bm25_ranking(item)[0] == "answer_1"
        assert sorted(bm25_ranking(item)) == sorted(item.session_ids)


@pytest.mark.slow
class TestRunOnTinySlices:
    def test_a_toy_file_runs_end_to_end_and_skips_abstention(
        self, toy_file: Path, settings: Settings
    ) -> None:
        report = run_longmemeval(toy_file, settings=settings, per_question=True)
        assert report["questions"] == 2
        assert [q["question_id"] for q in report["per_question"]] == ["q1", "q2"]
        assert report["skipped_abstention"] == 1
        assert report["events"] == 8
        # Two or three sessions per question: any ranking has every session in its top 5,
        # so recall@5 only shows the run completed; the rank is what search decides.
        assert report["baseline_recall_all_at_5"] == 1.0
        assert report["recall_all_at_5"] == 1.0
        # Each answer session states a first-hand fact: search ranks it first, over
        # sessions that share words with the question ("my dog", "move").
        assert report["ndcg_any_at_5"] == 1.0
        assert [q["ndcg_any_at_5"] for q in report["per_question"]] == [1.0, 1.0]
        assert report["hybrid_recall_all_at_5"] == 1.0
        # At each budget, every system; a baseline never spends more than sleepmem did.
        systems = {"sleepmem", "bm25_turns", "bm25_lines", "hybrid_turns", "hybrid_lines"}
        assert list(report["at_tokens"]) == ["500", "1000", "1500", "2000"]
        for table in report["at_tokens"].values():
            assert set(table) == systems
            for name in systems - {"sleepmem"}:
                assert table[name]["tokens"] <= table["sleepmem"]["tokens"]
                assert table[name]["sessions"] >= 1
            assert 0.0 <= table["sleepmem"]["ndcg_any"] <= 1.0
        # Eight short turns fit in 500 tokens: whatever reads them all reaches every
        # answer session.
        assert report["at_tokens"]["500"]["sleepmem"]["recall_all"] == 1.0
        assert report["at_tokens"]["500"]["bm25_lines"]["recall_all"] == 1.0
        # What the scopes cost.
        scale = report["scale"]
        assert scale["ingest_seconds"] > 0 and scale["events_per_s"] > 0
        assert scale["peak_rss_mb"] > 50
        # Consolidation stage by stage, per 1,000 events: every event was consolidated,
        # and each stage that ran is there with its share of the time.
        cons = scale["consolidation"]
        assert cons["events"] == report["events"] == 8
        assert 0 < cons["seconds"] <= scale["ingest_seconds"]
        per_k = cons["seconds_per_1k_events"]
        assert {"load", "extract", "resolve", "entities", "persist", "index"} <= set(per_k)
        assert all(v >= 0 for v in per_k.values())
        assert sum(per_k.values()) <= cons["seconds"] * 1000 / 8 * 1.01
        assert 0 < scale["disk_mb"]["index"] <= scale["disk_mb"]["total"]
        assert {k: v["searches"] for k, v in scale["search_ms"].items()} == {
            "k=50": 2, "budget": 2 * 4
        }
        assert all(0 < v["p50"] <= v["p95"] for v in scale["search_ms"].values())
        assert set(report["by_type"]) == {"single-session-user"}
        for key in ("recall_all_at_5", "ndcg_any_at_5", "recall_all_at_10", "ndcg_any_at_10"):
            assert 0.0 <= report[key] <= 1.0

    def test_the_question_is_asked_on_its_date_so_days_ago_count_back_from_it(
        self, tmp_path: Path, settings: Settings
    ) -> None:
        raw = _item(
            "q_when",
            "What kitchen appliance did I buy ten days ago?",
            {
                "s_old": [_turn("user", "I bought a blender for my kitchen.")],
                "answer_t": [_turn("user", "I got a toaster for the kitchen.", True)],
            },
            ["answer_t"],
            qtype="temporal-reasoning",
        )
        raw["haystack_dates"] = ["2023/04/02 (Sun) 09:00", "2023/05/20 (Sat) 09:00"]
        path = tmp_path / "when.json.gz"
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            json.dump([raw], fh)
        (item,) = load(path)
        assert item.asked is not None and item.asked.isoformat() == "2023-05-30T10:00:00+00:00"
        with eval_instance(settings, prefix="lme-when-") as res:
            events, session_of = events_of(item)
            ingest(res, events)
            cards = ask(res, item)
            assert res.clock is None  # the wall clock again after the question
        # Ten days before 30 May is 20 May: the time route finds the toaster alone.
        by_time = [c for c in cards if isinstance(c, MemoryCard) and "time" in c.routes]
        assert [session_of[e] for c in by_time for e in c.provenance or []] == ["answer_t"]

    @pytest.mark.skipif(not REAL.exists(), reason="shared LongMemEval data not present")
    def test_two_real_questions_run_and_the_numbers_are_consistent(
        self, settings: Settings
    ) -> None:
        report = run_longmemeval(REAL, settings=settings, limit=2)
        assert report["questions"] == 2
        assert report["events"] > 500
        assert report["memories"] > 0
        assert report["recall_all_at_5"] <= report["recall_all_at_10"]
        assert report["baseline_recall_all_at_5"] <= report["baseline_recall_all_at_10"]
        assert report["hybrid_recall_all_at_5"] <= report["hybrid_recall_all_at_10"]
        assert report["sessions_reached"] > 0
        # Long assistant turns: packed whole, a baseline still spends most of the tokens.
        at = report["at_tokens"]
        for b in ("500", "2000"):
            assert 0.5 * at[b]["sleepmem"]["tokens"] < at[b]["hybrid_turns"]["tokens"]
        assert at["500"]["hybrid_lines"]["sessions"] <= at["2000"]["hybrid_lines"]["sessions"]


class TestCommandLine:
    def test_eval_longmemeval_runs_the_number_of_questions_asked_and_says_so(
        self, toy_file: Path, namespace: str
    ) -> None:
        from typer.testing import CliRunner

        from sleepmem.cli import app

        env = {
            "SLEEPMEM_EMBEDDER": "hashing",
            "SLEEPMEM_REDIS_URL": "redis://127.0.0.1:6379/0",
            "SLEEPMEM_NAMESPACE": namespace,
            "SLEEPMEM_LOG_LEVEL": "WARNING",
        }
        result = CliRunner().invoke(
            app, ["eval", "longmemeval", "--data", str(toy_file), "--questions", "1",
                  "--budget", "300", "--format", "lines", "--format", "cards"], env=env,
        )
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout[result.stdout.index("{") :])
        assert report["questions"] == 1
        assert report["events"] == 6
        assert list(report["at_tokens"]) == ["300", "500", "1000", "1500", "2000"]
        assert (report["format"], list(report["by_format"])) == ("lines", ["lines", "cards"])
        assert report["by_format"]["lines"]["recall_all_at_5"] == report["recall_all_at_5"]
