"""LoCoMo: evidence recall pinned by hand, parsing, and the run on tiny slices."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from redis import Redis

from sleepmem.core.settings import Settings
from sleepmem.evals.harness import count_tokens
from sleepmem.evals.locomo import (
    events_of,
    load,
    normalise_evidence,
    parse_session_date,
    run_locomo,
)
from sleepmem.evals.metrics import (
    Missed,
    evidence_recall,
    mean,
    miss_summary,
    route_shares,
    routes_of_hits,
    where_missed,
)

REAL = Path(__file__).resolve().parents[3] / "shared/data/locomo/locomo_dev8.json"


class TestEvidenceRecallMatchesTheHandComputedValues:
    def test_recall_is_the_covered_fraction_of_the_evidence(self) -> None:
        assert evidence_recall(["D1:1", "D9:9"], {"D1:1", "D1:2"}) == 0.5
        assert evidence_recall(["D1:1", "D1:2", "D1:1"], {"D1:1", "D1:2"}) == 1.0
        assert evidence_recall([], {"D1:1"}) == 0.0

    def test_a_three_question_toy_run_averages_to_the_hand_computed_mean(self) -> None:
        top_k = [["D1:1"], ["D2:1", "D2:2"], ["D3:3"]]
        evidence = [{"D1:1", "D1:2"}, {"D2:1"}, {"D1:3"}]
        assert mean([evidence_recall(f, e) for f, e in zip(top_k, evidence, strict=True)]) == 0.5

    def test_a_question_without_evidence_is_refused_rather_than_scored(self) -> None:
        with pytest.raises(ValueError, match="without evidence"):
            evidence_recall(["D1:1"], set())


class TestEachHitIsOwedToTheRoutesThatFoundIt:
    def test_a_hit_takes_the_routes_of_the_first_card_that_reached_it(self) -> None:
        cards = [
            (["D1:1", "D1:2"], ["dense", "lexical"]),
            (["D1:2", "D9:9"], ["time"]),  # D1:2 again: already owed to the first card
            (["D1:3"], ["entity"]),
        ]
        assert routes_of_hits(cards, {"D1:2", "D1:3", "D5:5"}) == [
            ("dense", "lexical"), ("entity",)
        ]
        assert routes_of_hits(cards, {"D5:5"}) == []

    def test_shares_count_every_route_of_a_hit_and_apart_the_routes_alone(self) -> None:
        hits = [("dense", "lexical"), ("dense",), ("entity",), ("dense", "time")]
        assert route_shares(hits) == {
            "dense": {"found": 0.75, "only": 0.25},
            "entity": {"found": 0.25, "only": 0.25},
            "lexical": {"found": 0.25, "only": 0.0},
            "time": {"found": 0.25, "only": 0.0},
        }
        assert route_shares([]) == {}


class TestEachMissSaysWhereItsMemorySat:
    def test_a_miss_is_placed_by_the_best_ranked_memory_carrying_it(self) -> None:
        carriers = {"D1:1": ["m7", "m2"], "D1:2": ["m9"], "D1:3": []}
        ranked = ["m1", "m2", "m3", "m4", "m5", "m6", "m7"]
        assert where_missed(["D1:1", "D1:2", "D1:3", "D5:5"], carriers, ranked) == [
            Missed("candidate", 2),  # m2 at rank 2 beats m7 at rank 7
            Missed("not_candidate"),  # m9 carries it, no route proposed m9
            Missed("no_memory"),
            Missed("no_memory"),
        ]

    def test_the_summary_counts_each_place_and_the_quartiles_of_the_ranks(self) -> None:
        misses = [Missed("candidate", r) for r in (11, 21, 31, 41, 51)]
        misses += [Missed("not_candidate"), Missed("no_memory"), Missed("no_memory")]
        assert miss_summary(misses) == {
            "evidence": 8, "no_memory": 2, "not_candidate": 1, "candidate": 5,
            "candidate_rank_p25": 21.0, "candidate_rank_p50": 31.0, "candidate_rank_p75": 41.0,
        }

    def test_without_candidates_there_are_no_quartiles(self) -> None:
        assert miss_summary([Missed("no_memory")]) == {
            "evidence": 1, "no_memory": 1, "not_candidate": 0, "candidate": 0,
        }
        assert miss_summary([])["evidence"] == 0


class TestParsing:
    def test_session_dates_parse_as_utc(self) -> None:
        assert parse_session_date("1:56 pm on 8 May, 2023").isoformat() == (
            "2023-05-08T13:56:00+00:00"
        )

    def test_typos_in_evidence_ids_are_repaired(self) -> None:
        assert normalise_evidence(["D8:6; D9:17", "D:11:26", "D"]) == ["D8:6", "D9:17", "D11:26"]


# More turns than the top 5, so that finding the evidence is not true by construction.
DISTRACTORS = [
    "I baked sourdough bread on Sunday morning.",
    "The train to Lyon was delayed by an hour.",
    "I repainted the kitchen a pale green.",
    "We watched a documentary about volcanoes.",
    "The neighbours threw a loud birthday party.",
    "I finally fixed the squeaky bicycle brake.",
    "My phone screen cracked on the stairs.",
    "I tried a new ramen place downtown.",
]


def _distractors(session: int, first: int) -> list[dict[str, str]]:
    half = DISTRACTORS[(session - 1) * 4 : session * 4]
    return [{"speaker": "Ana" if i % 2 else "Ben", "dia_id": f"D{session}:{first + i}",
             "text": text} for i, text in enumerate(half)]


def _conversation() -> list[dict[str, Any]]:
    return [
        {
            "sample_id": "toy-1",
            "conversation": {
                "speaker_a": "Ana",
                "speaker_b": "Ben",
                "session_1_date_time": "9:00 am on 3 March, 2023",
                "session_1": [
                    {"speaker": "Ana", "dia_id": "D1:1",
                     "text": "I adopted a beagle named Biscuit."},
                    {"speaker": "Ben", "dia_id": "D1:2", "text": "I started learning the cello."},
                    *_distractors(1, 3),
                ],
                "session_2_date_time": "6:30 pm on 10 March, 2023",
                "session_2": [
                    {"speaker": "Ana", "dia_id": "D2:1", "text": "I moved to Porto for work.",
                     "blip_caption": "a photo of a tiled house"},
                    {"speaker": "Ben", "dia_id": "D2:2", "text": "My sister visited from Oslo."},
                    *_distractors(2, 3),
                ],
            },
            "qa": [
                {"question": "What is the name of Ana's beagle?", "answer": "Biscuit",
                 "evidence": ["D1:1"], "category": 4},
                {"question": "Which instrument is Ben learning?", "answer": "cello",
                 "evidence": ["D1:2"], "category": 4},
                {"question": "Where did Ana move and who visited Ben?", "answer": "Porto; sister",
                 "evidence": ["D2:1; D2:2"], "category": 1},
                {"question": "Broken evidence", "answer": "-", "evidence": ["D7:7"],
                 "category": 2},
            ],
        }
    ]


@pytest.fixture
def toy_file(tmp_path: Path) -> Path:
    path = tmp_path / "locomo_toy.json"
    path.write_text(json.dumps(_conversation()), encoding="utf-8")
    return path


class TestEvents:
    def test_each_turn_is_a_user_event_named_after_its_dia_id(self, toy_file: Path) -> None:
        conv = load(toy_file)[0]
        events = events_of(conv)
        assert [e["event_id"] for e in events] == [
            *(f"toy-1.D1:{i}" for i in range(1, 7)), *(f"toy-1.D2:{i}" for i in range(1, 7)),
        ]
        assert {e["role"] for e in events} == {"user"}
        assert events[6]["content"] == (
            "I moved to Porto for work. [shares a photo of a tiled house]"
        )
        assert events[7]["meta"] == {"dia_id": "D2:2", "speaker": "Ben", "session": 2}
        assert events[7]["at"].isoformat() == "2023-03-10T18:30:01+00:00"

    def test_questions_citing_missing_turns_are_dropped_and_counted(self, toy_file: Path) -> None:
        conv = load(toy_file)[0]
        assert len(conv.questions) == 3
        assert conv.dropped_evidence == 1
        assert conv.questions[2].evidence == frozenset({"D2:1", "D2:2"})


@pytest.mark.slow
class TestRunOnTinySlices:
    def test_a_toy_conversation_runs_end_to_end(self, toy_file: Path, settings: Settings) -> None:
        report = run_locomo(toy_file, settings=settings)
        assert report["questions"] == 3
        assert report["events"] == 12
        assert report["memories"] > 0
        # Twelve turns, top 5: each evidence turn is a first-hand fact, so consolidation
        # keeps it and search ranks it above the eight unrelated turns.
        assert report["recall_at_5"] == 1.0
        # Every system at every budget and k, each baseline in no more tokens than
        # sleepmem's answer, which stays near the budget it was given.
        systems = {"sleepmem", "bm25_turns", "bm25_lines", "hybrid_turns", "hybrid_lines"}
        assert set(report["systems"]) == systems
        assert list(report["at_tokens"]) == ["500", "1000", "1500", "2000"]
        assert list(report["at_k"]) == ["5", "10", "25"]
        for table in [*report["at_tokens"].values(), *report["at_k"].values()]:
            assert set(table) == systems
            own = table["sleepmem"]
            assert own["tokens"] > 0
            for name in systems - {"sleepmem"}:
                assert 0 < table[name]["tokens"] <= own["tokens"]
                assert 0.0 <= table[name]["recall"] <= 1.0
        assert report["at_k"]["5"]["sleepmem"]["recall"] == report["recall_at_5"]
        # Twelve short turns fit in 500 tokens: at a budget the search reads every one,
        # and a line is never longer than its turn, so the lines baselines read them all.
        at_500 = report["at_tokens"]["500"]
        assert at_500["sleepmem"]["turns"] == 12
        assert at_500["bm25_lines"]["turns"] == at_500["hybrid_lines"]["turns"] == 12
        assert report["at_tokens"]["500"]["sleepmem"]["tokens"] <= 500 * 1.2
        assert set(report["by_category"]) == {"1", "4"}
        assert set(report["by_category"]["4"]["at_tokens"]["500"]) == systems
        text = "\n".join(t.document for t in load(toy_file)[0].turns)
        assert report["full_context_tokens"] == count_tokens(text)
        assert 0 < report["tokens_per_query"] < report["full_context_tokens"] * 2
        # Every card's provenance names at least the turn it came from.
        assert report["turns_per_card"] >= 1.0
        # Every hit was found by some route; dense and lexical search the whole scope.
        shares = report["hits_by_route_at_10"]
        assert shares and {"dense", "lexical"} & set(shares)
        assert all(0.0 <= s["only"] <= s["found"] <= 1.0 for s in shares.values())
        assert sum(s["found"] for s in shares.values()) >= 1.0  # no hit owed to no route
        assert set(report["by_category"]["1"]["hits_by_route_at_10"]) <= set(shares)
        # Every evidence turn is within the top 10 of twelve turns: nothing to place.
        assert report["misses_at_10"]["evidence"] == 0

    @pytest.mark.skipif(not REAL.exists(), reason="shared LoCoMo data not present")
    def test_one_real_conversation_runs_and_the_numbers_are_consistent(
        self, settings: Settings
    ) -> None:
        report = run_locomo(REAL, settings=settings, limit_conversations=1, limit_questions=12)
        assert report["conversations"] == 1
        assert report["questions"] == 12
        assert report["events"] == len(events_of(load(REAL)[0]))
        assert report["recall_at_5"] <= report["recall_at_10"] <= report["recall_at_25"]
        at_k = report["at_k"]
        assert at_k["5"]["sleepmem"]["tokens"] < at_k["25"]["sleepmem"]["tokens"]
        # Packed into sleepmem's own tokens, a baseline spends them but never more.
        for k in ("5", "10", "25"):
            for name in ("bm25_turns", "hybrid_lines"):
                assert 0.5 * at_k[k]["sleepmem"]["tokens"] < at_k[k][name]["tokens"]
                assert at_k[k][name]["tokens"] <= at_k[k]["sleepmem"]["tokens"]
        # A bigger budget reads more, for sleepmem and for the baselines.
        small, large = report["at_tokens"]["500"], report["at_tokens"]["2000"]
        for name in small:
            assert small[name]["turns"] < large[name]["turns"]
            assert small[name]["recall"] <= large[name]["recall"]
        # One line per turn holds more turns than whole turns in the same tokens.
        assert small["hybrid_lines"]["turns"] > small["hybrid_turns"]["turns"]
        assert report["recall_at_25"] > 0.0
        assert report["full_context_tokens"] > 10_000
        # Each evidence turn the top 10 missed is placed exactly once, and a question
        # with a miss has recall below 1: the counts follow the recall.
        misses = report["misses_at_10"]
        assert misses["evidence"] == (
            misses["no_memory"] + misses["not_candidate"] + misses["candidate"]
        )
        assert (misses["evidence"] > 0) == (report["recall_at_10"] < 1.0)
        if misses["candidate"]:
            assert 10 < misses["candidate_rank_p25"] <= misses["candidate_rank_p75"]


class TestTheRunLeavesSharedServicesAlone:
    def test_keys_of_the_configured_namespace_survive_and_the_runs_own_are_gone(
        self, toy_file: Path, settings: Settings, redis: Redis, namespace: str
    ) -> None:
        redis.set(f"{namespace}:keep-me", "1")
        run_locomo(toy_file, settings=settings)
        assert redis.get(f"{namespace}:keep-me") == b"1"
        assert list(redis.scan_iter(match=f"{namespace}-eval-*")) == []


class TestCommandLine:
    def test_eval_locomo_prints_one_json_report(
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
            app, ["eval", "locomo", "--data", str(toy_file), "--json", "--budget", "700",
                  "--budget", "1400", "--format", "mixed", "--format", "cards"], env=env
        )
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout[result.stdout.index("{") :])
        assert report["questions"] == 3
        # A budget named is scored besides the default ones.
        budgets = ["500", "700", "1000", "1400", "1500", "2000"]
        assert list(report["at_tokens"]) == budgets
        assert report["recall_at_5"] == 1.0
        # The first format is the headline; each is scored against the baselines in its
        # own tokens.
        assert (report["format"], report["formats"]) == ("mixed", ["mixed", "cards"])
        by_format = report["by_format"]
        assert set(by_format) == {"mixed", "cards"}
        assert by_format["mixed"]["at_tokens"] == report["at_tokens"]
        for table in by_format["cards"]["at_tokens"].values():
            assert all(table[name]["tokens"] <= table["sleepmem"]["tokens"]
                       for name in table)
        assert set(report["by_category"]["4"]["by_format"]) == {"mixed", "cards"}

    def test_an_unknown_format_is_refused_by_name(self, toy_file: Path) -> None:
        from typer.testing import CliRunner

        from sleepmem.cli import app

        result = CliRunner().invoke(
            app, ["eval", "locomo", "--data", str(toy_file), "--format", "tail"])
        assert result.exit_code != 0
        assert "'tail' is not a search format: cards, lines, mixed" in result.output

    def test_a_missing_data_file_is_refused_before_anything_runs(self, tmp_path: Path) -> None:
        from typer.testing import CliRunner

        from sleepmem.cli import app

        result = CliRunner().invoke(
            app, ["eval", "locomo", "--data", str(tmp_path / "nope.json"), "--json"]
        )
        assert result.exit_code == 2
