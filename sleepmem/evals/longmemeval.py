"""LongMemEval session recall: does search reach the sessions that hold each answer?

Each question becomes one user scope (tenant ``longmemeval``, agent ``eval``, user =
question id) holding its haystack sessions: every turn is emitted through the SDK with
its session's date as event time (plus the turn index in seconds) and its session id in
meta, user turns as ``user`` and assistant turns as ``assistant`` messages. After
consolidation the question is searched in that scope on its ``question_date`` (the search's
clock reads that day, so "ten days ago" counts back from when it was asked, as it would for
the user who asked it; the BM25 baseline has no notion of time); sessions are ranked by the best
card whose provenance reaches them (cards in rank order, each card's provenance
sessions in order, first mention wins). Metrics are the paper's session-level ones over
non-abstention questions: recall_all@k and ndcg_any@k (see :mod:`sleepmem.evals.metrics`).

Relevance is ``answer_session_ids``, for us and for the baselines alike. The paper's
script instead drops answer sessions whose *user* turns hold no evidence, which makes
recall_all vacuously 1 for most single-session-assistant questions; ``baseline_official``
reproduces that script exactly (flat BM25, whitespace tokens, its labels) as a check
that this harness matches the published numbers.

The same-run baselines: at @5/@10, the paper's flat BM25 at session granularity (one
document per session, its user turns joined by spaces, BM25Okapi from ``rank-bm25``, here
with sleepmem's own lexical tokenizer so the baseline is as strong as our lexical half) and
sessions ranked by their best raw turn under BM25 + dense (RRF). At each token budget
(the headline), sleepmem's answer within ``max_tokens`` against every raw-turn baseline of
:mod:`sleepmem.evals.baselines` packed into that answer's own cl100k tokens: each scores
recall_all and ndcg_any over the sessions its text reaches, in the order it reaches them.
Each search format asked for (``cards``, ``lines``, ``mixed``) is scored so, against the
baselines in its own tokens; the first is the report's headline.

The report also says what the scopes cost: wall time and peak resident memory of ingest
and consolidation, events/s, the store's size on disk and search p50/p95; with the larger
haystacks of ``scripts/build_longmemeval_m.py`` these are the 1M- and 10M-token figures.
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from sleepmem.core.errors import ValidationError
from sleepmem.core.logs import get_logger
from sleepmem.core.settings import Settings
from sleepmem.evals.baselines import (
    BASELINES,
    BUDGET_K,
    DEFAULT_BUDGETS,
    NAMES,
    SYSTEM,
    Baselines,
    RawTurns,
)
from sleepmem.evals.extra import require
from sleepmem.evals.harness import (
    count_memories,
    count_tokens,
    disk_usage,
    drain_all,
    emit_all,
    eval_instance,
    peak_rss_mb,
    reset_peak_rss,
    tokenizer_name,
)
from sleepmem.evals.metrics import (
    mean,
    ndcg_any,
    percentile,
    rank_by_first_mention,
    recall_all,
)
from sleepmem.models import ConflictGroup, MemoryCard, Scope, SearchFormat, card_sides
from sleepmem.pipelines.lexical import tokens
from sleepmem.pipelines.write.consolidate import ConsolidationReport, consolidate_scope
from sleepmem.reader import Reader, build_request
from sleepmem.resources import Resources
from sleepmem.services import run_consolidation

log = get_logger("sleepmem.evals.longmemeval")
T = TypeVar("T")

TENANT = "longmemeval"
AGENT = "eval"
KS = (5, 10)
SEARCH_K = 50
DEFAULT_FORMATS: tuple[SearchFormat, ...] = ("cards",)
_DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"


@dataclass(frozen=True, slots=True)
class Item:
    question_id: str
    question_type: str
    question: str
    session_ids: list[str]
    dates: list[datetime]
    sessions: list[list[dict[str, Any]]]
    answer_sessions: frozenset[str]
    # When the question is asked: "two weeks ago" and "last Saturday" count back from it.
    asked: datetime | None = None

    @property
    def abstention(self) -> bool:
        return self.question_id.endswith("_abs")

    @property
    def scope(self) -> Scope:
        return Scope(tenant=TENANT, agent=AGENT, user=self.question_id)

    def event_id(self, session_index: int, turn_index: int) -> str:
        return f"{self.question_id}.{session_index}.{turn_index}"

    def official_relevant(self) -> frozenset[str]:
        """The paper script's labels: answer sessions with evidence in a user turn."""
        return frozenset(
            sid
            for sid, turns in zip(self.session_ids, self.sessions, strict=True)
            if "answer" in sid
            and any(t.get("has_answer") for t in turns if t.get("role") == "user")
        )


