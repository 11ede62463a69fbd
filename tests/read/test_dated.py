"""A text names a time (``carries_date``) exactly when one of the date patterns finds one
in it: the cheap tests run first (a digit, a Han character, one of a pattern's words)
only skip patterns that could not match. Checked against every pattern scanned whole,
over English and Chinese sentences with and without dates, and over LoCoMo's turns
when the shared data is present."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sleepmem.pipelines import when

EVERY_PATTERN = (
    when._EN_DAY, when._EN_OFFSET, when._EN_RELATIVE, when._EN_MONTH_DAY, when._EN_MONTH,
    when._ISO, when._EN_YEAR, when._EN_WEEKDAY, when._ZH_DAY, when._ZH_OFFSET,
    when._ZH_RELATIVE, when._ZH_DATE, when._ZH_YEAR,
)
LOCOMO = Path(__file__).resolve().parents[3] / "shared/data/locomo/locomo_dev8.json"

SENTENCES = [
    "We moved to Lisbon in May 2023.", "I'll see you on Friday.", "That was 2 weeks ago.",
    "The party is on the 12th of March.", "She ran the 2020 marathon.", "TODAY was long.",
    "Back in MAY we went camping.", "Next weekend I'm free.", "A few days back it rained.",
    "Tonight we cook.", "I may march in the parade.", "The market sells sunny mangoes.",
    "Call me at 555 0199.", "The meeting moved to 2024-03-05.", "Since June, I have run.",
    "Wed. is fine.", "I read a book about the past.", "Nothing about time here at all.",
    "我上个月搬到苏州了。", "2023年5月我们结婚了。", "三天前下了雨。", "昨天我去了超市。",
    "我们下周见。", "上星期三他来了。", "去年夏天很热。", "我喜欢吃面条。", "他在华星公司上班。",
    "5月12日是她的生日。", "两个星期前我换了工作。",
]


def scanned_whole(text: str) -> bool:
    return any(p.search(text) for p in EVERY_PATTERN)


@pytest.mark.parametrize("text", SENTENCES)
def test_the_verdict_is_every_patterns_own(text: str) -> None:
    assert when.carries_date(text) == scanned_whole(text)


def test_both_verdicts_occur_among_the_sentences() -> None:
    verdicts = {when.carries_date(t) for t in SENTENCES}
    assert verdicts == {True, False}


@pytest.mark.skipif(not LOCOMO.exists(), reason="shared LoCoMo data not present")
def test_every_locomo_turn_gets_the_verdict_of_every_pattern() -> None:
    texts = [turn["text"] for conv in json.loads(LOCOMO.read_text())
             for key, turns in conv["conversation"].items() if isinstance(turns, list)
             for turn in turns]
    assert len(texts) > 1000
    assert [when.carries_date(t) for t in texts] == [scanned_whole(t) for t in texts]
