"""Retrieval (DESIGN rule 7): scope filter first, hybrid candidates, weighted rerank, cards.

Read-only on SQL: hits are handed back to the caller, which records them cheaply
(Redis) for the refresh task to apply later.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from sleepmem.models import (
    CURRENT_STATUSES,
    ConflictGroup,
    Memory,
    MemoryCard,
    MemoryStatus,
    Scope,
    SearchRequest,
    SearchResult,
)
from sleepmem.pipelines.index import subjectless
from sleepmem.pipelines.lexical import sparse_query, token_id, tokens
from sleepmem.pipelines.ports import Hit, IndexFilter, Ports

# Queries name the person the memory is about ("the user's", "用户的"), and extracted
# statements do too; on the lexical side that word would only favour paraphrased
# statements over the user's own words, so queries drop it.
QUERY_STOP_IDS = frozenset(token_id(t) for t in {*tokens("user users 用户"), "户"})

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
_WORD = re.compile(r"[^\W\d_]+|\d+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class RankWeights:
    relevance: float = 0.70
    recency: float = 0.10
    importance: float = 0.10
    confidence: float = 0.10
    dense_share: float = 0.30
    recency_half_life_s: float = 30 * 86400.0
    candidates: int = 50
    demoted_penalty: float = 0.15


def approx_tokens(text: str) -> int:
    """Cheap token estimate (≈ cl100k): a CJK character ≈ 1, a word ≈ 1.3, punctuation."""
    cjk = len(_CJK.findall(text))
    words = len(_WORD.findall(_CJK.sub(" ", text)))
    return max(1, cjk + math.ceil(words * 1.3) + 4)


def search(
    *, engine: Engine, ports: Ports, request: SearchRequest, weights: RankWeights
) -> SearchResult:
    now = ports.clock()
    where = IndexFilter(
        scope=request.scope, now=now, types=tuple(request.types) if request.types else None,
        as_of=request.as_of,
    )
    query = _as_user(request.query, _names(engine, request.scope))
    vector = ports.embedder.embed([subjectless(query)], kind="query")[0]
    limit = max(weights.candidates, request.k * 4)
    dense = ports.index.search_dense(vector, where=where, limit=limit)
    sparse = {t: w for t, w in sparse_query(query).items() if t not in QUERY_STOP_IDS}
    lexical = ports.index.search_sparse(sparse, where=where, limit=limit) if sparse else []
    relevance = _fuse(dense, lexical, weights.dense_share)
    if not relevance:
        return SearchResult(cards=[])
    with Session(engine) as session:
        rows = {
            m.id: m
            for m in session.exec(select(Memory).where(col(Memory.id).in_(list(relevance))))
        }
        rows = {mid: m for mid, m in rows.items() if _visible(m, request, now)}
        sets = {m.conflict_set for m in rows.values() if m.conflict_set and request.as_of is None}
        sides: dict[str, list[Memory]] = {}
        if sets:
            for m in session.exec(select(Memory).where(col(Memory.conflict_set).in_(list(sets)))):
                if _visible(m, request, now):
                    sides.setdefault(str(m.conflict_set), []).append(m)
    scored = {mid: _score(m, relevance[mid], now, weights) for mid, m in rows.items()}

    entries: list[tuple[float, str, MemoryCard | ConflictGroup]] = []
    grouped: set[str] = set()
    for mid, m in rows.items():
        if m.conflict_set and m.conflict_set in sides and len(sides[m.conflict_set]) > 1:
            if m.conflict_set in grouped:
                continue
            grouped.add(m.conflict_set)
            members = sorted(sides[m.conflict_set], key=lambda x: (x.valid_from, x.id))
            score = max(scored.get(x.id, 0.0) for x in members)
            group = ConflictGroup(
                conflict_set=m.conflict_set,
                score=round(score, 6),
                sides=[_card(x, scored.get(x.id, score), request) for x in members],
            )
            entries.append((score, m.conflict_set, group))
        else:
            entries.append((scored[mid], mid, _card(m, scored[mid], request)))
    # Stable order for equal inputs: score, then id (cache-friendly prompts).
    entries.sort(key=lambda e: (-round(e[0], 6), e[1]))
    cards: list[MemoryCard | ConflictGroup] = []
    tokens = 0
    for _score_value, _key, card in entries[: request.k]:
        cost = _tokens(card)
        if request.max_tokens is not None and tokens + cost > request.max_tokens:
            break
        cards.append(card)
        tokens += cost
    return SearchResult(cards=cards, tokens=tokens)


def _names(engine: Engine, scope: Scope) -> list[str]:
    """The names the scope's user goes by (identity memories of the ``name`` slot)."""
    if not scope.user:
        return []
    owner = scope.model_copy(update={"project": "", "session": ""}).key
    with Session(engine) as session:
        rows = session.exec(
            select(Memory.details).where(
                col(Memory.scope_key) == owner,
                col(Memory.subject) == "user",
                col(Memory.attribute) == "name",
                col(Memory.status).in_(CURRENT_STATUSES),
            )
        ).all()
    return [str(d.get("value")) for d in rows if d.get("value")]