def parse_date(text: str) -> datetime:
    """'2023/04/24 (Mon) 12:02' as an aware UTC time."""
    try:
        return datetime.strptime(text.strip(), _DATE_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise ValidationError("haystack_dates", f"not a LongMemEval date: {text!r}") from None


def load(path: Path) -> list[Item]:
    """Read the JSON (gzip or plain) into items; abstention questions are kept, marked."""
    path = Path(path)
    opener: Callable[..., Any] = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        raw = json.load(fh)
    return [
        Item(
            question_id=str(q["question_id"]),
            question_type=str(q["question_type"]),
            question=str(q["question"]),
            session_ids=[str(s) for s in q["haystack_session_ids"]],
            dates=[parse_date(d) for d in q["haystack_dates"]],
            sessions=q["haystack_sessions"],
            answer_sessions=frozenset(str(s) for s in q["answer_session_ids"]),
            asked=parse_date(q["question_date"]) if q.get("question_date") else None,
        )
        for q in raw
    ]


def events_of(item: Item) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The item's turns as events, and event id → session id."""
    scope = item.scope
    events: list[dict[str, Any]] = []
    session_of: dict[str, str] = {}
    for si, (sid, start, turns) in enumerate(
        zip(item.session_ids, item.dates, item.sessions, strict=True)
    ):
        for ti, turn in enumerate(turns):
            content = str(turn.get("content", "")).strip()
            if not content:
                continue
            eid = item.event_id(si, ti)
            session_of[eid] = sid
            events.append(
                {
                    "event_id": eid,
                    "tenant": scope.tenant,
                    "agent": scope.agent,
                    "user": scope.user,
                    "kind": "message",
                    "role": "assistant" if turn.get("role") == "assistant" else "user",
                    "content": content,
                    "at": start + timedelta(seconds=ti),
                    "meta": {"session_id": sid, "turn": ti},
                }
            )
    return events, session_of


def bm25_ranking(
    item: Item, tokenize: Callable[[str], list[str]] = tokens
) -> list[str]:
    """Flat BM25 over sessions represented by their user turns (the paper's baseline)."""
    corpus = [
        tokenize(" ".join(str(t["content"]) for t in turns if t.get("role") == "user"))
        for turns in item.sessions
    ]
    scores = require("rank_bm25").BM25Okapi(corpus).get_scores(tokenize(item.question))
    order = sorted(range(len(corpus)), key=lambda i: (-float(scores[i]), i))
    return [item.session_ids[i] for i in order]


@dataclass(slots=True)
class Stages:
    """Consolidation's cost stage by stage, summed over every scope the run consolidated:
    what each stage costs per 1,000 events is what shows whether it grows with the scope
    (the 1M and 10M haystacks) or only with the events it reads."""

    events: int = 0
    seconds: float = 0.0
    by_stage: dict[str, float] = field(default_factory=dict)

    def add(self, report: ConsolidationReport, seconds: float) -> None:
        self.events += report.events
        self.seconds += seconds
        for name, s in report.stage_seconds.items():
            self.by_stage[name] = self.by_stage.get(name, 0.0) + s

    def summary(self) -> dict[str, Any]:
        per_k = 1000 / self.events if self.events else 0.0
        return {
            "events": self.events,
            "seconds": round(self.seconds, 2),
            "events_per_s": round(self.events / self.seconds, 1) if self.seconds else 0.0,
            "seconds_per_1k_events": {
                name: round(s * per_k, 3) for name, s in sorted(self.by_stage.items())
            },
        }


def ingest_item(res: Resources, item: Item, events: list[dict[str, Any]],
                stages: Stages) -> int:
    """emit → drain → consolidate the item's scope through the consolidation task's entry
    point, its stage seconds added to ``stages``."""
    n = emit_all(res, events)
    drain_all(res)
    t0 = time.perf_counter()
    report = run_consolidation(res, scope_key=item.scope.key, pipeline=consolidate_scope)
    stages.add(report, time.perf_counter() - t0)
    return n


def _whitespace(text: str) -> list[str]:
    return text.split(" ")


def _card_sessions(card: MemoryCard | ConflictGroup, session_of: dict[str, str]) -> list[str]:
    return [session_of[e] for s in card_sides(card) for e in (s.provenance or [])
            if e in session_of]


def _metrics(ranked: Sequence[str], relevant: frozenset[str], prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for k in KS:
        out[f"{prefix}recall_all_at_{k}"] = recall_all(ranked, set(relevant), k)
        out[f"{prefix}ndcg_any_at_{k}"] = ndcg_any(ranked, set(relevant), k)
    return out


def ask(res: Resources, item: Item, *, k: int = SEARCH_K, max_tokens: int | None = None,
        format: SearchFormat = "cards") -> list[MemoryCard | ConflictGroup]:
    """The question searched in its scope on its question date, as the user asked it: the
    search's "now" is that day, and the clock goes back to what it was afterwards."""
    request = build_request(item.question, scope=item.scope, k=k, with_provenance=True,
                            max_tokens=max_tokens, format=format)
    asked, before = item.asked, res.clock
    if asked is not None:
        res.clock = lambda: asked
    try:
        return Reader(res).search(request).cards
    finally:
        res.clock = before


def _entry_text(card: MemoryCard | ConflictGroup) -> str:
    return "\n".join(s.statement for s in card_sides(card))


def _at_budget(ranked: Sequence[str], relevant: frozenset[str]) -> tuple[float, float]:
    """recall_all and ndcg_any of the sessions an answer within a budget reaches, in the
    order it reaches them: whatever it reaches counts, and nothing else."""
    depth = max(len(ranked), len(relevant))
    return recall_all(ranked, set(relevant), depth), ndcg_any(ranked, set(relevant), depth)


def _score_item(
    res: Resources, item: Item, events: list[dict[str, Any]], session_of: dict[str, str],
    budgets: Sequence[int], searches_ms: dict[str, list[float]],
    formats: Sequence[SearchFormat] = DEFAULT_FORMATS,
) -> dict[str, float]:
    """The row of one question: the first format's @k metrics unprefixed, each format's
    as ``{format}:{metric}``, and each format's answer at each budget with the baselines
    in its tokens as ``{format}|{budget}|{system}|{metric}``."""
    def timed(kind: str, **kw: Any) -> list[MemoryCard | ConflictGroup]:
        t0 = time.perf_counter()
        cards = ask(res, item, **kw)
        searches_ms.setdefault(kind, []).append((time.perf_counter() - t0) * 1000)
        return cards

    by_format: dict[str, list[str]] = {}
    for fmt in formats:
        cards = timed(f"k={SEARCH_K}", format=fmt)
        by_format[fmt] = rank_by_first_mention(_card_sessions(c, session_of) for c in cards)
    ranked = by_format[formats[0]]
    raw = RawTurns.build([str(e["content"]) for e in events], res.embedder)
    turn_session = [session_of[str(e["event_id"])] for e in events]
    base = Baselines.of(raw, item.question, res.embedder.embed([item.question],
                                                               kind="query")[0], count_tokens)
    row = {
        **_metrics(ranked, item.answer_sessions),
        **_metrics(bm25_ranking(item), item.answer_sessions, "baseline_"),
        **_metrics(rank_by_first_mention([turn_session[i]] for i in base.ranked["hybrid"]),
                   item.answer_sessions, "hybrid_"),
        **_metrics(bm25_ranking(item, _whitespace), item.official_relevant(), "official_"),
        "sessions_reached": float(len(ranked)),
    }
    for name, sessions_of in by_format.items():
        row.update(_metrics(sessions_of, item.answer_sessions, f"{name}:"))
    for fmt in formats:
        for b in budgets:
            shown = timed("budget", k=BUDGET_K, max_tokens=b, format=fmt)
            tokens = sum(count_tokens(_entry_text(c)) for c in shown)
            answers = {SYSTEM: (rank_by_first_mention(_card_sessions(c, session_of)
                                                      for c in shown), tokens)}
            for name in NAMES:
                packed = base.packed(name, tokens)
                answers[name] = (
                    rank_by_first_mention([turn_session[i]] for i in packed.turns),
                    packed.tokens)
            for name, (sessions, spent) in answers.items():
                r_all, ndcg = _at_budget(sessions, item.answer_sessions)
                row[f"{fmt}|{b}|{name}|recall_all"] = r_all
                row[f"{fmt}|{b}|{name}|ndcg_any"] = ndcg
                row[f"{fmt}|{b}|{name}|tokens"] = float(spent)
                row[f"{fmt}|{b}|{name}|sessions"] = float(len(sessions))
    return row


METRICS = tuple(f"{m}_at_{k}" for k in KS for m in ("recall_all", "ndcg_any"))
AT_BUDGET = ("recall_all", "ndcg_any", "tokens", "sessions")


def _at_tokens(rows: list[dict[str, float]], budgets: Sequence[int],
               fmt: str) -> dict[str, Any]:
    return {
        str(b): {
            name: {m: round(mean([r[f"{fmt}|{b}|{name}|{m}"] for r in rows]), 4)
                   for m in AT_BUDGET}
            for name in (SYSTEM, *NAMES)
        }
        for b in budgets
    }


def _summary(rows: list[dict[str, float]], budgets: Sequence[int],
             formats: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"questions": len(rows)}
    out["at_tokens"] = _at_tokens(rows, budgets, formats[0])
    for prefix in ("", "baseline_", "hybrid_"):
        for m in METRICS:
            out[prefix + m] = round(mean([r[prefix + m] for r in rows]), 4)
    if len(formats) > 1:
        out["by_format"] = {
            fmt: {"at_tokens": _at_tokens(rows, budgets, fmt),
                  **{m: round(mean([r[f"{fmt}:{m}"] for r in rows]), 4) for m in METRICS}}
            for fmt in formats
        }
    return out


def spread(items: list[T], limit: int | None) -> list[T]:
    """``limit`` items evenly spaced over the list: the file is sorted by question type, so
    a quick run sees every type instead of only the first one."""
    if limit is None or limit >= len(items):
        return items
    if limit < 1:
        raise ValidationError("limit", "must be at least 1")
    step = len(items) / limit
    return [items[int(i * step)] for i in range(limit)]


def run_longmemeval(
    path: Path, *, settings: Settings, limit: int | None = None, per_question: bool = False,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    formats: Sequence[SearchFormat] = DEFAULT_FORMATS,
) -> dict[str, Any]:
    """Session recall of sleepmem and of the same-run baselines on the same questions: at
    @5/@10 against flat BM25 over sessions and the hybrid turn ranking, and at each token
    budget against every raw-turn baseline packed into sleepmem's own tokens. With it, what
    the scopes cost: ingest and consolidation time, events/s, peak memory, the store's size
    on disk and search latency.

    ``limit`` runs that many questions spread over the file (the report's ``questions``
    says how many ran); ``per_question`` adds each question's metrics (ids and numbers
    only) for error analysis.
    """
    if any(b < 1 for b in budgets):
        raise ValidationError("budgets", "each token budget must be at least 1")
    if not formats:
        raise ValidationError("formats", "name at least one search format")
    budgets = sorted(set(budgets))
    formats = list(dict.fromkeys(formats))
    started = time.perf_counter()
    items = load(path)
    abstention = sum(i.abstention for i in items)
    items = spread([i for i in items if not i.abstention], limit)
    rows: list[tuple[str, dict[str, float]]] = []
    detail: list[dict[str, Any]] = []
    events = memories = 0
    ingest_s = 0.0
    searches_ms: dict[str, list[float]] = {}
    stages = Stages()
    reset_peak_rss()
    with eval_instance(settings, prefix="sleepmem-longmemeval-") as res:
        for item in items:
            t0 = time.perf_counter()
            batch, session_of = events_of(item)
            events += ingest_item(res, item, batch, stages)
            ingest_s += time.perf_counter() - t0
            written = count_memories(res, tenant=TENANT) - memories
            memories += written
            row = _score_item(res, item, batch, session_of, budgets, searches_ms, formats)
            rows.append((item.question_type, row))
            detail.append(
                {"question_id": item.question_id, "question_type": item.question_type, **row}
            )
            log.info(
                "longmemeval_question",
                question_id=item.question_id, question_type=item.question_type,
                events=len(batch), memories=written,
                recall_all_at_5=row["recall_all_at_5"],
                baseline_recall_all_at_5=row["baseline_recall_all_at_5"],
                sessions_reached=int(row["sessions_reached"]),
                seconds=round(time.perf_counter() - t0, 2),
            )
        embedder_name = res.embedder.name
        disk = disk_usage(res.settings.data_dir)
    peak = peak_rss_mb()
    all_rows = [r for _t, r in rows]
    official = {
        m: round(mean([r["official_" + m] for r in all_rows]), 4) for m in METRICS
    }
    report: dict[str, Any] = {
        "dataset": Path(path).name,
        "systems": {
            SYSTEM: "sleepmem's search",
            "baseline": "flat BM25 over sessions (their user turns), at k",
            "hybrid": "sessions by their best turn under BM25 + dense (RRF) over the raw "
                      "turns, at k",
            **BASELINES,
        },
        "format": formats[0],
        "formats": formats,
        **_summary(all_rows, budgets, formats),
        "by_type": {
            t: _summary([r for qt, r in rows if qt == t], budgets, formats)
            for t in sorted({qt for qt, _r in rows})
        },
        "baseline_official": {
            "definition": "flat BM25, user turns, whitespace tokens, paper-script labels",
            **official,
        },
        "sessions_reached": round(mean([r["sessions_reached"] for r in all_rows]), 1),
        "skipped_abstention": abstention,
        "events": events,
        "events_per_question": round(events / len(items), 1) if items else 0.0,
        "memories": memories,
        "scale": {
            # emit, drain and consolidation of every question's scope, run to completion
            # To the hundredth, as consolidation's own seconds are: it is part of this time.
            "ingest_seconds": round(ingest_s, 2),
            "events_per_s": round(events / ingest_s, 1) if ingest_s else 0.0,
            "peak_rss_mb": peak,
            # Consolidation alone, stage by stage: seconds per 1,000 events consolidated.
            "consolidation": stages.summary(),
            "disk_mb": {k: round(v / 1e6, 1) for k, v in disk.items()},
            # In-process, per kind of search: the one for SEARCH_K entries, and those
            # at a token budget.
            "search_ms": {
                kind: {
                    "searches": len(ms),
                    "p50": round(percentile(ms, 50), 1),
                    "p95": round(percentile(ms, 95), 1),
                }
                for kind, ms in searches_ms.items()
            },
        },
        "embedder": embedder_name,
        "extractor": settings.extractor,
        "tokenizer": tokenizer_name(),
        "seconds": round(time.perf_counter() - started, 1),
    }
    if per_question:
        report["per_question"] = detail
    return report
