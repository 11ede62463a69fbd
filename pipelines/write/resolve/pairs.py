"""What a candidate is paired with: the current memories near it, found by lookup.

Every decision compares a candidate with a few current memories, never with the whole
scope: those its own speaker said before (:meth:`Pairs.said_before`), those with a
sentence or a turn near its words (the run's sentence indexes, write.neighbours), those
that mean the frame its slot names (:meth:`Pairs.framed`), the tool fields apart. Then
:meth:`Pairs.near` ranks them by meaning, and :meth:`Pairs.about` says which of them a
change is about. The pair a judge model reads is built here too (:meth:`Pairs.pair`).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from sleepmem.models import Memory, Trust
from sleepmem.pipelines import semantic
from sleepmem.pipelines.lexical import phrases, tokens
from sleepmem.pipelines.memories import norm_text
from sleepmem.pipelines.semantic import gist
from sleepmem.pipelines.types import TOOL_PREFIX, Candidate
from sleepmem.pipelines.write.extract.frames import frame_named, may_mean, ranked_frames
from sleepmem.pipelines.write.neighbours import SentenceIndex, in_order
from sleepmem.pipelines.write.resolve.book import Book
from sleepmem.pipelines.write.resolve.readings import (
    content_words,
    holds_both,
    is_open,
    last_turn,
    may_restate,
    slot_kind,
    tooled,
    value_of,
)
from sleepmem.pipelines.write.verdicts import Pair

# A value said in another language scores 0.41-0.61 against its translation (行李 /
# "baggage" 0.64, "baggage handler" 0.60) and under 0.35 against the other phrases of the
# same memory ("airport", "night shifts"); another memory must trail by a clear margin.
NAMES_VALUE = 0.55
NAMES_MARGIN = 0.10
NAMING_POOL = 100


class Pairs:
    """The neighbours of a candidate in one run's book, and the indexes that find them."""

    def __init__(self, book: Book) -> None:
        self.book = book
        # Neighbours are looked up, never gathered by a pass over the scope: the tool
        # fields apart, each subject's slotted memories, and the sentence vectors of what
        # a candidate may restate, built on first use (forget requests rewrite
        # statements: each index is built again when one did).
        self.tool_fields: set[str] = set()
        self.slotted: dict[str, set[str]] = {}
        self.frames: dict[str, list[tuple[str, float]]] = {}
        self._sentence_index: SentenceIndex | None = None
        self._indexed_at = 0
        self._frame_index: dict[str, set[str]] | None = None
        self._turn_index: SentenceIndex | None = None
        self._turns_at = 0
        self._frame_pending: dict[str, Memory] = {}
        self._framed_at = 0
        book.watch(self._remember)

    def _remember(self, mem: Memory) -> None:
        """A row joined the current set (the book calls this): into the indexes built."""
        if tooled(mem.attribute, mem.source):
            self.tool_fields.add(mem.id)
        if self._sentence_index is not None and may_restate(mem):
            self._sentence_index.add(mem.id, mem.statement)
        if self._frame_index is not None:
            self._frame_pending[mem.id] = mem
        if self._turn_index is not None and may_restate(mem):
            self._turn_index.add(mem.id, mem.statement)
        if mem.attribute:
            self.slotted.setdefault(mem.subject, set()).add(mem.id)

    def near(self, cand: Candidate, pool: list[Memory], *,
              own_turns: bool = False) -> list[tuple[Memory, float, bool]]:
        """``pool`` members by similarity to ``cand``, best first: (memory, sim, same).
        ``own_turns``: compare the last turns only (a reply's own words, without the turn
        before it that an episode keeps for context)."""
        if self.book.meaning is None or not pool:
            return []
        def words(statement: str) -> str:
            return last_turn(statement) if own_turns else statement
        text = gist(words(cand.statement))
        others = [self.book.gist(words(m.statement)) for m in pool]
        sims = self.book.meaning.similarities(text, others)
        order = np.argsort(-np.asarray(sims, dtype=np.float32), kind="stable")
        return [
            (pool[i], sims[i], self.book.meaning.same(text, others[i], sims[i]))
            for i in (int(j) for j in order)
        ]

    def framed(self, cand: Candidate) -> list[Memory]:
        """The current memories of ``cand``'s subject, of any type or slot, episodes
        included, that mean the frame its attribute names ("Lisbon is home now" meets "I
        live in Berlin, near the zoo" as one residence): what a change of that frame is
        about when its own slot holds nothing."""
        frame = frame_named(cand.attribute)
        if frame is None or self.book.meaning is None:
            return []
        pool = [m for m in self.said_before(cand, self._frame_neighbours(frame.attribute))
                if m.subject == cand.subject and m.attribute != cand.attribute
                and m.trust in (Trust.high.value, Trust.human.value) and m.source != "tool"
                and not m.attribute.startswith(TOOL_PREFIX)
                and (m.type != "event" or (m.source == "user" and self.one_thing(m)))]
        todo = list(dict.fromkeys(m.statement for m in pool if m.statement not in self.frames))
        if todo:
            ranked = ranked_frames(self.book.meaning.embedder, [last_turn(t) for t in todo])
            self.frames.update(zip(todo, ranked, strict=True))
        return [m for m in pool if may_mean(self.frames[m.statement], frame.attribute)]

    def turn_neighbours(self, texts: list[str], bar: float) -> set[str]:
        """Current memories a candidate may restate whose own last turn is at or above
        ``bar`` against one of ``texts`` (:meth:`near` with ``own_turns``), from an index
        of the run like :meth:`sentence_neighbours`."""
        assert self.book.meaning is not None
        if self._turn_index is None or self._turns_at != len(self.book.plan.deleted_events):
            self._turn_index = SentenceIndex(
                self.book.meaning, lambda statement: [self.book.gist(last_turn(statement))])
            self._turns_at = len(self.book.plan.deleted_events)
            for m in self.book.current():
                if may_restate(m):
                    self._turn_index.add(m.id, m.statement)
        return self._turn_index.within(texts, bar)

    def _frame_neighbours(self, attribute: str) -> set[str]:
        """Current memories that may mean the frame ``attribute`` (see :meth:`framed`): each
        memory's frames are ranked once, in one embedder call for all those not ranked
        yet, and looked up by frame, not by a pass over the scope."""
        assert self.book.meaning is not None
        if self._frame_index is None or self._framed_at != len(self.book.plan.deleted_events):
            self._frame_index, self._frame_pending = {}, {}
            self._framed_at = len(self.book.plan.deleted_events)
            for m in self.book.current():
                self._frame_pending[m.id] = m
        pending = [m for m in self._frame_pending.values() if self._may_frame(m)]
        self._frame_pending = {}
        todo = list(dict.fromkeys(m.statement for m in pending if m.statement not in self.frames))
        if todo:
            ranked = ranked_frames(self.book.meaning.embedder, [last_turn(t) for t in todo])
            self.frames.update(zip(todo, ranked, strict=True))
        for m in pending:
            for a, _s in self.frames[m.statement][:2]:
                if may_mean(self.frames[m.statement], a):
                    self._frame_index.setdefault(a, set()).add(m.id)
        return self._frame_index.get(attribute, set())

    def _may_frame(self, m: Memory) -> bool:
        """The part of :meth:`framed`'s pool that no candidate changes."""
        return (may_restate(m) and m.trust in (Trust.high.value, Trust.human.value)
                and m.source != "tool" and not m.attribute.startswith(TOOL_PREFIX)
                and (m.type != "event" or (m.source == "user" and self.one_thing(m))))

    def one_thing(self, mem: Memory) -> bool:
        """Whether an episode says one thing only (one sentence of its speaker's own): a
        change of one frame retires such an episode; a turn that tells more keeps what else
        it tells, and its words about the old state are superseded by the new fact above it
        in search."""
        return len(self.book.sentences(last_turn(mem.statement))) <= 1

    def restatable(self, cand: Candidate, among: Iterable[str] | None = None) -> list[Memory]:
        """Current memories a candidate may restate: same session, not summaries or
        procedures, and not another *kind* of known slot (the extractor told residence
        from employer; "likes:jazz" and "likes:jazz music" are left to the meaning).
        ``among``: only these memories (its neighbours), in the current set's order."""
        rows = self.book.current() if among is None else [
            self.book.row(mid) for mid in in_order(among, self.book.order) if mid in self.book.live]
        out = []
        for m in rows:
            if m.session != cand.scope.session or not may_restate(m):
                continue
            if (m.attribute and cand.attribute
                    and slot_kind(m.attribute) != slot_kind(cand.attribute)
                    and not is_open(m.attribute) and not is_open(cand.attribute)
                    and not holds_both(m, cand)):
                continue
            out.append(m)
        return out

    def said_before(self, cand: Candidate, among: Iterable[str] | None = None) -> list[Memory]:
        """The memories ``cand`` may restate that its own speaker said in other events: the
        facts one message was split into are never repeats of each other ("I work as a nurse
        at …" is an occupation and an employer memory, each free to change), and the same
        words from another person in the scope are their own memory."""
        own = set(cand.provenance[-1:])
        speaker = cand.details.get("speaker")
        return [m for m in self.restatable(cand, among)
                if not own & set(m.provenance) and m.details.get("speaker") == speaker]

    def sentence_neighbours(self, texts: list[str], bar: float) -> set[str]:
        """Current memories a candidate may restate with a sentence at or above ``bar``
        against one of ``texts``: from the run's sentence index, not a pass over the scope."""
        assert self.book.meaning is not None
        if self._sentence_index is None or self._indexed_at != len(self.book.plan.deleted_events):
            self._sentence_index = SentenceIndex(self.book.meaning, self.book.sentences)
            self._indexed_at = len(self.book.plan.deleted_events)
            for m in self.book.current():
                if may_restate(m):
                    self._sentence_index.add(m.id, m.statement)
        return self._sentence_index.within(texts, bar)

    def pair(self, old: Memory, cand: Candidate) -> Pair:
        return Pair(attribute=cand.attribute or old.attribute or cand.type,
                    older=old.statement, older_at=old.valid_from, older_source=old.source,
                    newer=cand.statement, newer_at=cand.valid_from, newer_source=cand.source)

    def naming(self, value: str, pool: list[Memory]) -> Memory | None:
        """The member of ``pool`` whose own words name ``value`` by meaning, in whatever
        language each is said ("不是行李员" names "works … as a baggage handler"): the one
        with a phrase nearest ``value``, at NAMES_VALUE or above and clearly nearer than
        any other member's. A contrast says what it corrects by that value alone."""
        assert self.book.meaning is not None
        # The latest memories only, as a correction answers what was said lately (pools
        # come in the book's order); their phrases are embedded in one batch, once a run.
        spans = {m.id: phrases(last_turn(m.statement)) for m in pool[-NAMING_POOL:]}
        self.book.meaning.prime([value, *(p for ps in spans.values() for p in ps)])
        best = [(max(self.book.meaning.similarities(value, spans[m.id])), m)
                for m in pool[-NAMING_POOL:] if spans[m.id]]
        best.sort(key=lambda sm: -sm[0])
        if not best or best[0][0] < NAMES_VALUE:
            return None
        if len(best) > 1 and best[0][0] - best[1][0] < NAMES_MARGIN:
            return None
        return best[0][1]

    def closest_sentence(self, text: str, mem: Memory) -> float:
        """The similarity of ``mem`` to the sentence of ``text`` closest to it."""
        assert self.book.meaning is not None
        return max(self.book.meaning.similarities(self.book.gist(last_turn(mem.statement)),
                                             semantic.sentences(gist(text))))

    def about(self, cand: Candidate, pool: list[Memory]) -> list[Memory]:
        """The members of ``pool`` a change is about, best first.

        About the same thing means: the change names a word of the old value that its own
        value lacks ("gave the Yamaha away, I own a Kawai now"), or it shares a word of
        the old value and is at least loosely related in meaning ("black coffee" / "oat
        milk in my coffee"), or it is related in meaning outright ("window seats" / "aisle
        seats"). Unrelated values of one relation ("I like hiking" / "these days I like
        jazz") meet none of these.
        """
        if self.book.meaning is None or not pool:
            return []
        # Compared clause by clause: a correction often opens with a preamble ("small
        # fix, I got that wrong: …") that says nothing about what it corrects.
        mine = semantic.clauses(gist(cand.statement))
        theirs = [self.book.gist(m.statement) for m in pool]
        sims = self.book.meaning.pairwise(mine, theirs).max(axis=0)
        own = set(content_words(norm_text(cand.value))) if cand.value else set()
        said = set(tokens(last_turn(cand.statement)))
        for event in cand.provenance[-1:]:
            said |= set(tokens(self.book.said.get(event, "")))
        out: list[tuple[float, Memory]] = []
        for mem, sim in zip(pool, (float(x) for x in sims), strict=True):
            words = set(content_words(value_of(mem)))
            if (words - own) & said or (words & said and sim >= semantic.LOOSELY_RELATED) or (
                    sim >= semantic.RELATED):
                out.append((sim, mem))
        return [m for _sim, m in sorted(out, key=lambda p: -p[0])]

