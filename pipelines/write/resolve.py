"""Dedup and resolve: every candidate ends as ADD, UPDATE, NOOP, CONFLICT, DELETE or REJECT.

Nothing is overwritten: an UPDATE closes the old version (valid_to, invalidated_at,
superseded_by) and appends a new one that ``supersedes`` it. Only memories of the same
slot (subject + attribute) can replace one another.

With a :class:`~sleepmem.pipelines.semantic.Meaning` (the embedder of the run), the
judgement also goes by meaning, the same for every extractor:

- a candidate that says what a current memory says, in any wording or language, is a
  NOOP on that memory (mention + provenance), never a second memory;
- a slotless statement that corrects a memory it is close to in meaning ("actually …",
  "not … anymore") is an UPDATE of that memory;
- a change in any wording (a correction, a time shift such as "these days" or "from now
  on", feedback) supersedes the memory of the same subject and type it is *about*: one
  whose value it names, or that is related to it in meaning, whatever slot each got;
  never one from the same message, and never on an addition ("… too");
- a trusted tool field and a user statement about the same thing that disagree form a
  conflict set; agreeing, they are one memory mentioned twice;
- a forget request erases the memories its object means, by meaning and by words.

Open slots (``rel:<relation>``, see :mod:`sleepmem.pipelines.types`) resolve like known
slots; many-valued relations ("owns", "uses") add a value instead of contradicting.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache

import numpy as np

from sleepmem.models import CURRENT_STATUSES, Memory, MemoryStatus, Trust
from sleepmem.pipelines import semantic
from sleepmem.pipelines.language import Reading, has_cjk, is_han, read
from sleepmem.pipelines.lexical import tokens
from sleepmem.pipelines.memories import (
    content_hash,
    copy_row,
    memory_id,
    new_memory,
    norm_text,
    own_words,
)
from sleepmem.pipelines.semantic import Meaning, gist
from sleepmem.pipelines.topics import LABELS, topics_of_memory
from sleepmem.pipelines.types import (
    OPEN_SLOT_PREFIX,
    TOOL_PREFIX,
    Candidate,
    Op,
    Rejection,
    is_many_valued,
)
from sleepmem.pipelines.write.extract.frames import frame_named, may_mean, ranked_frames
from sleepmem.pipelines.write.neighbours import SentenceIndex, in_order
from sleepmem.pipelines.write.verdicts import Pair, Verdict, Verdicts
from sleepmem.pipelines.write.versions import AuditDraft, successor, supersede

__all__ = ["AuditDraft", "Plan", "ResolvePolicy", "Resolver", "TtlFor"]

TtlFor = Callable[[str], timedelta | None]
Slot = tuple[str, str, str]  # subject, attribute, session
# Memories that never absorb a restatement: compressed summaries and procedure statistics.
_NOT_RESTATABLE = ("summary", "procedure")
# Strong correction markers only: "now" or "these days" also open plain statements
# ("I'm now learning Spanish too"), and a correction by meaning retires a memory.
_CORRECTION = re.compile(
    r"(?i)\b(?:actually|not\b.{0,30}\bany ?more|no longer|that'?s (?:wrong|not (?:right|true))|"
    r"correction|instead|sold|switched|changed|gave up|quit|stopped|used to)\b"
    r"|其实|不对|错了|更正|纠正|不再|已经不|改成|换成|卖了|不是.{1,8}了"
)
# The markers that are verbs of change, and a negation just before one ("I won't quit",
# "we never switched", "didn't sell"): a negated change is none.
_CHANGE_VERBS = frozenset({"sold", "switched", "changed", "gave up", "quit", "stopped"})
_NEGATION_BEFORE = re.compile(
    r"(?i)\b(?:not|never|won'?t|wouldn'?t|don'?t|doesn'?t|didn'?t|can'?t|cannot|couldn'?t|"
    r"haven'?t|hasn'?t|hadn'?t|shouldn'?t|will not|do not|did not)\s+(?:\w+\s+)?$"
)

# Types a change of another slot may update (never an episode, summary or procedure).
_CHANGEABLE = ("fact", "preference", "identity")

# Words that say a value joins the others rather than replacing them.
# "too" before a word is a degree ("too much space"), not an addition; "还是" is "still".
_ADDITIVE = re.compile(
    r"(?i)\btoo\b(?!\s+(?!now\b|these\b|nowadays\b|lately\b|today\b)[a-z])"
    r"|\b(?:also|as well|in addition|besides)\b|也|还(?!是|没)")


@dataclass(slots=True)
class Plan:
    """What one batch does to one scope, applied in a single SQL transaction."""

    scope_key: str
    new: dict[str, Memory] = field(default_factory=dict)
    changed: dict[str, Memory] = field(default_factory=dict)
    deleted: dict[str, Memory] = field(default_factory=dict)
    deleted_events: set[str] = field(default_factory=set)
    audits: list[AuditDraft] = field(default_factory=list)

    def touch(self, mem: Memory) -> Memory:
        """The row to mutate for ``mem``: a new row in place, an existing one as a copy."""
        if mem.id in self.new:
            return self.new[mem.id]
        if mem.id not in self.changed:
            self.changed[mem.id] = copy_row(mem)
        return self.changed[mem.id]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for a in self.audits:
            out[a.op.value] = out.get(a.op.value, 0) + 1
        return out


@dataclass(frozen=True, slots=True)
class ResolvePolicy:
    ttl: TtlFor
    session_ttl: timedelta
    chitchat_ttl: timedelta = timedelta(days=1)
    procedure_min_samples: int = 3
    procedure_min_success_rate: float = 0.6
    extractor: str = "rules"


class Resolver:
    """Applies candidates one by one, in event-time order, to a scope's current memories."""

    def __init__(
        self,
        *,
        scope_key: str,
        existing: list[Memory],
        now: datetime,
        policy: ResolvePolicy,
        all_versions: list[Memory] | None = None,
        meaning: Meaning | None = None,
        verdicts: Verdicts | None = None,
    ) -> None:
        self.now = now
        self.policy = policy
        self.meaning = meaning
        # The judge model's answers on uncertain pairs (pipelines.verdicts), when one is
        # configured: the stages try a batch on a probe first and ask what it left open.
        self.verdicts = verdicts
        self._gists: dict[str, str] = {}
        # What each event of the batch said, in the speaker's words (set by the stages):
        # a change told over two clauses ("The Canon went to my nephew; these days I own
        # a Sony") names the old value in a clause its own candidate does not carry.
        self.said: dict[str, str] = {}
        self._parts: dict[str, list[str]] = {}
        self._frames: dict[str, list[tuple[str, float]]] = {}
        self.plan = Plan(scope_key=scope_key)
        self._current: dict[str, Memory] = {
            m.id: m for m in existing if m.status in CURRENT_STATUSES
        }
        self._versions: dict[str, Memory] = {m.id: m for m in (all_versions or existing)}
        # Lookup tables keep a batch linear in its size, not quadratic in the scope's.
        self._slots: dict[Slot, set[str]] = {}
        self._texts: dict[tuple[str, str], str] = {}
        # Neighbours are looked up, never gathered by a pass over the scope: each current
        # memory's place in the current set's order (a pass's order, kept exactly), the
        # tool fields apart, and the sentence vectors of what a candidate may restate,
        # built on first use (forget requests rewrite statements: it is built again).
        self._order: dict[str, int] = {}
        self._next = 0
        self._tool_fields: set[str] = set()
        self._sentence_index: SentenceIndex | None = None
        self._indexed_at = 0
        self._frame_index: dict[str, set[str]] | None = None
        self._turn_index: SentenceIndex | None = None
        self._turns_at = 0
        self._slotted: dict[str, set[str]] = {}
        self._frame_pending: dict[str, Memory] = {}
        self._framed_at = 0
        for mem in self._current.values():
            self._remember(mem)

    def probe(self) -> Resolver:
        """A resolver over this one's state as it stands, sharing its caches and verdicts:
        what it decides touches none of this one's rows (every change of an existing row
        goes through a copy, Plan.touch), so a batch can be tried on it first."""
        other = Resolver(scope_key=self.plan.scope_key, existing=self.current(),
                         all_versions=list(self._versions.values()), now=self.now,
                         policy=self.policy, meaning=self.meaning, verdicts=self.verdicts)
        other.said = self.said
        other._gists, other._parts, other._frames = self._gists, self._parts, self._frames
        return other

    def _remember(self, mem: Memory) -> None:
        if mem.id not in self._order:
            self._order[mem.id] = self._next
            self._next += 1
        if _tooled(mem.attribute, mem.source):
            self._tool_fields.add(mem.id)
        if self._sentence_index is not None and _may_restate(mem):
            self._sentence_index.add(mem.id, mem.statement)
        if self._frame_index is not None:
            self._frame_pending[mem.id] = mem
        if self._turn_index is not None and _may_restate(mem):
            self._turn_index.add(mem.id, mem.statement)
        if mem.attribute:
            self._slotted.setdefault(mem.subject, set()).add(mem.id)
        if mem.attribute:
            self._slots.setdefault((mem.subject, mem.attribute, mem.session), set()).add(mem.id)
        else:
            self._texts.setdefault((mem.session, norm_text(mem.statement)), mem.id)

    def _forget_lookup(self, mem: Memory) -> None:
        self._order.pop(mem.id, None)
        if mem.attribute:
            self._slots.get((mem.subject, mem.attribute, mem.session), set()).discard(mem.id)
        else:
            key = (mem.session, norm_text(mem.statement))
            if self._texts.get(key) == mem.id:
                del self._texts[key]

    # -- views of the scope as it stands mid-batch ---------------------------------------
    def _row(self, mid: str) -> Memory:
        return self.plan.new.get(mid) or self.plan.changed.get(mid) or self._versions[mid]

    def current(self) -> list[Memory]:
        return [self._row(mid) for mid in self._current]

    def _slot_members(self, slot: Slot) -> list[Memory]:
        return [self._row(mid) for mid in sorted(self._slots.get(slot, ())) if mid in self._current]

    def _add(self, mem: Memory) -> Memory:
        self.plan.new[mem.id] = mem
        self._current[mem.id] = mem
        self._versions[mem.id] = mem
        self._remember(mem)
        return mem

    def _retire(self, mem: Memory, *, at: datetime, by: str | None) -> None:
        """``mem`` is superseded (by ``by``, or by nothing) as of ``at``: the plan's copy
        of it is closed by the one versioning rule, and it leaves the lookups."""
        row = supersede(self.plan.touch(mem), by=by, at=at, now=self.now)
        self._current.pop(mem.id, None)
        self._forget_lookup(row)

    # -- meaning -------------------------------------------------------------------------
    def _gist(self, statement: str) -> str:
        # Memoised: every candidate of a run is compared with the same memories.
        if statement not in self._gists:
            self._gists[statement] = gist(statement)
        return self._gists[statement]

    def _sentences(self, statement: str) -> list[str]:
        if statement not in self._parts:
            self._parts[statement] = semantic.sentences(self._gist(statement))
        return self._parts[statement]

    def _near(self, cand: Candidate, pool: list[Memory], *,
              own_turns: bool = False) -> list[tuple[Memory, float, bool]]:
        """``pool`` members by similarity to ``cand``, best first: (memory, sim, same).
        ``own_turns``: compare the last turns only (a reply's own words, without the turn
        before it that an episode keeps for context)."""
        if self.meaning is None or not pool:
            return []
        def words(statement: str) -> str:
            return _last_turn(statement) if own_turns else statement
        text = gist(words(cand.statement))
        others = [self._gist(words(m.statement)) for m in pool]
        sims = self.meaning.similarities(text, others)
        order = np.argsort(-np.asarray(sims, dtype=np.float32), kind="stable")
        return [
            (pool[i], sims[i], self.meaning.same(text, others[i], sims[i]))
            for i in (int(j) for j in order)
        ]

    def _framed(self, cand: Candidate) -> list[Memory]:
        """The current memories of ``cand``'s subject, of any type or slot, episodes
        included, that mean the frame its attribute names ("Lisbon is home now" meets "I
        live in Berlin, near the zoo" as one residence): what a change of that frame is
        about when its own slot holds nothing."""
        frame = frame_named(cand.attribute)
        if frame is None or self.meaning is None:
            return []
        pool = [m for m in self._said_before(cand, self._frame_neighbours(frame.attribute))
                if m.subject == cand.subject and m.attribute != cand.attribute
                and m.trust in (Trust.high.value, Trust.human.value) and m.source != "tool"
                and not m.attribute.startswith(TOOL_PREFIX)
                and (m.type != "event" or (m.source == "user" and self._one_thing(m)))]
        todo = list(dict.fromkeys(m.statement for m in pool if m.statement not in self._frames))
        if todo:
            ranked = ranked_frames(self.meaning.embedder, [_last_turn(t) for t in todo])
            self._frames.update(zip(todo, ranked, strict=True))
        return [m for m in pool if may_mean(self._frames[m.statement], frame.attribute)]

    def _turn_neighbours(self, texts: list[str], bar: float) -> set[str]:
        """Current memories a candidate may restate whose own last turn is at or above
        ``bar`` against one of ``texts`` (``_near`` with ``own_turns``), from an index of
        the run like :meth:`_sentence_neighbours`."""
        assert self.meaning is not None
        if self._turn_index is None or self._turns_at != len(self.plan.deleted_events):
            self._turn_index = SentenceIndex(
                self.meaning, lambda statement: [self._gist(_last_turn(statement))])
            self._turns_at = len(self.plan.deleted_events)
            for m in self.current():
                if _may_restate(m):
                    self._turn_index.add(m.id, m.statement)
        return self._turn_index.within(texts, bar)

    def _frame_neighbours(self, attribute: str) -> set[str]:
        """Current memories that may mean the frame ``attribute`` (see ``_framed``): each
        memory's frames are ranked once, in one embedder call for all those not ranked
        yet, and looked up by frame, not by a pass over the scope."""
        assert self.meaning is not None
        if self._frame_index is None or self._framed_at != len(self.plan.deleted_events):
            self._frame_index, self._frame_pending = {}, {}
            self._framed_at = len(self.plan.deleted_events)
            for m in self.current():
                self._frame_pending[m.id] = m
        pending = [m for m in self._frame_pending.values() if self._may_frame(m)]
        self._frame_pending = {}
        todo = list(dict.fromkeys(m.statement for m in pending if m.statement not in self._frames))
        if todo:
            ranked = ranked_frames(self.meaning.embedder, [_last_turn(t) for t in todo])
            self._frames.update(zip(todo, ranked, strict=True))
        for m in pending:
            for a, _s in self._frames[m.statement][:2]:
                if may_mean(self._frames[m.statement], a):
                    self._frame_index.setdefault(a, set()).add(m.id)
        return self._frame_index.get(attribute, set())

    def _may_frame(self, m: Memory) -> bool:
        """The part of ``_framed``'s pool that no candidate changes."""
        return (_may_restate(m) and m.trust in (Trust.high.value, Trust.human.value)
                and m.source != "tool" and not m.attribute.startswith(TOOL_PREFIX)
                and (m.type != "event" or (m.source == "user" and self._one_thing(m))))

    def _one_thing(self, mem: Memory) -> bool:
        """Whether an episode says one thing only (one sentence of its speaker's own): a
        change of one frame retires such an episode; a turn that tells more keeps what else
        it tells, and its words about the old state are superseded by the new fact above it
        in search."""
        return len(self._sentences(_last_turn(mem.statement))) <= 1

    def _restatable(self, cand: Candidate, among: Iterable[str] | None = None) -> list[Memory]:
        """Current memories a candidate may restate: same session, not summaries or
        procedures, and not another *kind* of known slot (the extractor told residence
        from employer; "likes:jazz" and "likes:jazz music" are left to the meaning).
        ``among``: only these memories (its neighbours), in the current set's order."""
        rows = self.current() if among is None else [
            self._row(mid) for mid in in_order(among, self._order) if mid in self._current]
        out = []
        for m in rows:
            if m.session != cand.scope.session or not _may_restate(m):
                continue
            if (m.attribute and cand.attribute and _kind(m.attribute) != _kind(cand.attribute)
                    and not _open(m.attribute) and not _open(cand.attribute)
                    and not _holds_both(m, cand)):
                continue
            out.append(m)
        return out

    def _said_before(self, cand: Candidate, among: Iterable[str] | None = None) -> list[Memory]:
        """The memories ``cand`` may restate that its own speaker said in other events: the
        facts one message was split into are never repeats of each other ("I work as a nurse
        at …" is an occupation and an employer memory, each free to change), and the same
        words from another person in the scope are their own memory."""
        own = set(cand.provenance[-1:])
        speaker = cand.details.get("speaker")
        return [m for m in self._restatable(cand, among)
                if not own & set(m.provenance) and m.details.get("speaker") == speaker]

    def _sentence_neighbours(self, texts: list[str], bar: float) -> set[str]:
        """Current memories a candidate may restate with a sentence at or above ``bar``
        against one of ``texts``: from the run's sentence index, not a pass over the scope."""
        assert self.meaning is not None
        if self._sentence_index is None or self._indexed_at != len(self.plan.deleted_events):
            self._sentence_index = SentenceIndex(self.meaning, self._sentences)
            self._indexed_at = len(self.plan.deleted_events)
            for m in self.current():
                if _may_restate(m):
                    self._sentence_index.add(m.id, m.statement)
        return self._sentence_index.within(texts, bar)

    def _twin(self, cand: Candidate) -> Memory | None:
        """The current memory that already says everything ``cand`` says, if any.

        Compared sentence by sentence: a message that told several facts is one memory,
        and a later restatement of one of them is a mention of it. A candidate that
        carries a correction marker the memory lacks is a change, never a repeat.
        """
        if self.meaning is None:
            return None
        mine = self._sentences(cand.statement)
        # Only a memory with a sentence at the floor can cover one of the candidate's.
        pool = self._said_before(cand, self._sentence_neighbours(mine, semantic.FLOOR))
        if not pool:
            return None
        owners: list[int] = []
        theirs: list[str] = []
        for i, mem in enumerate(pool):
            for part in self._sentences(mem.statement):
                owners.append(i)
                theirs.append(part)
        sims = self.meaning.pairwise(mine, theirs)
        covered: dict[int, set[int]] = {}
        best: dict[int, float] = {}
        for k, j in zip(*np.nonzero(sims >= semantic.FLOOR), strict=True):
            sim = float(sims[k, j])
            if self.meaning.same(mine[k], theirs[j], sim) and (
                    sim >= semantic.SAME_FRAME_SWAP or not self._other_filler(mine[k], theirs[j])):
                covered.setdefault(owners[j], set()).add(int(k))
                best[owners[j]] = max(best.get(owners[j], 0.0), sim)
        marked = _marks_correction(cand)
        for i in sorted(covered, key=lambda i: -best[i]):
            if len(covered[i]) < len(mine):
                continue
            if marked and not _corrects(pool[i].statement):
                continue
            return pool[i]
        return None

    def _ended(self, cand: Candidate) -> list[Memory]:
        """The speaker's current memories whose value a statement ends ("I've given up
        squash" ends "I love playing squash with colleagues"), whatever slot or type
        each was read into: what was given up no longer holds."""
        ended = cand.details.get("ends")
        if not isinstance(ended, str) or not ended or cand.trust == Trust.low.value:
            return []
        return [m for m in self._said_before(cand, self._slotted.get(cand.subject, set()))
                if m.subject == cand.subject and m.type in _CHANGEABLE
                and m.attribute != cand.attribute and not m.attribute.startswith(TOOL_PREFIX)
                and (_mentions(_value(m), ended) or _mentions(m.statement, ended))]

    def _reversed(self, cand: Candidate) -> list[Memory]:
        """The speaker's earlier likings that ranked below their value what ``cand`` now
        likes ("I prefer tea over coffee", then "coffee is my go-to"): a reversal of one
        taste, where two likings side by side would both stand."""
        if self.meaning is None or cand.type != "preference" or cand.source != "user" or (
                cand.negated or cand.trust == Trust.low.value):
            return []
        said = self._gist(_said(cand))
        near = self._turn_neighbours([said], semantic.LOOSELY_RELATED)
        ranked = [(m, below) for m in self._said_before(cand, near)
                  if m.type == "preference" and m.source == "user" and m.subject == cand.subject
                  and (below := _reading(self._gist(_last_turn(m.statement))).below)]
        # Only a candidate some neighbour's comparison could be about is parsed.
        value = (_reading(said).value or norm_text(cand.value)) if ranked else ""
        return [m for m, below in ranked
                if value and (_mentions(value, below) or _mentions(below, value))]

    def _other_filler(self, a: str, b: str) -> bool:
        """Whether two sentences close in meaning give one predicate two values ("I prefer
        coffee in the morning" / "I prefer tea over coffee in the evenings"): the clause
        analysis names each one's head and value, and values that share no word and do
        not mean the same are two statements unless the sentences are as close as a frame
        swap must be ("I live in NYC" / "I live in New York City")."""
        assert self.meaning is not None
        ra, rb = _reading(a), _reading(b)
        if not (ra.head and ra.head == rb.head and ra.value and rb.value) or (
                set(_content_words(ra.value)) & set(_content_words(rb.value))):
            return False
        [sim] = self.meaning.similarities(ra.value, [rb.value])
        return sim < semantic.SAME_VALUE

    def _judged_neighbour(self, cand: Candidate) -> tuple[Memory | None, Verdict | None]:
        """The lasting memory nearest a lasting candidate when the rule found no twin but
        the two are related in meaning, and the judge model's verdict on the pair: the
        band where one thing said two ways ("my dietary restrictions include shellfish" /
        "I'm allergic to shellfish") and two things are hardest to tell apart."""
        if self.verdicts is None or cand.type not in _CHANGEABLE:
            return None, None
        pool = [m for m in self._said_before(cand) if m.type in _CHANGEABLE]
        for mem, sim, _same in self._near(cand, pool)[:1]:
            if sim < semantic.LOOSELY_RELATED:
                break
            return mem, self.verdicts.of(self._pair(mem, cand))
        return None, None

    def _pair(self, old: Memory, cand: Candidate) -> Pair:
        return Pair(attribute=cand.attribute or old.attribute or cand.type,
                    older=old.statement, older_at=old.valid_from, older_source=old.source,
                    newer=cand.statement, newer_at=cand.valid_from, newer_source=cand.source)

    def _twin_in_slot(self, cand: Candidate, members: list[Memory]) -> Memory | None:
        """A slot member that says what ``cand`` says with another value string ("nyc" /
        "new york city"): the statements must mean the same *and* either the values do too
        or each wording names the other's value, since the extractor already told the
        values apart ("英文" / "中文" differ by one character)."""
        if self.meaning is None:
            return None
        for mem, sim, same in self._near(cand, members)[:1]:
            old, new = _value(mem), norm_text(cand.value)
            if not new:
                return None
            # One value holds the other ("avid vegetarian" / "vegetarian", said in two
            # languages): the same value, qualified, when the statements are related.
            a, b = set(_content_words(old)), set(_content_words(new))
            if a and b and (a <= b or b <= a) and sim >= semantic.RELATED and not (
                    _marks_correction(cand) or cand.negated):
                return mem
            if not same:
                return None
            # A correction names the value it retires ("gave up the violin"): that is a
            # change, not a misread of the same value.
            if not _marks_correction(cand) and (
                (len(old) >= 2 and _mentions(cand.statement, old))
                or (len(new) >= 2 and _mentions(mem.statement, new))
            ):
                return mem  # each wording names the other's value: one was misread
            if _marks_correction(cand) and semantic.frame_swap(new, old):
                return None  # a change between two values that differ in one span
            [sim] = self.meaning.similarities(new, [old])
            if semantic.same_meaning(new, old, sim) and sim >= semantic.SAME_VALUE:
                return mem
        return None

    def _corrected(self, cand: Candidate) -> Memory | None:
        """The memory a correction or a change updates when its own slot holds nothing.

        A slotless correction ("actually …", "not … anymore") updates the memory of the
        subject it is closest to in meaning (it inherits the slot). A change of any other
        wording (a time shift, "these days", "from now on"; feedback) updates the memory of
        the same subject and type, in a slot of a compatible kind, that it is *about*: one
        whose value it names or that is related to it in meaning (see :meth:`_about`).
        """
        if self.meaning is None:
            return None
        # A message never corrects itself: "That's out of date, the bus route was cut. I
        # cycle to work now." is one correction, its preamble no second one of the first.
        # A person corrects what they said, never what someone else in the scope said.
        speaker = cand.details.get("speaker")
        last = _last_turn(cand.statement)
        # Feedback the extractor judged negative ("you got that wrong") disputes what the
        # agent said from memory: a correction, whatever words it disputes it in.
        if _corrects(last) or _disputes(cand):
            # A slotless correction may update any memory of the subject (it inherits the
            # slot); a slotted one only a slotless memory or one of its own slot. What it
            # corrects is judged by the speakers' own turns: the turn before a reply, kept
            # for context, is someone else's words.
            # A slotless correction ("she goes to Hillcrest, not Oakwood") may be about a
            # person the speaker named before: whose fact it corrects, its meaning says.
            # A contrast names what it corrects ("是湘潭，不是长沙"): any slot holding
            # that value is the one it corrects.
            denied = norm_text(str(cand.details.get("replaces") or ""))
            # Only the nearest counts, and only at RELATED (feedback aside, which may
            # raise a lower one by a sentence): the neighbours at that bar hold it.
            near = None if _disputes(cand) else self._turn_neighbours(
                [gist(last)], semantic.RELATED)
            pool = [
                m for m in self._said_before(cand, near)
                if (m.subject == cand.subject or not cand.attribute) and (
                    not cand.attribute or not m.attribute or m.attribute == cand.attribute
                    or (len(denied) >= 2 and _mentions(_value(m), denied)))
            ]
            for mem, sim, _same in self._near(cand, pool, own_turns=True)[:1]:
                if _disputes(cand):
                    # Feedback opens with what it disputes ("Hmm, you mixed that up."),
                    # words the memory lacks: its sentences are compared one by one.
                    sim = max(sim, self._closest_sentence(last, mem))
                # An episode is corrected only by a turn that restates it with another
                # detail, not by any turn on the same theme (see semantic.shares_frame).
                if sim >= semantic.RELATED and not (
                        cand.trust == Trust.low.value and mem.trust == Trust.high.value) and (
                        mem.attribute or semantic.shares_frame(_own_turn(cand.statement, speaker),
                                                               _own_turn(mem.statement, speaker))):
                    return mem
        if not _shifts(cand) or cand.trust == Trust.low.value:
            return None
        # A slotless episode changes a slotted memory only when it says so outright
        # (feedback, or a change the extractor or a correction marker flagged).
        if not cand.attribute and not (cand.details.get("feedback") or _marks_correction(cand)):
            return None
        pool = [
            m for m in self._said_before(cand, self._slotted.get(cand.subject, set()))
            if m.subject == cand.subject and m.attribute and not m.attribute.startswith(
                TOOL_PREFIX) and m.attribute != cand.attribute
            and (m.type == cand.type or not cand.attribute)
            and m.type in _CHANGEABLE
        ]
        about = self._about(cand, pool)
        return about[0] if about else None

    def _closest_sentence(self, text: str, mem: Memory) -> float:
        """The similarity of ``mem`` to the sentence of ``text`` closest to it."""
        assert self.meaning is not None
        return max(self.meaning.similarities(self._gist(_last_turn(mem.statement)),
                                             semantic.sentences(gist(text))))

    def _about(self, cand: Candidate, pool: list[Memory]) -> list[Memory]:
        """The members of ``pool`` a change is about, best first.

        About the same thing means: the change names a word of the old value that its own
        value lacks ("gave the Yamaha away, I own a Kawai now"), or it shares a word of
        the old value and is at least loosely related in meaning ("black coffee" / "oat
        milk in my coffee"), or it is related in meaning outright ("window seats" / "aisle
        seats"). Unrelated values of one relation ("I like hiking" / "these days I like
        jazz") meet none of these.
        """
        if self.meaning is None or not pool:
            return []
        # Compared clause by clause: a correction often opens with a preamble ("small
        # fix, I got that wrong: …") that says nothing about what it corrects.
        mine = semantic.clauses(gist(cand.statement))
        theirs = [self._gist(m.statement) for m in pool]
        sims = self.meaning.pairwise(mine, theirs).max(axis=0)
        own = set(_content_words(norm_text(cand.value))) if cand.value else set()
        said = set(tokens(_last_turn(cand.statement)))
        for event in cand.provenance[-1:]:
            said |= set(tokens(self.said.get(event, "")))
        out: list[tuple[float, Memory]] = []
        for mem, sim in zip(pool, (float(x) for x in sims), strict=True):
            words = set(_content_words(_value(mem)))
            if (words - own) & said or (words & said and sim >= semantic.LOOSELY_RELATED) or (
                    sim >= semantic.RELATED):
                out.append((sim, mem))
        return [m for _sim, m in sorted(out, key=lambda p: -p[0])]

    def _tool_counterpart(self, cand: Candidate) -> tuple[Memory, bool] | None:
        """A trusted tool field and what the user said about the same thing.

        Returns the other side and whether they agree. "About the same thing" needs the
        meaning to be close and either the field's key words in the user's words or a
        closer meaning still (another language), so that a tool's renewal date is never
        paired with the user's plan.
        """
        if self.meaning is None or cand.trust != Trust.high.value:
            return None
        # A tool's side is a field it returned, under its key path or a known attribute
        # ("email"); the user's side is anything they said, episodes included.
        is_tool = _tooled(cand.attribute, cand.source)
        pool = [
            m for m in self._restatable(cand, None if is_tool else self._tool_fields)
            if m.trust == Trust.high.value and m.subject == cand.subject
            and _tooled(m.attribute, m.source) != is_tool
        ]
        for rank, (mem, sim, same) in enumerate(self._near(cand, pool)):
            tool_side, user_side = (cand.attribute, _as_said(mem.statement, mem.details)) if (
                is_tool) else (mem.attribute, _as_said(cand.statement, cand.details))
            value = cand.value if is_tool else str(mem.details.get("value") or _value(mem))
            said = set(tokens(user_side))
            keyed = bool(set(_key_words(tool_side)) & said)
            paired = rank == 0 and sim >= semantic.RELATED and (
                keyed or sim >= semantic.SAME_MEANING_CROSS)
            if not paired:
                # The user's words name the field itself ("I'm on the Pro plan" and
                # "subscription_plan"): what they said is about that field when it is
                # close in meaning to the field named as theirs ("my subscription plan");
                # the record's container words ("account", "customer") would dilute it.
                # Without a word in common ("I am subscribed to the Pro service"), the
                # meaning alone must still say it, at a looser bar, for the nearest pair.
                leaf = " ".join(_leaf_words(tool_side))
                phrases = [f"my {leaf}", f"my {leaf} is {value}" if value else f"my {leaf}"]
                bar = semantic.RELATED if set(tokens(leaf)) & said else (
                    semantic.LOOSELY_RELATED if rank == 0 else 2.0)
                paired = bool(leaf) and max(self.meaning.similarities(
                    self._gist(user_side), phrases)) >= bar
            if not paired:
                continue
            agrees = same or bool(value and _mentions(user_side, norm_text(value)))
            return mem, agrees
        return None

    # -- the judgement -------------------------------------------------------------------
    def apply(self, cand: Candidate) -> None:
        if cand.forget_topic is not None:
            self._forget(cand)
        elif cand.type == "procedure":
            self._procedure(cand)
        elif cand.attribute:
            self._slot(cand)
        else:
            self._episode(cand)

    def reject(self, rejection: Rejection) -> None:
        self.plan.audits.append(
            AuditDraft(
                Op.REJECT,
                [],
                [],
                rejection.reason,
                list(rejection.candidate.provenance),
                content_hash(rejection.candidate.statement),
            )
        )

    def _new(self, cand: Candidate, *, status: str = MemoryStatus.active.value) -> Memory:
        if cand.one_off:
            ttl: timedelta | None = self.policy.session_ttl
        elif cand.details.get("chitchat"):
            ttl = self.policy.chitchat_ttl
        else:
            ttl = self.policy.ttl(cand.type)
        return new_memory(
            cand,
            scope_key=self.plan.scope_key,
            now=self.now,
            ttl=ttl,
            extractor=self.policy.extractor,
            status=status,
        )

    def _noop(self, mem: Memory, cand: Candidate, reason: str) -> None:
        row = self.plan.touch(mem)
        # A mention is an event: two facts of one message that both restate this memory
        # ("I'm a QA engineer at Initech" after "I work at Initech as a QA engineer") count once.
        if not cand.provenance or any(e not in row.provenance for e in cand.provenance):
            row.mention_count += 1
        row.provenance = list(dict.fromkeys([*row.provenance, *cand.provenance]))
        # Mentions raise importance and slide expiry (DESIGN rules 6 and 11); recency is
        # left alone: only retrieval hits refresh it.
        bump = 0.1 if cand.emphasis else 0.05
        row.importance = min(1.0, max(row.importance, cand.importance) + bump)
        row.confidence = max(row.confidence, cand.confidence)
        ttl = self.policy.ttl(row.type)
        if ttl is not None and row.expires_at is not None:
            row.expires_at = max(row.expires_at, self.now + ttl)
        self.plan.audits.append(AuditDraft(Op.NOOP, [row.id], [row.id], reason, cand.provenance))

    def _episode(self, cand: Candidate) -> None:
        same = self._texts.get((cand.scope.session, norm_text(cand.statement)))
        if same is not None and same in self._current:
            self._noop(self._row(same), cand, "repeat of an existing memory")
            return
        if self._by_meaning(cand):
            return
        mem = self._add(self._new(cand))
        self.plan.audits.append(AuditDraft(Op.ADD, [], [mem.id], "new memory", cand.provenance))

    def weighs_meaning(self, cand: Candidate) -> bool:
        """Whether ``cand`` is judged by meaning too. Not an assistant's or an observer's
        episode, nor small talk: their repeats cost an embedding each and a duplicate of
        them loses nothing (exact repeats are still caught by their text)."""
        return self.meaning is not None and not (
            cand.type == "event" and (cand.source not in ("user", "system", "tool")
                                      or cand.inferred or bool(cand.details.get("chitchat")))
        )

    def _by_meaning(self, cand: Candidate) -> bool:
        """Judge ``cand`` by meaning against the scope; True when that decided it."""
        if not self.weighs_meaning(cand):
            return False
        twin = self._twin(cand)
        if twin is not None:
            self._noop(twin, cand, "says what an existing memory says")
            return True
        near, verdict = self._judged_neighbour(cand)
        if near is not None and verdict is Verdict.SAME:
            self._noop(near, cand, "the judge model read it as the same thing")
            return True
        if near is not None and verdict is Verdict.UPDATE:
            if near.attribute and not cand.attribute:
                cand.attribute, cand.subject = near.attribute, near.subject
            self._supersede([near], cand, reason="the judge model read it as a change")
            return True
        pair = self._tool_counterpart(cand)
        if pair is not None:
            other, agrees = pair
            if agrees:
                self._noop(other, cand, "a trusted tool agrees with what the user said")
            else:
                self._conflict([other], cand)
            return True
        old = self._corrected(cand)
        if old is not None:
            if old.attribute and not cand.attribute:
                cand.attribute, cand.subject = old.attribute, old.subject
            self._supersede([old], cand, reason="a correction of a memory close in meaning")
            return True
        return False

    def _retire_disputed(self, cand: Candidate, *, by: str) -> None:
        """The agent's turn that negative feedback disputes stops counting as current when
        the feedback corrects a memory: it said what was corrected ("How is Biscuit the
        golden retriever?"), and the feedback's episode keeps it, as the turn it answers,
        beside the fix."""
        disputed = cand.details["disputes"]
        for mem in self.current():
            if (mem.type == "event" and mem.source == "assistant" and mem.id != by
                    and mem.provenance == [disputed]):
                self._retire(mem, at=cand.valid_from, by=by)
                self.plan.audits.append(AuditDraft(
                    Op.INVALIDATE, [mem.id], [by], "the agent's turn the user's feedback disputed",
                    cand.provenance))

    def _slot(self, cand: Candidate) -> None:
        slot: Slot = (cand.subject, cand.attribute, cand.scope.session)
        members = self._slot_members(slot)
        value = norm_text(cand.value or cand.statement)
        if not members and (ended := self._ended(cand)):
            self._supersede(ended, cand, reason="an end of what these memories hold")
            return
        if not members and (reversed_ := self._reversed(cand)):
            self._supersede(reversed_, cand,
                            reason="a liking for what an earlier one ranked below")
            return
        if not members and _shifts(cand) and cand.trust != Trust.low.value and (
                framed := self._framed(cand)):
            # A change of a frame whose own slot is empty updates what the scope said of
            # that frame in other words, an episode as much as a fact: all of it when the
            # frame holds one value, what the change names or is about when it holds many
            # ("done with coffee, it's matcha now" retires the espresso, not the tea).
            if is_many_valued(cand.attribute, cand.details):
                framed = _named(framed, cand) or self._about(cand, framed)
            if framed and self._twin_in_slot(cand, framed) is None:
                self._supersede(framed, cand, reason="a change of what these memories mean")
                return
        if not members:
            if cand.negated and not cand.value:
                self.plan.audits.append(
                    AuditDraft(Op.NOOP, [], [], "negation of an unknown slot", cand.provenance)
                )
                return
            if self._by_meaning(cand):
                return
            mem = self._add(self._new(cand))
            self.plan.audits.append(
                AuditDraft(Op.ADD, [], [mem.id], "new memory", cand.provenance)
            )
            return

        same = [m for m in members if _value(m) == value and not cand.negated]
        if same:
            self._noop(same[0], cand, "repeat of an existing memory")
            return
        twin = self._twin_in_slot(cand, members) if not cand.negated else None
        if twin is not None:
            self._noop(twin, cand, "says what an existing memory says")
            return
        strong = False
        if is_many_valued(cand.attribute, cand.details):
            # "I own a bike" and "I own a car" are both true: only a change (or negation)
            # retires a value, and only the values it is about. An addition marker
            # ("I'm now learning Spanish too") makes it no change.
            last = _said(cand)
            strong = cand.negated or (
                _corrects(last) and not _ADDITIVE.search(last))
            if not (strong or _shifts(cand)):
                mem = self._add(self._new(cand))
                self.plan.audits.append(
                    AuditDraft(Op.ADD, [], [mem.id], "another value of a many-valued slot",
                               cand.provenance)
                )
                return
            # A change retires the values it names, else those it is about; a strong
            # marker with neither retires them all, a time shift alone none (an addition).
            about = _named(members, cand) or self._about(cand, members)
            if not about and not strong:
                mem = self._add(self._new(cand))
                self.plan.audits.append(
                    AuditDraft(Op.ADD, [], [mem.id], "another value of a many-valued slot",
                               cand.provenance)
                )
                return
            members = about or members
        elif cand.attribute.startswith(OPEN_SLOT_PREFIX):
            # An open slot is named by a clause's head ("rel:have", "rel:be_home"): two
            # statements with one head need not be about one thing. Only a change or a
            # negation about what the slot holds updates it; anything else stands beside.
            about = self._about(cand, members) if cand.negated or _shifts(cand) else []
            if not about:
                mem = self._add(self._new(cand))
                self.plan.audits.append(
                    AuditDraft(Op.ADD, [], [mem.id], "unrelated to what the open slot holds",
                               cand.provenance)
                )
                return
            members = about

        # What a person wrote or confirmed counts at least as high trust: an inference
        # never overwrites it, and a disagreeing trusted statement asks again.
        high = [m for m in members if m.trust in (Trust.high.value, Trust.human.value)]
        if cand.trust == Trust.low.value and high:
            self.plan.audits.append(
                AuditDraft(
                    Op.REJECT,
                    [m.id for m in high],
                    [],
                    "a low-trust statement never supersedes a high-trust one",
                    cand.provenance,
                    content_hash(cand.statement),
                )
            )
            return

        if cand.negated and not cand.value:
            for m in members:
                self._retire(m, at=cand.valid_from, by=None)
                self._retire_episodes(m, by=None, at=cand.valid_from)
            self.plan.audits.append(
                AuditDraft(
                    Op.INVALIDATE,
                    [m.id for m in members],
                    [],
                    "explicit negation",
                    cand.provenance,
                )
            )
            return

        explicit = cand.change or cand.negated or strong
        if explicit or not high or cand.trust != Trust.high.value:
            self._supersede(members, cand)
            return
        if _restates_own_taste(members, cand):
            self._supersede(members, cand,
                            reason="the same person's later word on their own preference")
            return
        self._disagreement(members, cand)

    def _disagreement(self, members: list[Memory], cand: Candidate) -> None:
        """Two trusted statements of one slot disagree with no marker of a change: the
        rule asks the user (a conflict set); a judge model, when there is one, may read
        the pair as a change, one thing said twice, or two things that both hold."""
        head = max(members, key=lambda m: (m.valid_from, m.version))
        verdict = (self.verdicts.of(self._pair(head, cand)) if self.verdicts is not None
                   else None)
        if verdict is Verdict.UPDATE:
            self._supersede(members, cand, reason="the judge model read it as a change")
        elif verdict is Verdict.SAME:
            self._noop(head, cand, "the judge model read it as the same thing")
        elif verdict is Verdict.UNRELATED:
            mem = self._add(self._new(cand))
            self.plan.audits.append(AuditDraft(
                Op.ADD, [], [mem.id], "the judge model found that both hold",
                cand.provenance))
        else:
            self._conflict(members, cand)

    def _supersede(self, members: list[Memory], cand: Candidate, *, reason: str = "") -> None:
        # The new version continues the lineage of the newest of what it replaces.
        head = max(members, key=lambda m: m.version)
        new = self._add(successor(self._new(cand), of=head))
        for m in members:
            self._retire(m, at=cand.valid_from, by=new.id)
            self._retire_episodes(m, by=new.id, at=cand.valid_from)
            self._retire_told_beside(m, cand, by=new.id)
        self.plan.audits.append(
            AuditDraft(
                Op.UPDATE,
                [m.id for m in members],
                [new.id],
                reason or (
                    "explicit change" if cand.change else "newer statement of equal or higher trust"
                ),
                cand.provenance,
            )
        )
        if cand.details.get("disputes"):
            self._retire_disputed(cand, by=new.id)

    def _conflict(self, members: list[Memory], cand: Candidate) -> None:
        set_id = members[0].conflict_set or memory_id(
            "conflict", self.plan.scope_key, *sorted(m.id for m in members)
        )
        new = self._add(
            self._new(cand, status=MemoryStatus.pending_confirmation.value)
        )
        new.conflict_set = set_id
        for m in members:
            row = self.plan.touch(m)
            row.status = MemoryStatus.pending_confirmation.value
            row.conflict_set = set_id
        self.plan.audits.append(
            AuditDraft(
                Op.CONFLICT,
                [m.id for m in members],
                [new.id, *(m.id for m in members)],
                "two high-trust statements disagree without an explicit change",
                cand.provenance,
            )
        )

    def _retire_told_beside(self, old: Memory, cand: Candidate, *, by: str) -> None:
        """A person's history is kept twice, as their fact and in the turn's episode
        (rules._statements): a correction of either retires the other, when it is about
        what the correction says."""
        if not (old.type == "event" or old.details.get("history")):
            return
        told = set(old.provenance)
        beside = [m for m in self.current()
                  if m.id != by and told & set(m.provenance)
                  and (m.type == "event" or m.details.get("history"))
                  and m.details.get("speaker") == old.details.get("speaker")]
        for mem, sim, _same in self._near(cand, beside):
            if sim < semantic.RELATED:
                break
            self._retire(mem, at=cand.valid_from, by=by)
            self.plan.audits.append(AuditDraft(
                Op.INVALIDATE, [mem.id], [by], "told beside a corrected memory", []))

    def _retire_episodes(self, old: Memory, *, by: str | None, at: datetime) -> None:
        """Episodes and summaries that describe a superseded state stop counting as current:
        when the old memory's slot holds one value at a time (a residence, an employer),
        those that name that value.

        A value of a slot that holds many at once (a hobby, a liking) is no state that
        ends for everything else: "we went hiking" stays a true record when a hobby
        changes, and such values are often common words ("making", "for fun"). Nor does
        the episode a value was taken from go for that alone: it says other things too.
        Where several people share the scope, only the person's own episodes describe their
        state: another's week in Oslo stays when they move away from it. And only in their
        own words: a reply keeps the turn it answers, and its speaker's name, in front.
        """
        # An open slot is named by a clause's head, its value a span of the clause: neither
        # names a state that other words about the value describe.
        value = _value(old) if _exclusive(old) and not _open(old.attribute) else ""
        if len(value) < 2:
            return
        speaker = old.details.get("speaker")
        for mem in self.current():
            if mem.type not in ("event", "summary") or mem.attribute or mem.id == by:
                continue
            if mem.details.get("speaker") != speaker:
                continue
            if _mentions(_unprefixed(own_words(mem), speaker), value) or _quotes_state(
                    mem, old, value):
                self._retire(mem, at=at, by=by)
                self.plan.audits.append(
                    AuditDraft(
                        Op.INVALIDATE,
                        [mem.id],
                        [by] if by else [],
                        "describes a superseded state",
                        [],
                    )
                )

    def _forget(self, cand: Candidate) -> None:
        topic = norm_text(cand.forget_topic or "")
        matched = [
            m for m in self._versions.values()
            if m.id not in self.plan.deleted and topic and _mentions(m.statement, topic)
        ]
        matched += [m for m in self._meant(cand.forget_topic or "") if m not in matched]
        # A reply remembered with the turn before it: when only that context names the
        # topic, the context (and its raw event) goes and the reply stays.
        stripped = [m for m in matched if _only_in_context(m, topic)]
        lineages = {m.lineage for m in matched if m not in stripped}
        lineages |= {m.lineage for m in self._told_with(
            [m for m in matched if m not in stripped])}
        victims = [m for m in self._versions.values() if m.lineage in lineages]
        for m in victims:
            self.plan.deleted[m.id] = m
            self.plan.new.pop(m.id, None)
            self.plan.changed.pop(m.id, None)
            self._current.pop(m.id, None)
            self._forget_lookup(m)
            self.plan.deleted_events.update(m.provenance)
        for m in stripped:
            row = self.plan.touch(m)
            context_event = str(row.details.pop("context_event", ""))
            row.statement = row.statement[int(row.details.pop("reply_offset", 0)):]
            row.provenance = [e for e in row.provenance if e != context_event]
            self.plan.deleted_events.add(context_event)
        # The request itself names the topic: its raw event goes too.
        self.plan.deleted_events.update(cand.provenance)
        self.plan.audits.append(
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
        if self.meaning is None or not forgotten:
            return []
        events = {e for m in forgotten for e in m.provenance}
        pool = [m for m in self.current() if m not in forgotten and events & set(m.provenance)
                and m.type != "procedure"]
        out = []
        for mem in pool:
            sims = self.meaning.similarities(self._gist(mem.statement),
                                             [self._gist(m.statement) for m in forgotten])
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
        if self.meaning is None or not topic.strip():
            return []
        pool = [m for m in self.current() if m.type != "procedure"]
        sims = self.meaning.similarities(topic, [self._gist(m.statement) for m in pool])
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
        assert self.meaning is not None
        sims = self.meaning.similarities(topic, list(LABELS))
        order = sorted(range(len(sims)), key=lambda i: -sims[i])
        first, second = sims[order[0]], sims[order[1]]
        if first < semantic.FORGET_TOPIC or first - second < semantic.FORGET_TOPIC_MARGIN:
            return None
        return LABELS[order[0]] if first > above else None

    def apply_merge(
        self, cand: Candidate, *, old: Memory | None, op: Op, members: list[str] | None
    ) -> Memory:
        """Append a merged memory (a new profile version, or a session summary)."""
        mem = self._add(successor(self._new(cand), of=old))
        before: list[str] = []
        if old is not None:
            self._retire(old, at=cand.valid_from, by=mem.id)
            before = [old.id]
        self.plan.audits.append(
            AuditDraft(
                op,
                [*before, *(members or [])],
                [mem.id],
                f"{op.value.lower()} of fragments",
                list(dict.fromkeys(cand.provenance)),
            )
        )
        return mem

    def _procedure(self, cand: Candidate) -> None:
        success = bool(cand.details.get("success"))
        slot: Slot = (cand.subject, cand.attribute, "")
        members = self._slot_members(slot)
        if members:
            row = self.plan.touch(members[0])
            row.mention_count += 1
            row.provenance = list(dict.fromkeys([*row.provenance, *cand.provenance]))
            op, before = Op.NOOP, [row.id]
        else:
            row = self._add(self._new(cand))
            row.details = {"successes": 0, "failures": 0, "trigger": cand.subject,
                           "action": cand.attribute}
            op, before = Op.ADD, []
        details = dict(row.details)
        details["successes" if success else "failures"] = (
            int(details.get("successes" if success else "failures", 0)) + 1
        )
        n = int(details.get("successes", 0)) + int(details.get("failures", 0))
        rate = int(details.get("successes", 0)) / n if n else 0.0
        # Suggested only with enough evidence (DESIGN rule 8).
        details["hidden"] = (
            n < self.policy.procedure_min_samples or rate < self.policy.procedure_min_success_rate
        )
        details["success_rate"] = round(rate, 3)
        row.details = details
        row.statement = (
            f"When handling a {row.subject}: {row.attribute} "
            f"({details['successes']} of {n} outcomes succeeded)."
        )
        row.confidence = round(rate, 3)
        self.plan.audits.append(
            AuditDraft(op, before, [row.id], "outcome recorded", cand.provenance)
        )


def _as_said(statement: str, details: dict[str, object]) -> str:
    """The words as the user said them, where the clause analysis kept them: "my loyalty
    level" meets "your loyalty program", which its third person ("the assistant's") hides."""
    said = details.get("said")
    return said if isinstance(said, str) else statement


def _last_turn(statement: str) -> str:
    return statement.rsplit("\n", 1)[-1]


def _own_turn(statement: str, speaker: object) -> str:
    """The last turn without its speaker's name (shared by both sides, it says nothing)."""
    return _unprefixed(_last_turn(statement), speaker)


def _unprefixed(words: str, speaker: object) -> str:
    """``words`` without the "Name: " the speaker's turns are stored under."""
    return words.removeprefix(f"{speaker}: ") if speaker else words


def _corrects(text: str) -> bool:
    """Whether ``text`` carries a correction marker that is not negated: "I won't quit"
    or "we never switched" keep what was said."""
    return any(
        not (m.group(0).lower() in _CHANGE_VERBS and _NEGATION_BEFORE.search(text[: m.start()]))
        for m in _CORRECTION.finditer(text)
    )


def _disputes(cand: Candidate) -> bool:
    """Whether ``cand`` comes from feedback the extractor judged negative: an episode of
    it says so, and anything said in reply to the agent's turn names that turn."""
    return cand.details.get("feedback") == "negative" or bool(cand.details.get("disputes"))


def _tooled(attribute: str, source: str) -> bool:
    """Whether a memory or candidate is a tool's field: under its key path, or a known
    attribute a tool filled."""
    return attribute.startswith(TOOL_PREFIX) or (source == "tool" and bool(attribute))


def _quotes_state(episode: Memory, old: Memory, value: str) -> bool:
    """Whether an episode is a reply that carries, as the turn it answers, the very
    statement of a superseded state ("User: I live in Berlin. / Assistant: Nice to meet
    you"): kept, it would put the old state back in front of every question about it."""
    offset = episode.details.get("reply_offset")
    context = episode.details.get("context_event")
    return isinstance(offset, int) and context in old.provenance and _mentions(
        episode.statement[:offset], value)


@lru_cache(maxsize=4096)
def _reading(sentence: str) -> Reading:
    [reading] = read([sentence])
    return reading


def _said(cand: Candidate) -> str:
    """The words ``cand`` was said in: the sentence read ("said"), else the statement's last
    turn. Its markers ("actually", "now") are the speaker's, not the rewrite's."""
    said = cand.details.get("said")
    return said if isinstance(said, str) and said else _last_turn(cand.statement)


def _marks_correction(cand: Candidate) -> bool:
    return cand.change or _corrects(_said(cand))


def _shifts(cand: Candidate) -> bool:
    """Whether ``cand`` says something changed (a correction, a time shift such as "these
    days" or "from now on", feedback on what was remembered) rather than adding to it."""
    last = _said(cand)
    changed = cand.change or bool(cand.details.get("feedback")) or _corrects(last)
    return changed and not _ADDITIVE.search(last)


def _restates_own_taste(members: list[Memory], cand: Candidate) -> bool:
    """Whether ``cand`` is its speaker's later word on a preference only they stated. A
    taste is theirs to change, and saying another value later is changing it: the two
    disagree over time, not as two sources do at one time (a user and a trusted tool,
    DESIGN rule 2's conflict set). Facts keep the conflict: a second value said without a
    change may be a mistake or a second one the slot cannot hold."""
    speaker = cand.details.get("speaker")
    return cand.type == "preference" and cand.source == "user" and all(
        m.type == "preference" and m.source == "user" and m.details.get("speaker") == speaker
        and m.valid_from < cand.valid_from and not set(m.provenance) & set(cand.provenance)
        for m in members)


def _content_words(text: str) -> list[str]:
    """Words that name something: Latin words of three letters or more, CJK bigrams."""
    return [t for t in tokens(text) if len(t) >= (2 if is_han(t) else 3)]


def _holds_both(mem: Memory, cand: Candidate) -> bool:
    """Whether one statement carries both slots' values ("works at Initech as a QA
    engineer" holds the employer and the occupation): then the other kind of slot is no
    reason to keep them apart, the meaning decides."""
    new, old = norm_text(cand.value), _value(mem)
    return (len(new) >= 2 and _mentions(mem.statement, new)) or (
        len(old) >= 2 and _mentions(cand.statement, old))


def _may_restate(m: Memory) -> bool:
    """Whether a memory is of a kind a candidate may restate (see Resolver._restatable):
    not a summary or procedure, nor an episode that is never embedded (weighs_meaning)."""
    if m.type in _NOT_RESTATABLE:
        return False
    return not (m.type == "event" and (m.source not in ("user", "system", "tool")
                                       or (m.trust == Trust.low.value and m.source != "tool")
                                       or m.details.get("chitchat")))


def _kind(attribute: str) -> str:
    return attribute.split(":", 1)[0]


def _open(attribute: str) -> bool:
    """Open slots and tool key paths: named by the extractor, not by the vocabulary."""
    return attribute.startswith(("rel:", TOOL_PREFIX))


def _key_words(attribute: str) -> list[str]:
    return tokens(attribute.removeprefix(TOOL_PREFIX).replace(".", " ").replace("_", " "))


def _leaf_words(attribute: str) -> list[str]:
    """The words of a tool field's own name, the last segment of its key path that is not
    a list index ("tool:orders.0.status" -> ["status"])."""
    parts = [p for p in attribute.removeprefix(TOOL_PREFIX).split(".") if not p.isdigit()]
    return (parts[-1] if parts else "").replace("_", " ").split()


def _named(members: list[Memory], cand: Candidate) -> list[Memory]:
    """The members a change names: by ``details['replaces']`` or by value in its words."""
    replaces = norm_text(str(cand.details.get("replaces") or ""))
    if replaces:
        return [m for m in members if _value(m) == replaces]
    return [m for m in members if len(_value(m)) >= 2 and _mentions(cand.statement, _value(m))]


def _value(mem: Memory) -> str:
    return norm_text(str(mem.details.get("value") or mem.statement))


def _exclusive(mem: Memory) -> bool:
    """Whether the memory's slot holds one value at a time. A key that names its value
    ("likes:tea", "hobby:hiking") is one slot per value, so never one of them."""
    if not mem.attribute:
        return False
    if mem.attribute.startswith(OPEN_SLOT_PREFIX):
        return not is_many_valued(mem.attribute, mem.details)
    return ":" not in mem.attribute


def _mentions(statement: str, needle: str) -> bool:
    """Whether ``statement`` talks about ``needle`` (a normalised value or topic)."""
    if has_cjk(needle):
        return needle in norm_text(statement)
    need = _token_set(needle)
    return bool(need) and need <= _token_set(statement)


@lru_cache(maxsize=16384)
def _token_set(text: str) -> frozenset[str]:
    # Memoised: a batch asks about the same statements for every candidate.
    return frozenset(tokens(text))


def _only_in_context(mem: Memory, topic: str) -> bool:
    offset = int(mem.details.get("reply_offset") or 0)
    return offset > 0 and not _mentions(mem.statement[offset:], topic)
