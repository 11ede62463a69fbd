"""LoCoMo extraction eval: the three figures on an invented conversation, the matcher on
invented pairs, and the calibration arithmetic (no LoCoMo text here)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sleepmem.adapters.embedders import UsemEmbedder
from sleepmem.core.settings import Settings
from sleepmem.evals.extraction import (
    DEFAULT_THRESHOLD,
    LABELS,
    OTHER_SUBJECT,
    Matcher,
    Side,
    agreement,
    best_threshold,
    content_words,
    read_labels,
    run_extraction,
    statement_hash,
    statement_lines,
    third_person,
)

THRESHOLD = 0.6


def _sample() -> list[dict[str, Any]]:
    return [
        {
            "sample_id": "toy-x",
            "conversation": {
                "speaker_a": "Ana",
                "speaker_b": "Ben",
                "session_1_date_time": "9:00 am on 3 March, 2023",
                "session_1": [
                    # -> a preference (structured) that the first observation states
                    {"speaker": "Ana", "dia_id": "D1:1", "text": "I love hiking in the mountains."},
                    # -> an episode only (a question states nothing)
                    {"speaker": "Ben", "dia_id": "D1:2",
                     "text": "Did you catch the volcano documentary last night?"},
                    # -> a fact, which the observation citing this turn does not state
                    {"speaker": "Ana", "dia_id": "D1:3",
                     "text": "I work as a nurse at the city hospital."},
                    # -> a preference no observation mentions
                    {"speaker": "Ben", "dia_id": "D1:4", "text": "I love playing the cello."},
                ],
            },
            "observation": {
                "session_1_observation": {
                    "Ana": [
                        ["Ana loves hiking in the mountains.", "D1:1"],
                        ["Ana dislikes the long commute by bus.", "D1:3"],
                    ],
                    "Ben": [
                        ["Ben asked Ana about a documentary on volcanoes.", "D1:2"],
                        ["Ben owns a red kayak.", "D9:9"],  # names no turn: dropped
                    ],
                }
            },
            "qa": [],
        }
    ]


@pytest.fixture
def toy_file(tmp_path: Path) -> Path:
    path = tmp_path / "locomo_toy.json"
    path.write_text(json.dumps(_sample()), encoding="utf-8")
    return path


class TestTheThreeFiguresOnAnInventedConversation:
    def test_coverage_same_thing_and_unmatched(self, toy_file: Path, settings: Settings) -> None:
        report = run_extraction(toy_file, settings=settings, threshold=THRESHOLD)
        assert report["conversations"] == 1
        assert report["dropped_observations"] == 1
        assert report["observations"] == 3
        # Two preferences and a fact; the episodes are no structured memories.
        assert report["structured_memories"] == 3
        assert report["memories_by_type"]["preference"] == 2
        assert report["memories_by_type"]["fact"] == 1
        assert report["memories_by_type"]["event"] >= 1
        counts = report["counts"]
        # D1:1 and D1:3 left structured memories; D1:2 only an episode.
        assert counts["covered"] == 2
        assert report["coverage"] == round(2 / 3, 4)
        # Only the hiking observation is stated by its memory.
        assert counts["same_thing"] == 1
        assert report["same_thing"] == round(1 / 3, 4)
        # The fact (D1:3) and Ben's cello match no observation.
        assert counts["unmatched"] == 2
        assert report["unmatched"] == round(2 / 3, 4)
        # The episode of D1:1-D1:2 carries the volcano turn: with episodes, all covered.
        assert report["any_type"]["coverage"] == 1.0
        assert report["best_score_linked"]["n"] == 2
        assert report["best_score_linked"]["max"] >= THRESHOLD
        assert report["by_conversation"]["toy-x"]["coverage"] == report["coverage"]
        assert report["threshold"] == THRESHOLD

    def test_calibration_scores_labels_and_reports_missing_statements(
        self, toy_file: Path, settings: Settings, tmp_path: Path
    ) -> None:
        key = {"sample_id": "toy-x", "session": "session_1_observation", "speaker": "Ana",
               "dia_id": "D1:1"}
        labels = [
            {**key, "index": 0, "same": True,
             "statement_sha256": statement_hash("Ana loves hiking in the mountains.")},
            {**key, "index": 0, "same": False,
             "statement_sha256": statement_hash("Ben loves playing the cello.")},
            {**key, "index": 0, "same": True, "statement_sha256": statement_hash("gone")},
            {**key, "index": 7, "same": True, "statement_sha256": statement_hash("gone")},
        ]
        path = tmp_path / "labels.json"
        path.write_text(json.dumps({"pairs": labels}), encoding="utf-8")
        report = run_extraction(toy_file, settings=settings, threshold=THRESHOLD, labels=path)
        cal = report["calibration"]
        assert cal["labels"] == 4
        assert cal["missing"] == 2
        assert cal["pairs"] == 2
        assert cal["accuracy"] == 1.0

    def test_sampled_pairs_carry_keys_scores_and_no_label(
        self, toy_file: Path, settings: Settings, tmp_path: Path
    ) -> None:
        out = tmp_path / "pairs.json"
        report = run_extraction(toy_file, settings=settings, sample_to=out)
        pairs = json.loads(out.read_text(encoding="utf-8"))
        assert report["sampled_pairs"]["pairs"] == len(pairs) > 0
        assert all(p["same"] is None and len(p["statement_sha256"]) == 64 for p in pairs)
        assert [p["score"] for p in pairs] == sorted(p["score"] for p in pairs)


class TestNormalisation:
    def test_first_person_becomes_the_speakers_name(self) -> None:
        assert third_person("I'm sure my dog likes me; I've asked.", "Ana") == (
            "Ana is sure Ana's dog likes Ana; Ana has asked."
        )

    def test_a_name_prefix_names_the_lines_speaker(self) -> None:
        assert statement_lines("Ana: I left.\nBen: Why?\nBob: hi", ["Ana", "Ben"], "Ana") == [
            ("Ana", "I left."), ("Ben", "Why?"), ("Ana", "Bob: hi"),
        ]

    def test_content_words_are_crude_lemmas_without_stopwords(self) -> None:
        assert content_words("She went hiking and loved the lakes") == {
            "go", "hik", "lov", "lak",
        }
        assert content_words("Ana goes hiking; she loves a lake") == {
            "ana", "go", "hik", "lov", "lak",
        }


@pytest.fixture(scope="module")
def usem() -> Iterator[UsemEmbedder]:
    yield UsemEmbedder(threads=1)


class TestTheMatcherOnInventedPairs:
    # (observation's speaker, observation, memory statement, the memory's speaker)
    SAME = (
        ("Ana", "Ana adopted a beagle named Biscuit.",
         "Ana: I adopted a beagle named Biscuit last week!", "Ana"),
        ("Ben", "Ben moved to Porto for a new job.", "Ben moved to Porto for his new job.", "Ben"),
        ("Ana", "Ana is learning to play the cello.",
         "Ben: How are the lessons?\nAna: I'm learning to play the cello, it's hard.", "Ana"),
    )
    NOT_SAME = (
        ("Ana", "Ana adopted a beagle named Biscuit.",
         "Ana: I repainted the kitchen a pale green.", "Ana"),
        ("Ben", "Ben moved to Porto for a new job.", "Ben: My sister visited from Oslo.", "Ben"),
        ("Ana", "Ana is learning to play the cello.",
         "Ana: My brother fixed the garage roof last summer.", "Ana"),
        # the same words, about someone else
        ("Ana", "Ana is learning to play the cello.", "Ben loves playing the cello.", "Ben"),
    )

    @staticmethod
    def _score(matcher: Matcher, speaker: str, observation: str, statement: str,
               memory_speaker: str) -> float:
        lines = [Side(s, t) for s, t in statement_lines(statement, ["Ana", "Ben"], memory_speaker)]
        return matcher.score(Side(speaker, observation), lines)

    def test_same_pairs_reach_the_threshold_and_others_do_not(self, usem: UsemEmbedder) -> None:
        matcher = Matcher(usem)
        for speaker, obs, statement, by in self.SAME:
            assert self._score(matcher, speaker, obs, statement, by) >= DEFAULT_THRESHOLD
        for speaker, obs, statement, by in self.NOT_SAME:
            assert self._score(matcher, speaker, obs, statement, by) < DEFAULT_THRESHOLD

    def test_normalising_raises_the_score_of_a_first_person_paraphrase(
        self, usem: UsemEmbedder
    ) -> None:
        obs = "Ana adopted a beagle named Biscuit."
        raw = "Ana: I adopted a beagle named Biscuit last week!"
        vectors = usem.embed([obs, raw])
        assert self._score(Matcher(usem), "Ana", obs, raw, "Ana") > float(vectors[0] @ vectors[1])

    def test_a_line_about_someone_else_scores_lower(self, usem: UsemEmbedder) -> None:
        obs = "Ana is learning to play the cello."
        said = "Playing the cello is great fun."
        own = self._score(Matcher(usem), "Ana", obs, f"Ana: {said}", "Ana")
        other = self._score(Matcher(usem), "Ana", obs, f"Ben: {said}", "Ana")
        assert other == pytest.approx(own * OTHER_SUBJECT)


class TestCalibrationArithmetic:
    def test_agreement_counts_at_the_threshold(self) -> None:
        labelled = [(0.9, True), (0.7, False), (0.6, True), (0.2, False), (0.1, True)]
        got = agreement(labelled, 0.5)
        assert (got["tp"], got["fp"], got["fn"], got["tn"]) == (2, 1, 1, 1)
        assert got["accuracy"] == 0.6
        assert got["precision"] == round(2 / 3, 4)
        assert got["recall"] == round(2 / 3, 4)

    def test_the_best_threshold_separates_the_labels(self) -> None:
        assert best_threshold([(0.8, True), (0.7, True), (0.4, False), (0.3, False)]) == 0.55

    def test_the_shipped_labels_hold_keys_and_hashes_only(self) -> None:
        labels = read_labels(LABELS)
        assert len(labels) == 100
        allowed = {"sample_id", "session", "speaker", "index", "dia_id", "statement_sha256",
                   "same"}
        assert all(set(item) == allowed for item in labels)
        assert all(len(item["statement_sha256"]) == 64 for item in labels)


class TestCommandLine:
    def test_eval_extraction_prints_one_json_report(self, toy_file: Path, namespace: str) -> None:
        from typer.testing import CliRunner

        from sleepmem.cli import app

        env = {
            "SLEEPMEM_EMBEDDER": "hashing",
            "SLEEPMEM_REDIS_URL": "redis://127.0.0.1:6379/0",
            "SLEEPMEM_NAMESPACE": namespace,
            "SLEEPMEM_LOG_LEVEL": "WARNING",
        }
        result = CliRunner().invoke(
            app,
            ["eval", "extraction", "--data", str(toy_file), "--json", "--limit", "1",
             "--threshold", str(THRESHOLD)],
            env=env,
        )
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout[result.stdout.index("{") :])
        assert report["threshold"] == THRESHOLD
        assert report["coverage"] == round(2 / 3, 4)
        assert "calibration" not in report
