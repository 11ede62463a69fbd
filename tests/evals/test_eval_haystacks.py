"""LongMemEval_M-like haystacks: filler from other questions, none answering any question,
dated inside the question's own range, and readable by the LongMemEval eval."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

import pytest

from sleepmem.core.errors import ValidationError
from sleepmem.evals.haystacks import answering, build, filler_pool, grow
from sleepmem.evals.longmemeval import load, parse_date


def _turn(content: str, has_answer: bool = False) -> dict[str, Any]:
    return {"role": "user", "content": content, "has_answer": has_answer}


def _question(qid: str, sessions: dict[str, list[dict[str, Any]]], answers: list[str],
              days: list[int]) -> dict[str, Any]:
    return {
        "question_id": qid, "question_type": "single-session-user", "question": f"{qid}?",
        "question_date": "2023/06/30 (Fri) 10:00", "answer": "x",
        "answer_session_ids": answers,
        "haystack_session_ids": list(sessions),
        "haystack_dates": [f"2023/05/{d:02d} (Mon) 09:00" for d in days],
        "haystack_sessions": list(sessions.values()),
    }


SHARED = [_turn("How do I descale a kettle?")]
QUESTIONS = [
    _question("q1", {"answer_1": [_turn("My dog is Biscuit.", True)], "f_shared": SHARED,
                     "f_a": [_turn("Recommend a podcast.")]}, ["answer_1"], [3, 5, 9]),
    _question("q2", {"f_shared": SHARED, "answer_2": [_turn("I moved to Porto.", True)],
                     # marked as holding an answer though not listed as an answer session
                     "f_marked": [_turn("I sold my car.", True)],
                     "f_b": [_turn("Explain tides.")]}, ["answer_2"], [1, 2, 20, 28]),
    _question("q3_abs", {"f_c": [_turn("Best pizza dough?")],
                         "f_d": [_turn("Knots for sailing?")]}, ["f_c"], [10, 12]),
]


class TestTheFillerPool:
    def test_no_session_that_answers_any_question_is_filler(self) -> None:
        assert answering(QUESTIONS) == {"answer_1", "answer_2", "f_marked", "f_c"}
        assert list(filler_pool(QUESTIONS)) == ["f_shared", "f_a", "f_b", "f_d"]


class TestGrowingOneHaystack:
    def test_it_keeps_its_own_sessions_and_gets_filler_inside_its_date_range(self) -> None:
        pool = filler_pool(QUESTIONS)
        grown = grow(QUESTIONS[0], pool, 5, random.Random(1))
        ids = grown["haystack_session_ids"]
        assert len(ids) == 5 and len(set(ids)) == 5
        assert {"answer_1", "f_shared", "f_a"} <= set(ids)
        assert set(ids) - {"answer_1", "f_shared", "f_a"} <= {"f_b", "f_d"}
        assert grown["answer_session_ids"] == ["answer_1"]
        dates = [parse_date(d) for d in grown["haystack_dates"]]
        assert dates == sorted(dates)
        assert min(dates) >= parse_date("2023/05/03 (Mon) 09:00")
        assert max(dates) <= parse_date("2023/05/09 (Mon) 09:00")
        # Each session keeps its own turns, wherever it now stands.
        at = dict(zip(ids, grown["haystack_sessions"], strict=True))
        assert at["answer_1"] == QUESTIONS[0]["haystack_sessions"][0]
        assert at["f_d"] == QUESTIONS[2]["haystack_sessions"][1]

    def test_the_same_seed_builds_the_same_haystack(self) -> None:
        pool = filler_pool(QUESTIONS)
        first = grow(QUESTIONS[1], pool, 6, random.Random("s"))
        assert grow(QUESTIONS[1], pool, 6, random.Random("s")) == first

    def test_more_sessions_than_the_pool_holds_are_refused(self) -> None:
        with pytest.raises(ValidationError, match="pool holds 2"):
            grow(QUESTIONS[0], filler_pool(QUESTIONS), 6, random.Random(0))


class TestBuildingATier:
    def test_the_10m_tier_adds_the_whole_pool_and_the_eval_reads_it(self, tmp_path: Path) -> None:
        src = tmp_path / "s.json.gz"
        with gzip.open(src, "wt", encoding="utf-8") as fh:
            json.dump(QUESTIONS, fh)
        out = tmp_path / "cache" / "m.json.gz"
        summary = build(src, out, tier="10m", count=len)
        assert summary["questions"] == 3 and summary["filler_pool"] == 4
        items = load(out)
        assert [i.question_id for i in items] == ["q1", "q2", "q3_abs"]
        # Its own sessions and the pool sessions it lacked: q1 3 + 2, q2 4 + 2, q3 2 + 3.
        assert [len(i.session_ids) for i in items] == [5, 6, 5]
        assert summary["sessions_per_question"] == round(16 / 3, 1)
        assert summary["tokens_per_question"] > 0

    def test_a_question_limit_keeps_the_questions_the_eval_would_run(
        self, tmp_path: Path
    ) -> None:
        src = tmp_path / "s.json"
        src.write_text(json.dumps(QUESTIONS), encoding="utf-8")
        summary = build(src, tmp_path / "m.json.gz", tier="10m", questions=1)
        assert summary["questions"] == 1
        assert [i.question_id for i in load(tmp_path / "m.json.gz")] == ["q1"]

    def test_an_unknown_tier_is_refused(self, tmp_path: Path) -> None:
        with pytest.raises(ValidationError, match="1m, 10m"):
            build(tmp_path / "s.json", tmp_path / "m.json.gz", tier="2m")
