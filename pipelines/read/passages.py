"""Episodes that share a turn are returned as one passage.

An episode memory keeps a reply together with the turn it answers (the rules' pairing),
so consecutive turns live in overlapping memories: (q, a) and (a, b) share ``a``. When
both rank, two cards spend two slots of the top k and repeat ``a`` twice, while the
third card's slot went to the next distinct memory. Joined, they read as the
conversation did, each turn once (q, a, b), in the best one's slot: the caller gets the
same words in fewer tokens and one more distinct memory in its k.

Only memories that carry their events' own words join (``type == "event"``), and only
with the same source and trust, so a passage never mixes a user's words with an
assistant's or a high-trust card with a low-trust one. A passage spans at most ``most``
source events: it stays a short stretch of one conversation, not a whole session.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

from sleepmem.models import Memory
from sleepmem.pipelines.memories import own_words

T = TypeVar("T")


def passages(
    ranked: Sequence[T], *, sources: Callable[[T], Sequence[str]],
    joins: Callable[[T], Hashable | None], most: int,
) -> list[list[T]]:
    """``ranked`` (best first) as groups, best first: an entry whose ``joins`` key is not
    None joins the best group above it of the same key that shares one of its ``sources``
    (raw event ids) and would span at most ``most`` of them; any other entry is a group of
    its own. ``most`` below 2 joins nothing."""
    groups: list[list[T]] = []
    spans: list[set[str]] = []
    # (key, event id) -> the groups holding it: a lookup per source instead of a scan of
    # every group for every entry (search runs this over all its candidates).
    holding: dict[tuple[Hashable, str], set[int]] = {}
    for entry in ranked:
        key = joins(entry) if most >= 2 else None
        own = set(sources(entry)) if key is not None else set()
        near = {g for e in own for g in holding.get((key, e), ())}
        target = min((g for g in near if len(spans[g] | own) <= most), default=None)
        if target is None:
            target = len(groups)
            groups.append([])
            spans.append(set())
        groups[target].append(entry)
        spans[target] |= own
        for e in own:
            holding.setdefault((key, e), set()).add(target)
    return groups


def passage_text(members: Sequence[Memory]) -> tuple[str, list[str]]:
    """The members' words in the order they were said, each source event once, and the
    source events in that order. A member whose answered turn is already in the passage
    adds only its own words; one whose every event is in adds nothing."""
    lines: list[str] = []
    events: list[str] = []
    for m in sorted(members, key=lambda x: (x.valid_from, x.id)):
        new = [e for e in m.provenance if e not in events]
        if m.provenance and not new:
            continue
        context = m.details.get("context_event")
        lines.append(own_words(m) if context in events else m.statement)
        events += new
    return "\n".join(lines), events
