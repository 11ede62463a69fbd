"""What a search returns, in the request's format: whole cards, one line per memory, or
both (``mixed``), at most k memories within ``max_tokens`` cl100k tokens; episodes that
share turns read as one passage."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sleepmem.core.tokens import count_tokens
from sleepmem.models import (
    ConflictGroup,
    Memory,
    MemoryCard,
    MemoryStatus,
    SearchRequest,
    SearchResult,
    card_sides,
)
from sleepmem.pipelines.decay import aware
from sleepmem.pipelines.memories import own_events
from sleepmem.pipelines.read.passages import passage_text
from sleepmem.pipelines.read.snippets import LinePicker, lead

# Memory types that hold their source events' own words (an episode, a joined summary),
# as opposed to what was extracted from them.
WORD_CARRIERS = frozenset({"event", "summary"})


# The share of max_tokens the ``mixed`` format spends on whole cards; lines read the rest.
MIXED_CARD_SHARE = 0.5



def shown(
    groups: Sequence[Sequence[tuple[float, str, MemoryCard | ConflictGroup]]],
    entries: Sequence[tuple[float, str, MemoryCard | ConflictGroup]],
    rows: Mapping[str, Memory], request: SearchRequest,
) -> tuple[list[MemoryCard | ConflictGroup], int, int, list[str]]:
    """The result in the request's format: its cards, their cl100k tokens, the memories
    they read (at most k) and the ids of those read as lines.

    ``cards``: whole cards while memories are left (a passage past what is left keeps its
    best members), within ``max_tokens`` (a passage over it keeps its best episode alone;
    a card over what is left is skipped for the next). ``lines``: every memory as its
    line. ``mixed``: the first half of k whole, in at most MIXED_CARD_SHARE of
    ``max_tokens``, then lines in what is left."""
    k, budget, fmt = request.k, request.max_tokens, request.format
    whole = k if fmt == "cards" else lead(k) if fmt == "mixed" else 0
    card_budget = budget
    if fmt == "mixed" and budget is not None:
        card_budget = int(budget * MIXED_CARD_SHARE)
    cards: list[MemoryCard | ConflictGroup] = []
    tokens = read = 0
    for group in groups:
        if read >= whole:
            break
        card = _passage(list(group[: whole - read]), rows, request)
        cost = card_tokens(card)
        if card_budget is not None and tokens + cost > card_budget:
            # A passage over the budget still leaves room for its best episode alone.
            card = group[0][2]
            cost = card_tokens(card)
            if tokens + cost > card_budget:
                if fmt == "mixed" and cards:
                    break  # the rest of the budget reads lines, more memories per token
                continue
        cards.append(card)
        tokens += cost
        read += _memories(card)
    lines: list[str] = []
    if fmt != "cards" and read < k:
        left = None if budget is None else budget - tokens
        more = _lines(cards, entries, rows, request, budget=left, most=k - read)
        cards += more
        tokens += sum(card_tokens(c) for c in more)
        read += sum(_memories(c) for c in more)
        lines = [c.id for c in more if isinstance(c, MemoryCard) and c.line]
    return cards, tokens, read, lines



def _memories(card: MemoryCard | ConflictGroup) -> int:
    """The memories a card counts for against k: a conflict once (its sides are read
    together, never one without the other), a passage each memory it joins."""
    return 1 if isinstance(card, ConflictGroup) else 1 + len(card.joined)



def _lines(
    cards: Sequence[MemoryCard | ConflictGroup],
    entries: Sequence[tuple[float, str, MemoryCard | ConflictGroup]],
    rows: Mapping[str, Memory], request: SearchRequest, *, budget: int | None, most: int,
) -> list[MemoryCard | ConflictGroup]:
    """The memories below ``cards``, best first, one line each (at most ``most``, within
    ``budget``; one over what is left is skipped for the next). A conflict is never cut to
    a line: its sides are read together, whole, or not at all."""
    read = {i for c in cards for side in card_sides(c) for i in (side.id, *side.joined)}
    # The turns read whole above: a fact card reads what was extracted, not its turn.
    shown = [e for i in read if i in rows and _holds_turns(rows[i]) for e in rows[i].provenance]
    picker = LinePicker(request.query, shown=shown, holds_turns=_holds_turns)
    out: list[MemoryCard | ConflictGroup] = []
    used = 0
    for _score, _key, entry in entries:
        if len(out) >= most:
            break
        if any(side.id in read for side in card_sides(entry)):
            continue
        card: MemoryCard | ConflictGroup
        if isinstance(entry, ConflictGroup):
            card = entry
        else:
            if entry.id not in rows:
                continue
            memory = rows[entry.id]
            text = picker.line(memory)
            if text is None:
                continue
            card = entry.model_copy(update={
                "statement": text, "line": True,
                "provenance": own_events(memory) if request.with_provenance else None,
            })
        cost = card_tokens(card)
        if budget is not None and used + cost > budget:
            continue
        out.append(card)
        used += cost
        if isinstance(entry, MemoryCard):
            picker.took(rows[entry.id])
    return out



def _holds_turns(m: Memory) -> bool:
    return m.type in WORD_CARRIERS



def card(m: Memory, score: float, request: SearchRequest, routes: list[str]) -> MemoryCard:
    return MemoryCard(
        id=m.id,
        statement=m.statement,
        type=m.type,
        source=m.source,
        trust=m.trust,
        valid_from=aware(m.valid_from),
        confidence=round(m.confidence, 4),
        score=round(score, 6),
        status=m.status if m.status != MemoryStatus.pending_confirmation.value else "conflict",
        provenance=list(m.provenance) if request.with_provenance else None,
        routes=list(routes),
    )



def _passage(
    group: list[tuple[float, str, MemoryCard | ConflictGroup]], rows: Mapping[str, Memory],
    request: SearchRequest,
) -> MemoryCard | ConflictGroup:
    """The card for a group of :func:`~sleepmem.pipelines.read.passages.passages`: the best
    one, reading the members' words in order, with their routes and the weakest
    confidence among them."""
    # Only episode cards join (see search), so a group of two or more holds only cards.
    cards = [c for _s, _k, c in group if isinstance(c, MemoryCard)]
    if len(cards) < 2:
        return group[0][2]
    text, events = passage_text([rows[c.id] for c in cards])
    return _read_as_one(cards, text, events, request)



def _read_as_one(
    cards: Sequence[MemoryCard], statement: str, events: list[str], request: SearchRequest,
    **update: Any,
) -> MemoryCard:
    """The first of ``cards`` reading them all as ``statement`` (a passage): the
    earliest time, the weakest confidence, every route, the rest as ``joined``, and the
    time of each."""
    return cards[0].model_copy(update={
        "statement": statement,
        "valid_from": min(c.valid_from for c in cards),
        "times": [c.valid_from for c in cards],
        "confidence": min(c.confidence for c in cards),
        "provenance": events if request.with_provenance else None,
        "routes": list(dict.fromkeys(r for c in cards for r in c.routes)),
        "joined": [c.id for c in cards[1:]],
        **update,
    })



def card_tokens(card: MemoryCard | ConflictGroup) -> int:
    """The card's cl100k tokens: what the caller's prompt pays for it."""
    if isinstance(card, ConflictGroup):
        return sum(count_tokens(s.statement) for s in card.sides)
    return count_tokens(card.statement)



def hit_ids(result: SearchResult) -> list[str]:
    """Every memory the result returned, those read inside a passage included."""
    return [i for c in result.flat() for i in (c.id, *c.joined)]
