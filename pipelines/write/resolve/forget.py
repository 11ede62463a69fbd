"""Forget requests: erase what the request's topic names, by words and by meaning.

Every version of each lineage it means goes, with its raw events and what was read from
the same event about the topic; a reply whose only mention of the topic is the turn it
answers loses that turn and stays. Erasure cannot be undone: a memory merely on a related
subject stays (:meth:`Forgets._meant`).
"""

from __future__ import annotations

from sleepmem.models import Memory
from sleepmem.pipelines import semantic
from sleepmem.pipelines.language import has_cjk
from sleepmem.pipelines.memories import content_hash, norm_text
from sleepmem.pipelines.topics import LABELS, topics_of_memory
from sleepmem.pipelines.types import Candidate, Op
from sleepmem.pipelines.write.resolve.book import Book
from sleepmem.pipelines.write.resolve.pairs import Pairs
from sleepmem.pipelines.write.resolve.readings import mentions, only_in_context
from sleepmem.pipelines.write.versions import AuditDraft


class Forgets:
    """Carries out an explicit forget request."""

    def __init__(self, book: Book, pairs: Pairs) -> None:
        self.book = book
        self.pairs = pairs

    def forget(self, cand: Candidate) -> None:
        """Erase what ``cand``'s forget topic names; one DELETE audit names it all."""
        topic = norm_text(cand.forget_topic or "")
        matched = [
            m for m in self.book.versions.values()
            if m.id not in self.book.plan.deleted and topic and mentions(m.statement, topic)
        ]
        matched += [m for m in self._meant(cand.forget_topic or "") if m not in matched]
        # A reply remembered with the turn before it: when only that context names the
        # topic, the context (and its raw event) goes and the reply stays.
        stripped = [m for m in matched if only_in_context(m, topic)]
        lineages = {m.lineage for m in matched if m not in stripped}
        lineages |= {m.lineage for m in self._told_with(
            [m for m in matched if m not in stripped])}
        victims = [m for m in self.book.versions.values() if m.lineage in lineages]
        for m in victims:
            self.book.erase(m)
        for m in stripped:
            row = self.book.plan.touch(m)
            context_event = str(row.details.pop("context_event", ""))
            row.statement = row.statement[int(row.details.pop("reply_offset", 0)):]
            row.provenance = [e for e in row.provenance if e != context_event]
            self.book.plan.deleted_events.add(context_event)
        # The request itself names the topic: its raw event goes too.
        self.book.plan.deleted_events.update(cand.provenance)
        self.book.plan.audits.append(
            AuditDraft(
                Op.DELETE,
                [m.id for m in victims] + [m.id for m in stripped],
                [m.id for m in stripped],
                "explicit forget request",
                list(cand.provenance),
                content_hash(*sorted(m.statement for m in [*victims, *stripped])),
            )
        )

    def _told_with(self, forgotten: list[Memory]) -> list[Memory]:
        """Current memories read from the same event as a forgotten one that say the same
        thing in part ("我最近在看心理医生，因为我有焦虑症" gave an episode and a condition):
        the event goes, and what was read from it about the topic goes with it."""
        if self.book.meaning is None or not forgotten:
            return []
        events = {e for m in forgotten for e in m.provenance}
        pool = [m for m in self.book.current() if m not in forgotten and events & set(m.provenance)
                and m.type != "procedure"]
        out = []
        for mem in pool:
            sims = self.book.meaning.similarities(self.book.gist(mem.statement),
                                             [self.book.gist(m.statement) for m in forgotten])
            # Its source event goes: a memory left with no source is only worth keeping
            # when it is plainly about something else (the stamps beside the surgery).
            if max(sims) >= semantic.LOOSELY_RELATED:
                out.append(mem)
        return out

    def _meant(self, topic: str) -> list[Memory]:
        """Current memories a forget request's topic means, by meaning (any language).

        A memory is meant when it is near the topic in absolute terms and among the
        nearest of the scope: erasure cannot be undone, so a memory merely on a related
        subject (the user's hospital job for "my medical records") stays.
        """
        if self.book.meaning is None or not topic.strip():
            return []
        pool = [m for m in self.book.current() if m.type != "procedure"]
        sims = self.book.meaning.similarities(topic, [self.book.gist(m.statement) for m in pool])
        if not sims:
            return []
        best = max(sims)
        meant = [m for m, sim in zip(pool, sims, strict=True)
                 if sim >= semantic.FORGET_MATCH and sim >= best - semantic.FORGET_MARGIN]
        if not meant:
            # Across languages: only the scope's clear best, in the other language.
            order = sorted(range(len(sims)), key=lambda i: -sims[i])
            runner = sims[order[1]] if len(order) > 1 else 0.0
            top = pool[order[0]]
            if best >= semantic.FORGET_MATCH_CROSS and best - runner >= semantic.FORGET_MARGIN and (
                    has_cjk(topic) != has_cjk(top.statement)):
                meant = [top]
        label = self._topic_named(topic, above=best)
        if label is not None:
            meant += [m for m in pool if m not in meant
                      and label in topics_of_memory(m.attribute, m.statement)]
        return meant

    def _topic_named(self, topic: str, *, above: float) -> str | None:
        """The topic label a request names when it names a whole topic ("病史", "my
        medical history") rather than a thing: near one label, clearly nearer to it than
        to any other, and nearer to it than to any one memory. A memory of that topic
        (by its slot's kind, else its words) is meant too: "hypertension, amlodipine" is
        medical history though no word of it says so."""
        assert self.book.meaning is not None
        sims = self.book.meaning.similarities(topic, list(LABELS))
        order = sorted(range(len(sims)), key=lambda i: -sims[i])
        first, second = sims[order[0]], sims[order[1]]
        if first < semantic.FORGET_TOPIC or first - second < semantic.FORGET_TOPIC_MARGIN:
            return None
        return LABELS[order[0]] if first > above else None