def _as_user(query: str, names: list[str]) -> str:
    """Statements call the person "the user"; a query naming them means the same person."""
    for name in names:
        if len(name) >= 2:
            query = re.sub(rf"\b{re.escape(name)}(?:'s)?\b", "the user", query,
                           flags=re.IGNORECASE)
    return query


def _fuse(dense: Sequence[Hit], lexical: Sequence[Hit], dense_share: float) -> dict[str, float]:
    """Min-max normalise each list over its own candidates, then mix: both live in [0, 1].

    Dividing by the best score alone would squeeze a small embedder's narrow cosine band
    (USE: 0.2-0.6) into 0.6-1.0, so every dense candidate would outweigh all but the best
    lexical ones and drown the sharper lexical ranking. Every candidate stays in, even at
    zero: the filter already decided it may be seen, and the other terms still apply.
    """
    out: dict[str, float] = {}
    for hits, share in ((dense, dense_share), (lexical, 1.0 - dense_share)):
        if not hits:
            continue
        hi = max(h.score for h in hits)
        lo = min(h.score for h in hits)
        for h in hits:
            norm = (h.score - lo) / (hi - lo) if hi > lo else 1.0
            out[h.id] = out.get(h.id, 0.0) + share * norm
    return out


def _visible(m: Memory, request: SearchRequest, now: datetime) -> bool:
    """SQL re-check of the index filter: the index is derived, SQL decides."""

    where = Scope(tenant=m.tenant, agent=m.agent, user=m.user, project=m.project, session=m.session)
    if not request.scope.sees(where):
        return False
    if request.types and m.type not in request.types:
        return False
    if m.details.get("hidden"):
        return False
    if request.as_of is not None:
        return m.valid_from <= request.as_of and (m.valid_to is None or m.valid_to > request.as_of)
    if m.status not in CURRENT_STATUSES:
        return False
    return m.expires_at is None or _aware(m.expires_at) > now


def _aware(t: datetime) -> datetime:
    from datetime import UTC

    return t.replace(tzinfo=UTC) if t.tzinfo is None else t


def _score(m: Memory, relevance: float, now: datetime, w: RankWeights) -> float:
    age = max(0.0, (now - _aware(m.last_access)).total_seconds())
    recency: float = 0.5 ** (age / w.recency_half_life_s)
    score = (
        w.relevance * relevance
        + w.recency * recency
        + w.importance * m.importance
        + w.confidence * m.confidence
    )
    # Demoted by the sweep (fading, not yet archived): still findable, no longer first.
    return score - w.demoted_penalty if m.demoted else score


def _card(m: Memory, score: float, request: SearchRequest) -> MemoryCard:
    return MemoryCard(
        id=m.id,
        statement=m.statement,
        type=m.type,
        source=m.source,
        trust=m.trust,
        valid_from=_aware(m.valid_from),
        confidence=round(m.confidence, 4),
        score=round(score, 6),
        status=m.status if m.status != MemoryStatus.pending_confirmation.value else "conflict",
        provenance=list(m.provenance) if request.with_provenance else None,
    )


def _tokens(card: MemoryCard | ConflictGroup) -> int:
    if isinstance(card, ConflictGroup):
        return sum(approx_tokens(s.statement) for s in card.sides)
    return approx_tokens(card.statement)


def hit_ids(result: SearchResult) -> list[str]:
    return [c.id for c in result.flat()]
