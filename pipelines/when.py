"""Time in a query: date expressions (EN, ZH) resolved to windows, and "when" questions.

The time route of retrieval (see :mod:`sleepmem.pipelines.read.retrieve`) needs two things
from a query: the window of time it points at ("last month", "去年", "in May 2023",
"3 days ago", "before June") resolved against the moment of the search, and whether it
asks *for* a time ("when did …", "什么时候"), in which case memories that carry a date
are the better evidence. Statements are checked with the same grammar
(:func:`carries_date`).

A small grammar rather than ``dateparser``: its ``search_dates`` costs tens of
milliseconds per call, more than the whole search budget, and it reads "may" or "march"
in ordinary sentences as months. The grammar covers the calendar units (day, week,
weekend, month, season, year), weekdays and month names, counted offsets ("3 weeks ago",
"两个月前"), and the relations before / after / since around any of them. Windows are
half-open ``[start, end)`` in UTC. A named time also carries a margin (half its length past
each edge) within which a memory still counts as near it; an edge drawn by before / after /
since has none.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from sleepmem.pipelines.language import has_cjk
from sleepmem.pipelines.language.words import Literals, Phrases, is_word_char

MONTHS = {
    name: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
            ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
            ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for name in names
}
WEEKDAYS = {
    name: i
    for i, names in enumerate(
        [("monday", "mon"), ("tuesday", "tue", "tues"), ("wednesday", "wed"),
         ("thursday", "thu", "thur", "thurs"), ("friday", "fri"), ("saturday", "sat"),
         ("sunday", "sun")]
    )
    for name in names
}
SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "couple of": 2, "few": 3, "several": 3,
}
ZH_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7,
             "八": 8, "九": 9, "十": 10, "几": 3}
ZH_UNITS = {"天": "day", "日": "day", "周": "week", "星期": "week", "礼拜": "week",
            "个月": "month", "月": "month", "年": "year"}
ZH_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}

_MONTH_NAMES = "|".join(sorted(MONTHS, key=len, reverse=True))
_WEEKDAY_NAMES = "|".join(sorted(WEEKDAYS, key=len, reverse=True))
_NUMBER_WORDS = "|".join(sorted(NUMBERS, key=len, reverse=True))
_UNIT = r"(day|week|weekend|month|year|decade)s?"
_ZH_NUM = r"[0-9零一二两三四五六七八九十几]+"

_EN_OFFSET = re.compile(
    rf"\b(?P<n>\d+|{_NUMBER_WORDS})\s+{_UNIT}\s+(?:ago|back|earlier|before now)\b", re.I
)
_EN_PAST_N = re.compile(rf"\b(?:last|past|previous)\s+(?P<n>\d+|{_NUMBER_WORDS})\s+{_UNIT}\b",
                        re.I)
_EN_RELATIVE = re.compile(
    rf"\b(?P<rel>last|this|next|past|previous|coming)\s+(?P<what>{_UNIT}|{_WEEKDAY_NAMES}"
    rf"|{'|'.join(SEASONS)})\b",
    re.I,
)
_EN_DAY = re.compile(r"\b(?P<d>today|yesterday|tomorrow|tonight|the day before yesterday)\b",
                     re.I)
_EN_MONTH_DAY = re.compile(
    rf"\b(?:(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m1>{_MONTH_NAMES})\.?"
    rf"|(?P<m2>{_MONTH_NAMES})\.?\s+(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?\b)"
    rf"(?:,?\s+(?P<y>(?:19|20)\d\d))?",
    re.I,
)
# A bare month name needs a cue ("in May", "May 2023"): "may" and "march" are also words.
_EN_MONTH = re.compile(
    rf"\b(?:(?:in|during|since|before|after|until|by|of|early|late|mid)\s+(?P<m1>{_MONTH_NAMES})"
    rf"(?:,?\s+(?P<y1>(?:19|20)\d\d))?\b"
    rf"|(?P<m2>{_MONTH_NAMES}),?\s+(?P<y2>(?:19|20)\d\d)\b)",
    re.I,
)
_EN_YEAR = re.compile(r"\b(?P<y>(?:19|20)\d\d)\b")
_ISO = re.compile(r"\b(?P<y>(?:19|20)\d\d)-(?P<m>\d\d)(?:-(?P<d>\d\d))?\b")
_EN_RELATION = ("before", "after", "since", "prior to", "until", "by")
_EN_LEAD = Phrases(["before", "after", "since", "until", "by"])
_EN_WEEKDAY = re.compile(rf"\b(?:on\s+)?(?P<w>{_WEEKDAY_NAMES})s?\b", re.I)

_ZH_DAY = re.compile(r"(?P<d>大前天|前天|昨天|昨晚|今天|今晚|明天|后天)")
_ZH_OFFSET = re.compile(rf"(?P<n>{_ZH_NUM})\s*(?P<u>个月|个星期|星期|礼拜|周|天|年)(?:以?前|之前)")
_ZH_RELATIVE = re.compile(
    r"(?P<rel>上上|上|这|本|下|去|前|今|明)\s*(?:个)?(?P<u>星期|礼拜|周末|周|月|年)"
    r"(?P<w>[一二三四五六日天])?"
)
_ZH_DATE = re.compile(
    rf"(?:(?P<y>\d{{4}}|[零〇一二三四五六七八九]{{4}})\s*年)?\s*(?P<m>{_ZH_NUM})\s*月"
    rf"(?:\s*(?P<d>{_ZH_NUM})\s*[日号])?"
)
_ZH_YEAR = re.compile(r"(?P<y>\d{4})\s*年")
_ZH_RELATION_AFTER = ("之前", "以前", "前", "之后", "以后", "后", "以来")

_WHEN_EN = Phrases(["when", "what time", "what date", "what day", "which day", "which date",
                    "which year", "which month", "what year", "what month", "how long ago",
                    "how long since", "since when"])
_WHEN_ZH = Literals(("什么时候", "何时", "哪天", "哪一天", "哪年", "哪一年", "几月", "几号",
                     "多久以前", "多久前", "多长时间前"))


@dataclass(frozen=True, slots=True)
class Window:
    """A half-open stretch of time ``[start, end)`` a query points at."""

    start: datetime
    end: datetime
    expression: str
    # How far past its edges a memory still counts as near the time the query names: people
    # misplace "a month ago" by weeks, and "in May" by a few days. Half the window's length
    # for a named time; none for an edge the query drew itself ("before June", "since May").
    margin: timedelta = timedelta(0)

    def contains(self, t: datetime) -> bool:
        return self.start <= _aware(t) < self.end

    def widened(self) -> tuple[datetime, datetime]:
        """The window with its margin on both sides."""
        return self.start - self.margin, self.end + self.margin

    def place(self, t: datetime) -> Literal["inside", "near", "outside"]:
        """Where ``t`` falls: inside the window, within its margin, or beyond both."""
        t = _aware(t)
        if self.start <= t < self.end:
            return "inside"
        start, end = self.widened()
        return "near" if start <= t < end else "outside"


def _aware(t: datetime) -> datetime:
    """A naive time is UTC (as SQLite hands ``valid_from`` back). The twin of
    ``decay.aware``, kept here so the grammar imports no database or numeric library."""
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t


def asks_when(query: str) -> bool:
    """The question asks for a time ("when did …", "什么时候 …")."""
    return bool(_WHEN_EN.search(query) or _WHEN_ZH.search(query))


# What a text must hold for each pattern to match it, tested first: a "when" question
# asks this of every candidate, and the thirteen patterns scanned every text whole
# (about 90 us a turn, most of such a search's time). A guard only skips a pattern
# that could not match, so the verdicts are the patterns' own.
_NEEDS_DIGIT = (_EN_MONTH_DAY, _ISO, _EN_YEAR)
_GUARDED = (
    (("today", "yesterday", "tomorrow", "tonight"), _EN_DAY),
    (("ago", "back", "earlier", "before now"), _EN_OFFSET),
    (("last", "this", "next", "past", "previous", "coming"), _EN_RELATIVE),
    (tuple({name[:3] for name in MONTHS}), _EN_MONTH),
    (tuple({name[:3] for name in WEEKDAYS}), _EN_WEEKDAY),
)
_ZH_PATTERNS = (_ZH_DAY, _ZH_OFFSET, _ZH_RELATIVE, _ZH_DATE, _ZH_YEAR)


def carries_date(text: str) -> bool:
    """The text names a time: a relative day or unit, a weekday, a dated month, a year."""
    if any(c.isdecimal() for c in text) and any(p.search(text) for p in _NEEDS_DIGIT):
        return True
    low = text.lower()
    if any(p.search(text) for words, p in _GUARDED if any(w in low for w in words)):
        return True
    # Every Chinese pattern needs a Han character (天, 周, 月, 年, ...).
    return has_cjk(text) and any(p.search(text) for p in _ZH_PATTERNS)


def resolve(query: str, now: datetime) -> Window | None:
    """The window the query's first date expression points at, relative to ``now``.

    "before X" is everything up to X's start, "after X" from X's end up to ``now``,
    "since X" from X's start up to ``now``; a bare X is X itself.
    """
    now = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    for grammar, relation in ((_EN_GRAMMAR, _en_relation), (_ZH_GRAMMAR, _zh_relation)):
        for pattern, build in grammar:
            m = pattern.search(query)
            if m is None:
                continue
            span = build(m, now, today)
            if span is None:
                continue
            return _relate(span, relation(query, m, pattern), now, m.group(0))
    return None


# -- EN -----------------------------------------------------------------------------


def _count(word: str) -> int:
    return int(word) if word.isdigit() else NUMBERS.get(word.lower(), 1)


def _en_relation(query: str, m: re.Match[str], _pattern: re.Pattern[str]) -> str:
    """"before X" / "X after": the relation word just before the expression or leading it."""
    before = query[: m.start()].rstrip().lower()
    for word in _EN_RELATION:
        at = len(before) - len(word)
        if before.endswith(word) and (at == 0 or not is_word_char(before[at - 1])):
            return word
    return (_EN_LEAD.opening(m.group(0)) or "").lower()


def _en_offset(m: re.Match[str], now: datetime, today: datetime) -> tuple[datetime, datetime]:
    # "3 weeks ago" is rarely exact: the unit it names, widened by one unit each side.
    n = _count(m.group("n"))
    unit = m.group(2).lower()
    return _unit_span(unit, _shift(today, unit, -n - 1))[0], _unit_span(
        unit, _shift(today, unit, -n + 1))[1]


def _en_past_n(m: re.Match[str], now: datetime, today: datetime) -> tuple[datetime, datetime]:
    n = _count(m.group("n"))
    unit = m.group(2).lower()
    return _shift(today, unit, -n), now + timedelta(seconds=1)


def _en_day(m: re.Match[str], now: datetime, today: datetime) -> tuple[datetime, datetime]:
    offset = {"today": 0, "tonight": 0, "yesterday": -1, "tomorrow": 1,
              "the day before yesterday": -2}[m.group("d").lower()]
    start = today + timedelta(days=offset)
    return start, start + timedelta(days=1)


def _en_relative(
    m: re.Match[str], now: datetime, today: datetime
) -> tuple[datetime, datetime] | None:
    rel = m.group("rel").lower()
    what = m.group("what").lower()
    step = {"last": -1, "past": -1, "previous": -1, "this": 0, "next": 1, "coming": 1}[rel]
    if what in WEEKDAYS:
        return _weekday(today, WEEKDAYS[what], step)
    if what in SEASONS:
        first = SEASONS[what]
        year = today.year + step
        start = datetime(year, first, 1, tzinfo=UTC)
        return start, _add_months(start, 3)
    unit = what.rstrip("s")
    anchor = _shift(today, unit, step)
    return _unit_span(unit, anchor)


def _iso(m: re.Match[str], now: datetime, today: datetime) -> tuple[datetime, datetime] | None:
    try:
        y, mo = int(m.group("y")), int(m.group("m"))
        if m.group("d"):
            start = datetime(y, mo, int(m.group("d")), tzinfo=UTC)
            return start, start + timedelta(days=1)
        start = datetime(y, mo, 1, tzinfo=UTC)
    except ValueError:
        return None
    return start, _add_months(start, 1)


def _en_month_day(
    m: re.Match[str], now: datetime, today: datetime
) -> tuple[datetime, datetime] | None:
    month = MONTHS[(m.group("m1") or m.group("m2")).lower()]
    day = int(m.group("d1") or m.group("d2"))
    year = int(m.group("y")) if m.group("y") else _latest_year(today, month, day)
    try:
        start = datetime(year, month, day, tzinfo=UTC)
    except ValueError:
        return None
    return start, start + timedelta(days=1)


def _en_month(m: re.Match[str], now: datetime, today: datetime) -> tuple[datetime, datetime]:
    month = MONTHS[(m.group("m1") or m.group("m2")).lower()]
    y = m.group("y1") or m.group("y2")
    year = int(y) if y else _latest_year(today, month, 1)
    start = datetime(year, month, 1, tzinfo=UTC)
    return start, _add_months(start, 1)


def _en_year(m: re.Match[str], now: datetime, today: datetime) -> tuple[datetime, datetime]:
    y = int(m.group("y"))
    return datetime(y, 1, 1, tzinfo=UTC), datetime(y + 1, 1, 1, tzinfo=UTC)


# -- ZH -----------------------------------------------------------------------------


def _zh_int(text: str) -> int:
    if text.isdigit():
        return int(text)
    if len(text) == 4 and all(c in ZH_DIGITS or c == "〇" for c in text):  # 二〇二三
        return int("".join(str(ZH_DIGITS.get(c, 0)) for c in text))
    total, current = 0, 0
    for c in text:
        v = ZH_DIGITS.get(c, 0)
        if v == 10:
            total += (current or 1) * 10
            current = 0
        else:
            current = v
    return total + current


def _zh_relation(query: str, m: re.Match[str], pattern: re.Pattern[str]) -> str:
    """"X之前 / X以后 / X以来": the relation follows the expression (an offset has its own)."""
    rest = query[m.end():].lstrip() if pattern is not _ZH_OFFSET else ""
    word = next((w for w in _ZH_RELATION_AFTER if rest.startswith(w)), "")
    if not word:
        return ""
    return "before" if "前" in word else "since" if word == "以来" else "after"


def _zh_offset(m: re.Match[str], now: datetime, today: datetime) -> tuple[datetime, datetime]:
    n = _zh_int(m.group("n"))
    unit = ZH_UNITS.get(m.group("u").removeprefix("个"), ZH_UNITS.get(m.group("u"), "day"))
    return _unit_span(unit, _shift(today, unit, -n - 1))[0], _unit_span(
        unit, _shift(today, unit, -n + 1))[1]


def _zh_day(m: re.Match[str], now: datetime, today: datetime) -> tuple[datetime, datetime]:
    offset = {"大前天": -3, "前天": -2, "昨天": -1, "昨晚": -1, "今天": 0, "今晚": 0,
              "明天": 1, "后天": 2}[m.group("d")]
    start = today + timedelta(days=offset)
    return start, start + timedelta(days=1)


def _zh_relative(
    m: re.Match[str], now: datetime, today: datetime
) -> tuple[datetime, datetime] | None:
    rel, unit_zh, wd = m.group("rel"), m.group("u"), m.group("w")
    step = {"上上": -2, "上": -1, "去": -1, "前": -2, "这": 0, "本": 0, "今": 0, "下": 1,
            "明": 1}[rel]
    if unit_zh == "年":
        if rel in ("上", "这", "本", "下", "上上"):
            return None  # 上年 / 本年 are rare; 去年 / 今年 / 明年 / 前年 are the forms
    elif rel in ("去", "前", "今", "明"):
        return None  # 去月 is not a word; 前周 would be ambiguous
    if unit_zh in ("星期", "礼拜", "周") and wd:
        return _weekday(today, ZH_WEEKDAYS[wd], step, same_week=True)
    unit = {"星期": "week", "礼拜": "week", "周": "week", "周末": "weekend", "月": "month",
            "年": "year"}[unit_zh]
    return _unit_span(unit, _shift(today, unit, step))


def _zh_date(m: re.Match[str], now: datetime, today: datetime) -> tuple[datetime, datetime] | None:
    month = _zh_int(m.group("m"))
    if not 1 <= month <= 12:
        return None
    day = _zh_int(m.group("d")) if m.group("d") else None
    year = _zh_int(m.group("y")) if m.group("y") else _latest_year(today, month, day or 1)
    try:
        if day:
            start = datetime(year, month, day, tzinfo=UTC)
            return start, start + timedelta(days=1)
        start = datetime(year, month, 1, tzinfo=UTC)
    except ValueError:
        return None
    return start, _add_months(start, 1)


def _zh_year(m: re.Match[str], now: datetime, today: datetime) -> tuple[datetime, datetime]:
    y = int(m.group("y"))
    return datetime(y, 1, 1, tzinfo=UTC), datetime(y + 1, 1, 1, tzinfo=UTC)


# -- calendar -----------------------------------------------------------------------


def _relate(span: tuple[datetime, datetime], rel: str, now: datetime, text: str) -> Window:
    start, end = span
    far_past = datetime(1970, 1, 1, tzinfo=UTC)
    if rel in ("before", "prior to", "until", "by"):
        return Window(far_past, start, f"{rel} {text}")
    if rel == "after":
        return Window(end, max(end, now) + timedelta(seconds=1), f"{rel} {text}")
    if rel == "since":
        return Window(start, max(end, now) + timedelta(seconds=1), f"{rel} {text}")
    return Window(start, end, text, margin=(end - start) / 2)


# Each grammar is tried in order; the first expression that matches gives the window.
_Span = tuple[datetime, datetime]
_Builder = Callable[[re.Match[str], datetime, datetime], _Span | None]
_EN_GRAMMAR: tuple[tuple[re.Pattern[str], _Builder], ...] = (
    (_EN_OFFSET, _en_offset),
    (_EN_PAST_N, _en_past_n),
    (_EN_DAY, _en_day),
    (_EN_RELATIVE, _en_relative),
    (_ISO, _iso),
    (_EN_MONTH_DAY, _en_month_day),
    (_EN_MONTH, _en_month),
    (_EN_YEAR, _en_year),
)
_ZH_GRAMMAR: tuple[tuple[re.Pattern[str], _Builder], ...] = (
    (_ZH_OFFSET, _zh_offset),
    (_ZH_DAY, _zh_day),
    (_ZH_RELATIVE, _zh_relative),
    (_ZH_DATE, _zh_date),
    (_ZH_YEAR, _zh_year),
)


def _add_months(t: datetime, n: int) -> datetime:
    index = t.year * 12 + (t.month - 1) + n
    return t.replace(year=index // 12, month=index % 12 + 1, day=1)


def _shift(today: datetime, unit: str, n: int) -> datetime:
    unit = unit.rstrip("s")
    if unit == "day":
        return today + timedelta(days=n)
    if unit in ("week", "weekend"):
        return today + timedelta(weeks=n)
    if unit == "month":
        return _add_months(today.replace(day=1), n)
    if unit == "decade":
        return today.replace(year=today.year + 10 * n, month=1, day=1)
    return today.replace(year=today.year + n, month=1, day=1)


def _unit_span(unit: str, anchor: datetime) -> tuple[datetime, datetime]:
    """The calendar unit holding ``anchor``: its day, ISO week (Mon-Sun), weekend, month,
    year or decade."""
    unit = unit.rstrip("s")
    if unit == "day":
        return anchor, anchor + timedelta(days=1)
    if unit == "week":
        start = anchor - timedelta(days=anchor.weekday())
        return start, start + timedelta(weeks=1)
    if unit == "weekend":
        start = anchor - timedelta(days=anchor.weekday()) + timedelta(days=5)
        return start, start + timedelta(days=2)
    if unit == "month":
        start = anchor.replace(day=1)
        return start, _add_months(start, 1)
    if unit == "decade":
        start = anchor.replace(year=anchor.year - anchor.year % 10, month=1, day=1)
        return start, start.replace(year=start.year + 10)
    start = anchor.replace(month=1, day=1)
    return start, start.replace(year=start.year + 1)


def _weekday(
    today: datetime, weekday: int, step: int, *, same_week: bool = False
) -> tuple[datetime, datetime]:
    """"last Saturday": the latest Saturday before today; "this"/"next" forward. With
    ``same_week`` (上周六) the step counts calendar weeks instead."""
    if same_week:
        monday = today - timedelta(days=today.weekday()) + timedelta(weeks=step)
        day = monday + timedelta(days=weekday)
    elif step < 0:
        back = (today.weekday() - weekday) % 7 or 7
        day = today - timedelta(days=back)
    else:
        ahead = (weekday - today.weekday()) % 7
        day = today + timedelta(days=ahead + (7 if step > 0 and ahead == 0 else 0))
    return day, day + timedelta(days=1)


def _latest_year(today: datetime, month: int, day: int) -> int:
    """A month without a year means its latest occurrence not after today."""
    return today.year if (month, day) <= (today.month, today.day) else today.year - 1
