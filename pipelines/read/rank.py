"""How a search ranks what its routes found: the weights, the score of one memory (fused
relevance, recency, importance, confidence, a penalty once demoted), which rows a search
may show at all, and which small talk stays out of an answer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from sleepmem.models import CURRENT_STATUSES, Memory, SearchRequest
from sleepmem.pipelines.decay import aware
from sleepmem.pipelines.read.fusion import Fused
from sleepmem.pipelines.small_talk import is_only_small_talk, small_talk_parts
from sleepmem.pipelines.text import split_sentences

# Small talk (memories the write gate marked ``details["chitchat"]`` whose every sentence
# is greetings, thanks, acknowledgements or weather and nothing besides, and the session
# summaries made of it)
# holds nothing a question about the user or the world could need: it is an answer only
# when the query is about the conversation itself. Fused relevance is relative to the
# query's best candidate, so small talk stays only when it is at least this share of the
# best match, i.e. among what the query is most about; anything less is filler that the
# recency and importance terms would otherwise rank into a short result ("bye" answering
# an allergy question). A turn the gate marked that also says something ("Rainy weekend.
# I read Dune.") is not small talk here.
SMALL_TALK_MIN_SHARE = 0.5



@dataclass(frozen=True, slots=True)
class RankWeights:
    relevance: float = 0.70
    recency: float = 0.10
    importance: float = 0.10
    confidence: float = 0.10
    dense_share: float = 0.30
    # The sentence route: a memory scored by its best-matching own sentence
    # (sleepmem.pipelines.write.index.own_sentences), beside the whole statement's vector.
    sentence: float = 0.3
    recency_half_life_s: float = 30 * 86400.0
    candidates: int = 50
    demoted_penalty: float = 0.15
    # Fusion weights of the routes beyond dense + lexical (which share 1.0 between them).
    part: float = 0.5
    time: float = 0.3
    # Within the time route, a memory just outside the named window (its margin) scores at
    # this share of one inside it, instead of not at all.
    time_near: float = 0.5
    extra: float = 0.5
    # The context route: around the best few hits, the memories of the same episode
    # (valid_from within ``context_window_s``) that best match the query.
    context: float = 0.3
    context_seeds: int = 3
    context_per_seed: int = 3
    context_window_s: float = 600.0
    # The rewrite route: the chat model's retrieval queries for the question, when on.
    rewrite: float = 0.5
    # The speaker route (sleepmem.pipelines.speakers): what a person the query names said.
    speaker: float = 0.3
    # Leave out cards whose every source event a better card already carries
    # (sleepmem.pipelines.read.repeats).
    drop_repeats: bool = True
    # Episodes that share a turn are returned as one passage of at most this many source
    # events (sleepmem.pipelines.read.passages); below 2, each stays its own card.
    passage_events: int = 6



def without_stray_small_talk(rows: dict[str, Memory],
                              fused: Mapping[str, Fused]) -> dict[str, Memory]:
    """``rows`` less the small talk the query is not about (SMALL_TALK_MIN_SHARE)."""
    idle = {mid for mid, m in rows.items() if _small_talk(m)}
    if not idle:
        return rows
    floor = SMALL_TALK_MIN_SHARE * max(fused[mid].score for mid in rows)
    return {mid: m for mid, m in rows.items() if mid not in idle or fused[mid].score >= floor}



def _small_talk(m: Memory) -> bool:
    return bool(m.details.get("chitchat")) and all(
        is_only_small_talk(sentence)
        for part in small_talk_parts(m.statement) for sentence in split_sentences(part))



def visible(m: Memory, request: SearchRequest, now: datetime) -> bool:
    """SQL re-check of the index filter: the index is derived, SQL decides."""
    if not request.scope.sees(m):
        return False
    if request.types and m.type not in request.types:
        return False
    if m.details.get("hidden"):
        return False
    if request.as_of is not None:
        return m.valid_from <= request.as_of and (m.valid_to is None or m.valid_to > request.as_of)
    if m.status not in CURRENT_STATUSES:
        return False
    return m.expires_at is None or aware(m.expires_at) > now



def score_parts(
    m: Memory, relevance: float, now: datetime, w: RankWeights
) -> list[tuple[str, float, float]]:
    """The rerank's terms as (name, value, weight): the score is the sum of value × weight."""
    age = max(0.0, (now - aware(m.last_access)).total_seconds())
    recency: float = 0.5 ** (age / w.recency_half_life_s)
    parts = [
        ("relevance", relevance, w.relevance),
        ("recency", recency, w.recency),
        ("importance", m.importance, w.importance),
        ("confidence", m.confidence, w.confidence),
    ]
    # Demoted by the sweep (fading, not yet archived): still findable, no longer first.
    if m.demoted:
        parts.append(("demoted", 1.0, -w.demoted_penalty))
    return parts



def score(m: Memory, relevance: float, now: datetime, w: RankWeights) -> float:
    return sum(value * weight for _name, value, weight in score_parts(m, relevance, now, w))
