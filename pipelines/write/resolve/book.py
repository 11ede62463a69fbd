"""The book a resolver keeps of one scope in one run: its rows as they stand mid-batch,
the lookups that find them, and the plan every decision writes into.

Every decision module (``duplicate``, ``update``, ``conflict``, ``feedback``, ``forget``,
``procedures``) reads the scope and writes its decisions through the book: a new row is
added here, an old one retired here, both by the one versioning rule
(:mod:`sleepmem.pipelines.write.versions`), so the lookups never disagree with the plan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sleepmem.models import CURRENT_STATUSES, Memory, MemoryStatus
from sleepmem.pipelines import semantic
from sleepmem.pipelines.memories import copy_row, new_memory, norm_text
from sleepmem.pipelines.semantic import Meaning, gist
from sleepmem.pipelines.types import Candidate, Op
from sleepmem.pipelines.write.verdicts import Verdicts
from sleepmem.pipelines.write.versions import AuditDraft, successor, supersede

TtlFor = Callable[[str], timedelta | None]
Slot = tuple[str, str, str]  # subject, attribute, session


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


class Book:
    """The scope's rows, lookups and plan for one run (see the module's docstring)."""

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
        self.gists: dict[str, str] = {}
        # What each event of the batch said, in the speaker's words (set by the stages):
        # a change told over two clauses ("The Canon went to my nephew; these days I own
        # a Sony") names the old value in a clause its own candidate does not carry.
        self.said: dict[str, str] = {}
        self.parts: dict[str, list[str]] = {}
        self.plan = Plan(scope_key=scope_key)
        self.live: dict[str, Memory] = {
            m.id: m for m in existing if m.status in CURRENT_STATUSES
        }
        self.versions: dict[str, Memory] = {m.id: m for m in (all_versions or existing)}
        # Lookup tables keep a batch linear in its size, not quadratic in the scope's.
        self.by_slot: dict[Slot, set[str]] = {}
        self.by_text: dict[tuple[str, str], str] = {}
        # Each current memory's place in the current set's order (a pass's order, kept
        # exactly): neighbours found by lookup are put back in it (write.neighbours).
        self.order: dict[str, int] = {}
        self._next = 0
        # Who else keeps lookups of the current set (the pairs' neighbour indexes): told
        # of every row that joins it, once its place in the order is set.
        self._watchers: list[Callable[[Memory], None]] = []
        for mem in self.live.values():
            self._remember(mem)

    def watch(self, remember: Callable[[Memory], None]) -> None:
        """Call ``remember`` with every current row, now and as each is added."""
        self._watchers.append(remember)
        for mem in self.live.values():
            remember(mem)

    def _remember(self, mem: Memory) -> None:
        if mem.id not in self.order:
            self.order[mem.id] = self._next
            self._next += 1
        for remember in self._watchers:
            remember(mem)
        if mem.attribute:
            self.by_slot.setdefault((mem.subject, mem.attribute, mem.session), set()).add(mem.id)
        else:
            self.by_text.setdefault((mem.session, norm_text(mem.statement)), mem.id)

    def forget_lookup(self, mem: Memory) -> None:
        """``mem`` is no longer current: it leaves the book's lookups."""
        self.order.pop(mem.id, None)
        if mem.attribute:
            self.by_slot.get((mem.subject, mem.attribute, mem.session), set()).discard(mem.id)
        else:
            key = (mem.session, norm_text(mem.statement))
            if self.by_text.get(key) == mem.id:
                del self.by_text[key]

    # -- views of the scope as it stands mid-batch ---------------------------------------
    def row(self, mid: str) -> Memory:
        return self.plan.new.get(mid) or self.plan.changed.get(mid) or self.versions[mid]

    def current(self) -> list[Memory]:
        return [self.row(mid) for mid in self.live]

    def slot_members(self, slot: Slot) -> list[Memory]:
        return [self.row(mid) for mid in sorted(self.by_slot.get(slot, ())) if mid in self.live]

    def add(self, mem: Memory) -> Memory:
        self.plan.new[mem.id] = mem
        self.live[mem.id] = mem
        self.versions[mem.id] = mem
        self._remember(mem)
        return mem

    def retire(self, mem: Memory, *, at: datetime, by: str | None) -> None:
        """``mem`` is superseded (by ``by``, or by nothing) as of ``at``: the plan's copy
        of it is closed by the one versioning rule, and it leaves the lookups."""
        row = supersede(self.plan.touch(mem), by=by, at=at, now=self.now)
        self.live.pop(mem.id, None)
        self.forget_lookup(row)

    def erase(self, mem: Memory) -> None:
        """``mem`` is erased (a forget request): from the plan's rows, the current set and
        the lookups, with its events."""
        self.plan.deleted[mem.id] = mem
        self.plan.new.pop(mem.id, None)
        self.plan.changed.pop(mem.id, None)
        self.live.pop(mem.id, None)
        self.forget_lookup(mem)
        self.plan.deleted_events.update(mem.provenance)

    # -- meaning -------------------------------------------------------------------------
    def gist(self, statement: str) -> str:
        # Memoised: every candidate of a run is compared with the same memories.
        if statement not in self.gists:
            self.gists[statement] = gist(statement)
        return self.gists[statement]

    def sentences(self, statement: str) -> list[str]:
        if statement not in self.parts:
            self.parts[statement] = semantic.sentences(self.gist(statement))
        return self.parts[statement]

    def new(self, cand: Candidate, *, status: str = MemoryStatus.active.value) -> Memory:
        """A first version of ``cand``, living as long as its kind does."""
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

    def merge(
        self, cand: Candidate, *, old: Memory | None, op: Op, members: list[str] | None
    ) -> Memory:
        """Append a merged memory (a new profile version, or a session summary)."""
        mem = self.add(successor(self.new(cand), of=old))
        before: list[str] = []
        if old is not None:
            self.retire(old, at=cand.valid_from, by=mem.id)
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

