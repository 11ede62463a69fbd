"""LoCoMo evidence recall: does search bring back the turns that hold each answer?

Each conversation becomes one user scope (tenant ``locomo``, agent ``eval``, user =
``sample_id``). Every turn is emitted as a ``user`` message event through the SDK, with
its session's date as event time (plus the turn index in seconds, so order survives) and
its ``dia_id`` in meta; the event id is derived from sample id and dia_id, so a memory's
provenance maps back to turns exactly. After consolidation each question is searched in
its conversation's scope and scored by the fraction of its evidence turns covered by the
provenance of the top k cards (the paper's evidence recall@k).

Why both speakers' turns are ``user`` messages with the speaker in meta: LoCoMo is two
people talking about their own lives, so both are first-hand, high-trust sources (an
``assistant`` role would make them low-trust inferences). The speaker's name is what the
questions ask about ("When did Caroline ..."), so it must be in what is embedded and
matched lexically: the extractor prefixes ``meta["speaker"]`` to what it keeps, so the
content stays the turn's own words (putting the name in the content too would repeat
it). Shared photos are appended as their caption.

Each evidence turn the top 10 cards miss is looked up in the same search, traced
(``misses_at_10``): carried by no current memory (an extraction question), by memories no
route proposed (recall), or by a candidate ranked too low (ranking), with the quartiles of
those ranks, so the report says which part of the system a miss is owed to.

Every answer is measured in cl100k tokens, and in the same run each raw-turn baseline
(:mod:`sleepmem.evals.baselines`: BM25 or BM25 + dense by RRF, each turn whole or as its
best sentence) is packed into that answer's own tokens, question by question: the
comparison is recall per token, not per k. The headline is recall at fixed token budgets
(a search asking for the most memories within ``max_tokens``); recall@k (a search for k
memories) stays, with the mean tokens and distinct turns each answer holds beside it.

Each search format asked for (``cards``, ``lines``, ``mixed``: see
:class:`~sleepmem.models.SearchRequest`) is scored on the same questions, each against the
baselines packed into its own answers' tokens; the first format is the report's headline
and the one whose misses and routes are traced.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlmodel import Session, col, select

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
from sleepmem.evals.harness import (
    count_memories,
    count_tokens,
    eval_instance,
    ingest,
    tokenizer_name,
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
from sleepmem.models import (
    CURRENT_STATUSES,
    ConflictGroup,
    Memory,
    MemoryCard,
    Scope,
    SearchFormat,
    SearchRequest,
    card_sides,
)
from sleepmem.reader import Reader, build_request
from sleepmem.resources import Resources

log = get_logger("sleepmem.evals.locomo")

TENANT = "locomo"
AGENT = "eval"
CATEGORIES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
DEFAULT_KS = (5, 10, 25)
DEFAULT_FORMATS: tuple[SearchFormat, ...] = ("cards",)
TOKENS_AT = 10
_DATE_FORMAT = "%I:%M %p on %d %B, %Y"
_SESSION_KEY = re.compile(r"^session_(\d+)$")
# Evidence is mostly "D3:11"; a few items carry typos such as "D:11:26" or "D8:6; D9:17".
_DIA_ID = re.compile(r"D:?(\d+):(\d+)")


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    at: datetime
    session: int

    @property
    def document(self) -> str:
        """The turn as the baseline indexes it and as a transcript would show it."""
        return f"{self.speaker}: {self.text}"


@dataclass(frozen=True, slots=True)
class Question:
    question: str
    category: int
    evidence: frozenset[str]


@dataclass(slots=True)
class Conversation:
    sample_id: str
    turns: list[Turn] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    dropped_evidence: int = 0

    @property
    def scope(self) -> Scope:
        return Scope(tenant=TENANT, agent=AGENT, user=self.sample_id)

    def event_id(self, dia_id: str) -> str:
        return f"{self.sample_id}.{dia_id}"


def parse_session_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' as an aware UTC time (LoCoMo gives no zone)."""
    try:
        return datetime.strptime(text.strip(), _DATE_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise ValidationError("session_date_time", f"not a LoCoMo date: {text!r}") from None


def turn_text(turn: dict[str, Any]) -> str:
    """What a turn says, with a shared photo's caption so its content is searchable."""
    text = str(turn.get("text", "")).strip()
    caption = turn.get("blip_caption")
    if caption:
        text = f"{text} [shares {caption}]".strip()
    return text


def normalise_evidence(raw: Sequence[str]) -> list[str]:
    return [f"D{m.group(1)}:{m.group(2)}" for item in raw for m in _DIA_ID.finditer(str(item))]


def read_samples(path: Path) -> list[dict[str, Any]]:
    """The LoCoMo file's samples, as parsed JSON."""
    with Path(path).open(encoding="utf-8") as fh:
        raw = json.load(fh)
    return list(raw)


def conversation_of(sample: dict[str, Any]) -> Conversation:
    """One sample's turns and questions; evidence naming turns that do not exist is
    dropped and counted."""
    conv = Conversation(sample_id=str(sample["sample_id"]))
    body = sample["conversation"]
    sessions = sorted(int(m.group(1)) for key in body if (m := _SESSION_KEY.match(key)))
    for n in sessions:
        start = parse_session_date(body[f"session_{n}_date_time"])
        for i, turn in enumerate(body[f"session_{n}"]):
            conv.turns.append(
                Turn(
                    dia_id=str(turn["dia_id"]),
                    speaker=str(turn["speaker"]),
                    text=turn_text(turn),
                    at=start + timedelta(seconds=i),
                    session=n,
                )
            )
    known = {t.dia_id for t in conv.turns}
    for qa in sample.get("qa", []):
        cited = normalise_evidence(qa.get("evidence", []))
        evidence = frozenset(e for e in cited if e in known)
        conv.dropped_evidence += len(set(cited) - evidence)
        if evidence:
            conv.questions.append(Question(str(qa["question"]), int(qa["category"]), evidence))
    return conv


def load(path: Path) -> list[Conversation]:
    """Parse the LoCoMo JSON; evidence naming turns that do not exist is dropped and counted."""
    return [conversation_of(sample) for sample in read_samples(path)]


def ingest_conversation(res: Resources, conv: Conversation) -> tuple[int, int]:
    """Emit a conversation's turns, drain and consolidate them (the sleep-time path, run to
    completion); returns (events accepted, current memories the tenant gained)."""
    before = count_memories(res, tenant=TENANT)
    events = ingest(res, events_of(conv))
    return events, count_memories(res, tenant=TENANT) - before


def events_of(conv: Conversation) -> list[dict[str, Any]]:
    scope = conv.scope
    return [
        {
            "event_id": conv.event_id(t.dia_id),
            "tenant": scope.tenant,
            "agent": scope.agent,
            "user": scope.user,
            "kind": "message",
            "role": "user",
            "content": t.text,
            "at": t.at,
            "meta": {"dia_id": t.dia_id, "speaker": t.speaker, "session": t.session},
        }
        for t in conv.turns
    ]


def _entry_provenance(card: MemoryCard | ConflictGroup) -> list[str]:
    return [e for side in card_sides(card) for e in (side.provenance or [])]


def _entry_routes(card: MemoryCard | ConflictGroup) -> list[str]:
    return list(dict.fromkeys(r for side in card_sides(card) for r in side.routes))


def _entry_text(card: MemoryCard | ConflictGroup) -> str:
    if isinstance(card, ConflictGroup):
        return "\n".join(s.statement for s in card.sides)
    return card.statement


@dataclass(frozen=True, slots=True)
class Shown:
    """What one answer reads: its evidence recall, cl100k tokens and distinct turns."""

    recall: float
    tokens: int
    turns: int


@dataclass(slots=True)
class QuestionResult:
    category: int
    # Per format, per k of a search for k memories and per token budget: sleepmem's
    # answer (SYSTEM) and every baseline packed into that answer's own tokens.
    at_k: dict[str, dict[int, dict[str, Shown]]]
    at_tokens: dict[str, dict[int, dict[str, Shown]]]
    # In the first format, what a search for TOKENS_AT memories cost, and the turns each
    # of its cards carries.
    tokens: int
    turns_per_card: float
    ms: float = 0.0
    # Per evidence turn reached in the top TOKENS_AT cards: the routes of the card that
    # reached it first.
    hit_routes: list[tuple[str, ...]] = field(default_factory=list)
    # Per evidence turn missing from the top TOKENS_AT cards: where its memory sat.
    misses: list[Missed] = field(default_factory=list)


def _carriers(res: Resources, scope: Scope, by_event: dict[str, str]) -> dict[str, list[str]]:
    """dia_id -> the current memories of the scope whose provenance holds it (``by_event``:
    event id -> dia_id)."""
    out: dict[str, list[str]] = {}
    with Session(res.engine) as session:
        rows = session.exec(
            select(Memory.id, Memory.provenance).where(
                col(Memory.scope_key) == scope.key,
                col(Memory.status).in_(CURRENT_STATUSES),
            )
        )
        for mid, provenance in rows:
            for event in provenance:
                if event in by_event:
                    out.setdefault(by_event[event], []).append(mid)
    return out


def _misses(reader: Reader, request: SearchRequest, missing: set[str],
            carriers: dict[str, list[str]]) -> list[Missed]:
    """Where the missed turns sat: the same search again, traced (a trace records no
    hits, so it sees what the scored search saw)."""
    if not missing:
        return []
    _result, trace, _now = reader.trace(request)
    ranked = sorted(trace.scores, key=lambda mid: (-trace.scores[mid], mid))
    return where_missed(sorted(missing), carriers, ranked)


def _search(reader: Reader, request: SearchRequest) -> tuple[list[MemoryCard | ConflictGroup],
                                                            float]:
    t0 = time.perf_counter()
    cards = reader.search(request).cards
    return cards, (time.perf_counter() - t0) * 1000


def _score_conversation(
    res: Resources, conv: Conversation, questions: list[Question], ks: Sequence[int],
    *, formats: Sequence[SearchFormat] = DEFAULT_FORMATS,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
) -> list[QuestionResult]:
    if not questions:
        return []
    reader = Reader(res)
    by_event = {conv.event_id(t.dia_id): t.dia_id for t in conv.turns}
    raw = RawTurns.build([t.document for t in conv.turns], res.embedder)
    queries = res.embedder.embed([q.question for q in questions], kind="query")
    carriers = _carriers(res, conv.scope, by_event)
    out: list[QuestionResult] = []
    for qi, q in enumerate(questions):
        evidence = set(q.evidence)
        base = Baselines.of(raw, q.question, queries[qi], count_tokens)

        def turns_of(cards: list[MemoryCard | ConflictGroup]) -> list[list[str]]:
            return [[by_event[e] for e in _entry_provenance(c) if e in by_event]
                    for c in cards]

        def versus(cards: list[MemoryCard | ConflictGroup],
                   base: Baselines = base, evidence: set[str] = evidence) -> dict[str, Shown]:
            """sleepmem's answer, and each baseline in that answer's own tokens."""
            reached = {d for ts in turns_of(cards) for d in ts}
            own = Shown(evidence_recall(reached, evidence),
                        sum(count_tokens(_entry_text(c)) for c in cards), len(reached))
            out = {SYSTEM: own}
            for name in NAMES:
                packed = base.packed(name, own.tokens)
                dia = [conv.turns[i].dia_id for i in packed.turns]
                out[name] = Shown(evidence_recall(dia, evidence), packed.tokens, len(dia))
            return out

        # One search per k, as a caller asking for k memories would: in ``mixed`` the
        # first half of k is read whole, so the top 5 of a search for 25 is not the
        # search for 5.
        at_k: dict[str, dict[int, dict[str, Shown]]] = {}
        at_tokens: dict[str, dict[int, dict[str, Shown]]] = {}
        shown: list[MemoryCard | ConflictGroup] = []
        asked, ms = None, 0.0
        for fmt in formats:
            at_k[fmt] = {}
            for k in sorted({*ks, TOKENS_AT} if fmt == formats[0] else set(ks)):
                request = build_request(q.question, scope=conv.scope, k=k,
                                        with_provenance=True, format=fmt)
                cards, took = _search(reader, request)
                if k == TOKENS_AT and fmt == formats[0]:
                    shown, asked, ms = cards, request, took
                if k in ks:
                    at_k[fmt][k] = versus(cards)
            # At a budget the request asks for as many memories as it may: the budget, not
            # k, bounds the answer.
            at_tokens[fmt] = {
                b: versus(_search(reader, build_request(
                    q.question, scope=conv.scope, k=BUDGET_K, max_tokens=b,
                    with_provenance=True, format=fmt))[0])
                for b in budgets
            }
        turns_per_card = turns_of(shown)
        reached = {d for ts in turns_per_card for d in ts}
        out.append(
            QuestionResult(
                category=q.category,
                at_k=at_k,
                at_tokens=at_tokens,
                tokens=sum(count_tokens(_entry_text(c)) for c in shown),
                turns_per_card=mean([float(len(ts)) for ts in turns_per_card]),
                ms=ms,
                hit_routes=routes_of_hits(
                    zip(turns_per_card, map(_entry_routes, shown), strict=True), evidence,
                ),
                misses=_misses(reader, asked, evidence - reached, carriers)
                if asked is not None else [],
            )
        )
    return out


def _table(answers: list[dict[str, Shown]]) -> dict[str, dict[str, float]]:
    """Per system, the mean recall, tokens and turns of its answers."""
    return {
        name: {
            "recall": round(mean([a[name].recall for a in answers]), 4),
            "tokens": round(mean([float(a[name].tokens) for a in answers]), 1),
            "turns": round(mean([float(a[name].turns) for a in answers]), 1),
        }
        for name in (SYSTEM, *NAMES)
    }


def _tables(rows: list[QuestionResult], ks: Sequence[int], budgets: Sequence[int],
            fmt: str) -> dict[str, Any]:
    """One format's recall at each budget and each k, against the baselines in its
    tokens."""
    out: dict[str, Any] = {
        "at_tokens": {str(b): _table([r.at_tokens[fmt][b] for r in rows]) for b in budgets},
    }
    for k in ks:
        out[f"recall_at_{k}"] = round(mean([r.at_k[fmt][k][SYSTEM].recall for r in rows]), 4)
    out["at_k"] = {str(k): _table([r.at_k[fmt][k] for r in rows]) for k in ks}
    return out


def _summary(rows: list[QuestionResult], ks: Sequence[int], budgets: Sequence[int],
             formats: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"questions": len(rows), **_tables(rows, ks, budgets, formats[0])}
    if len(formats) > 1:
        out["by_format"] = {fmt: _tables(rows, ks, budgets, fmt) for fmt in formats}
    out[f"hits_by_route_at_{TOKENS_AT}"] = route_shares([h for r in rows for h in r.hit_routes])
    out[f"misses_at_{TOKENS_AT}"] = miss_summary([m for r in rows for m in r.misses])
    return out


def run_locomo(
    path: Path,
    *,
    settings: Settings,
    limit_conversations: int | None = None,
    limit_questions: int | None = None,
    ks: Sequence[int] = DEFAULT_KS,
    formats: Sequence[SearchFormat] = DEFAULT_FORMATS,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
) -> dict[str, Any]:
    """Evidence recall of sleepmem and of the raw-turn baselines at sleepmem's own tokens,
    in one run: at each token budget (the headline) and at each k.

    ``limit_questions`` caps the questions per conversation (for quick runs); each of
    ``formats`` is scored (the first is the headline: top-level figures, misses, routes).
    """
    if not ks or min(ks) < 1 or max(ks) > 100:
        raise ValidationError("ks", "each k must be between 1 and 100")
    if any(b < 1 for b in budgets):
        raise ValidationError("budgets", "each token budget must be at least 1")
    if not formats:
        raise ValidationError("formats", "name at least one search format")
    ks, budgets = sorted(set(ks)), sorted(set(budgets))
    formats = list(dict.fromkeys(formats))
    started = time.perf_counter()
    conversations = load(path)[:limit_conversations]
    rows: list[QuestionResult] = []
    events = memories = dropped = 0
    full_tokens: list[int] = []
    with eval_instance(settings, prefix="sleepmem-locomo-") as res:
        for conv in conversations:
            t0 = time.perf_counter()
            accepted, written = ingest_conversation(res, conv)
            events += accepted
            memories += written
            questions = conv.questions[:limit_questions]
            conv_rows = _score_conversation(res, conv, questions, ks, formats=formats,
                                             budgets=budgets)
            rows.extend(conv_rows)
            dropped += conv.dropped_evidence
            full_tokens.append(count_tokens("\n".join(t.document for t in conv.turns)))
            log.info(
                "locomo_conversation",
                sample=conv.sample_id, events=accepted, memories=written,
                questions=len(conv_rows),
                recall_at_tokens={
                    b: round(mean([r.at_tokens[formats[0]][b][SYSTEM].recall
                                   for r in conv_rows]), 4)
                    for b in budgets
                },
                seconds=round(time.perf_counter() - t0, 2),
            )
        embedder_name = res.embedder.name
    report: dict[str, Any] = {
        "dataset": Path(path).name,
        "conversations": len(conversations),
        "systems": {SYSTEM: "sleepmem's search", **BASELINES},
        "format": formats[0],
        "formats": formats,
        **_summary(rows, ks, budgets, formats),
        "tokens_per_query": round(mean([float(r.tokens) for r in rows]), 1),
        # Cards may carry more than one turn; the baseline's documents carry exactly one.
        "turns_per_card": round(mean([r.turns_per_card for r in rows]), 2),
        # Wall time of one search (embedding, routes, fusion; the rewriter's call when on).
        "ms_per_query": round(mean([r.ms for r in rows]), 1),
        "full_context_tokens": round(mean([float(t) for t in full_tokens]), 1),
        "by_category": {
            str(c): {"name": name,
                     **_summary([r for r in rows if r.category == c], ks, budgets, formats)}
            for c, name in CATEGORIES.items()
            if any(r.category == c for r in rows)
        },
        "events": events,
        "memories": memories,
        "dropped_evidence": dropped,
        "embedder": embedder_name,
        "extractor": settings.extractor,
        "query_rewrite": settings.query_rewrite,
        "tokenizer": tokenizer_name(),
        "seconds": round(time.perf_counter() - started, 1),
    }
    return report

