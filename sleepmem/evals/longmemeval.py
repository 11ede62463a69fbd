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

The same-run baseline is the paper's flat BM25 at session granularity: one document per
session, its user turns joined by spaces, ranked by BM25Okapi (``rank-bm25``), here with
sleepmem's own lexical tokenizer so the baseline is as strong as our lexical half.
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sleepmem.core.errors import ValidationError
from sleepmem.core.logs import get_logger
from sleepmem.core.settings import Settings
from sleepmem.evals.extra import require
from sleepmem.evals.harness import count_memories, eval_instance, ingest
from sleepmem.evals.metrics import mean, ndcg_any, rank_by_first_mention, recall_all
from sleepmem.models import ConflictGroup, MemoryCard, Scope, card_sides
from sleepmem.pipelines.lexical import tokens
from sleepmem.reader import Reader, build_request
from sleepmem.resources import Resources

log = get_logger("sleepmem.evals.longmemeval")

TENANT = "longmemeval"
AGENT = "eval"
KS = (5, 10)
SEARCH_K = 50
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


def ask(res: Resources, item: Item) -> list[MemoryCard | ConflictGroup]:
    """The question searched in its scope on its question date, as the user asked it: the
    search's "now" is that day, and the clock goes back to what it was afterwards."""
    request = build_request(item.question, scope=item.scope, k=SEARCH_K, with_provenance=True)
    asked, before = item.asked, res.clock
    if asked is not None:
        res.clock = lambda: asked
    try:
        return Reader(res).search(request).cards
    finally:
        res.clock = before


def _score_item(res: Resources, item: Item, session_of: dict[str, str]) -> dict[str, float]:
    cards = ask(res, item)
    ranked = rank_by_first_mention(_card_sessions(c, session_of) for c in cards)
    return {
        **_metrics(ranked, item.answer_sessions),
        **_metrics(bm25_ranking(item), item.answer_sessions, "baseline_"),
        **_metrics(bm25_ranking(item, _whitespace), item.official_relevant(), "official_"),
        "sessions_reached": float(len(ranked)),
    }


METRICS = tuple(f"{m}_at_{k}" for k in KS for m in ("recall_all", "ndcg_any"))


def _summary(rows: list[dict[str, float]]) -> dict[str, Any]:
    out: dict[str, Any] = {"questions": len(rows)}
    for prefix in ("", "baseline_"):
        for m in METRICS:
            out[prefix + m] = round(mean([r[prefix + m] for r in rows]), 4)
    return out


def spread(items: list[Item], limit: int | None) -> list[Item]:
    """``limit`` items evenly spaced over the list: the file is sorted by question type, so
    a quick run sees every type instead of only the first one."""
    if limit is None or limit >= len(items):
        return items
    if limit < 1:
        raise ValidationError("limit", "must be at least 1")
    step = len(items) / limit
    return [items[int(i * step)] for i in range(limit)]


def run_longmemeval(
    path: Path, *, settings: Settings, limit: int | None = None, per_question: bool = False
) -> dict[str, Any]:
    """Session recall of sleepmem and of flat BM25 on the same questions, in one run.

    ``per_question`` adds each question's metrics (ids and numbers only) for error analysis.
    """
    started = time.perf_counter()
    items = load(path)
    abstention = sum(i.abstention for i in items)
    items = spread([i for i in items if not i.abstention], limit)
    rows: list[tuple[str, dict[str, float]]] = []
    detail: list[dict[str, Any]] = []
    events = memories = 0
    with eval_instance(settings, prefix="sleepmem-longmemeval-") as res:
        for item in items:
            t0 = time.perf_counter()
            batch, session_of = events_of(item)
            events += ingest(res, batch)
            written = count_memories(res, tenant=TENANT) - memories
            memories += written
            row = _score_item(res, item, session_of)
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
    all_rows = [r for _t, r in rows]
    official = {
        m: round(mean([r["official_" + m] for r in all_rows]), 4) for m in METRICS
    }
    report: dict[str, Any] = {
        "dataset": Path(path).name,
        **_summary(all_rows),
        "by_type": {
            t: _summary([r for qt, r in rows if qt == t])
            for t in sorted({qt for qt, _r in rows})
        },
        "baseline_official": {
            "definition": "flat BM25, user turns, whitespace tokens, paper-script labels",
            **official,
        },
        "sessions_reached": round(mean([r["sessions_reached"] for r in all_rows]), 1),
        "skipped_abstention": abstention,
        "events": events,
        "memories": memories,
        "embedder": embedder_name,
        "extractor": settings.extractor,
        "seconds": round(time.perf_counter() - started, 1),
    }
    if per_question:
        report["per_question"] = detail
    return report
