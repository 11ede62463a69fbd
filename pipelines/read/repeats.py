"""Cards that only repeat what better cards already carry are left out of the answer.

One turn can live in more than one current memory: the turn's own episode, and a
compressed card that joins it with its neighbours, or a fact extracted from it. When
both rank, the lower one spends a slot of the top k (and its tokens) on turns the
caller already has, and pushes the next distinct memory out. Provenance says exactly
which raw events a memory came from, so "already carried" is decided on it, not on
wording: a card whose every source event is covered by the cards ranked above it is
dropped; a card with one new source event stays, and so does any card without
provenance (nothing to compare) and every conflict set (its sides are shown together
on purpose).

Only a card that carries its events' words covers them (an episode, a summary): the
facts one message was split into ("we use Django, MySQL and Celery") share that one
source event, yet each says something the others do not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

T = TypeVar("T")


def without_repeats(
    ranked: Iterable[T], *, sources: Callable[[T], Sequence[str]],
    droppable: Callable[[T], bool], covers: Callable[[T], bool],
) -> list[T]:
    """``ranked`` (best first) without the droppable entries whose ``sources`` (raw event
    ids) the entries above them already cover; a kept entry's sources count as covered
    for those below it when ``covers`` says it carries their words."""
    covered: set[str] = set()
    out: list[T] = []
    for entry in ranked:
        own = set(sources(entry))
        if own and own <= covered and droppable(entry):
            continue
        if covers(entry):
            covered |= own
        out.append(entry)
    return out
