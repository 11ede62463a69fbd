"""The context of one turn: a stable prefix and a dynamic part, packed into a token budget.

The prefix holds what stays true across turns (identity, standing preferences, active
procedures). It is rendered from fields that change only when the memory itself changes
(type, statement, id) in a fixed order (section, then newest recorded first, then id), so
it is byte-identical from turn to turn until one of those memories is added, replaced or
retired, and a model's prompt cache keeps hitting. Newest first: when the prefix budget is
full, a memory just learned still gets in (and the oldest one of its section drops out).
Nothing volatile (scores, recency, access counts, the time) is rendered into it.

The dynamic part holds what this turn needs: the session's checkpoint, open conflict sets
and the memories most relevant to the query, in that order, in the budget left over.
Tokens are counted with the tokenizer the caller passes (cl100k in production).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import case, or_, select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from sleepmem.models import LEVELS, Memory, MemoryStatus, Scope
from sleepmem.models.cards import ConflictGroup, MemoryCard
from sleepmem.models.working import Checkpoint, ContextItem, ContextPart

Counter = Callable[[str], int]

PREFIX_SECTIONS: tuple[tuple[str, str], ...] = (
    ("identity", "About the user"),
    ("preference", "Standing preferences"),
    ("procedure", "Procedures to follow"),
)
PREFIX_TYPES = tuple(t for t, _ in PREFIX_SECTIONS)
REF_CHARS = 6  # "[#1a2b3c]": tells the memories of one context apart, ~6 cl100k tokens
MAX_VALUE_CHARS = 400
CONFLICT_HEADING = "## Unresolved: these disagree, ask before relying on either"
RELEVANT_HEADING = "## Relevant memories"
CHECKPOINT_HEADING = "## Session checkpoint"


def ref(memory_id: str) -> str:
    return f"[#{memory_id[:REF_CHARS]}]"


def heading(title: str) -> str:
    return f"## {title}"


def memory_side(statement: str, memory_id: str) -> str:
    """How a context block names one memory: ``statement [#ref]``, on one line."""
    return f"{one_line(statement)} {ref(memory_id)}"


def memory_line(statement: str, memory_id: str) -> str:
    """A context line of one memory: ``- statement [#ref]``."""
    return f"- {memory_side(statement, memory_id)}"


# Every label a context block writes, so that the block can be recognised when an agent
# hands it back (sleepmem.pipelines.write.echo).
HEADINGS: tuple[str, ...] = (
    *(heading(title) for _t, title in PREFIX_SECTIONS), CONFLICT_HEADING, RELEVANT_HEADING,
)


def visible_scope_keys(scope: Scope) -> list[str]:
    """Every consolidation scope key a search in ``scope`` sees: each level set or unset
    (DESIGN rule 10). Memories keep their session in a column of its own, not in the key."""
    levels = LEVELS[1:-1]
    choices = [("",) if not getattr(scope, lvl) else ("", getattr(scope, lvl))
               for lvl in levels]
    return [
        Scope(tenant=scope.tenant, **dict(zip(levels, combo, strict=True))).key
        for combo in itertools.product(*choices)
    ]


@dataclass(frozen=True, slots=True)
class Line:
    id: str
    section: str
    type: str
    statement: str
    text: str


def prefix_memories(*, engine: Engine, scope: Scope, now: datetime, limit: int) -> list[Line]:
    """Current identity, preference and procedure memories the scope sees, in prefix order.

    Standing ones only: a session's own ("just this time") memories are left to the
    dynamic part, so the prefix does not change from one session to the next.
    """
    rank = case({t: i for i, t in enumerate(PREFIX_TYPES)}, value=col(Memory.type))
    hidden = col(Memory.details)["hidden"].as_boolean()
    stmt = (
        select(col(Memory.id), col(Memory.type), col(Memory.statement))
        .where(
            col(Memory.scope_key).in_(visible_scope_keys(scope)),
            col(Memory.session) == "",
            col(Memory.type).in_(PREFIX_TYPES),
            # Written so that no index on status can serve it: SQLite otherwise walks the
            # (status, expires_at) index over every active memory of every tenant (26 ms
            # at 30k memories, measured) instead of the few hundred rows of these scopes.
            col(Memory.status).op("||")("") == MemoryStatus.active.value,
            or_(col(Memory.expires_at).is_(None), col(Memory.expires_at) > now),
            # Procedures below their minimum sample are hidden from search; here too.
            or_(hidden.is_(None), hidden.is_(False)),
        )
        .order_by(rank, col(Memory.recorded_at).desc(), col(Memory.id))
        .limit(limit)
    )
    with Session(engine) as session:
        rows = session.execute(stmt).all()
    return [
        Line(id=mid, section=mtype, type=mtype, statement=statement,
             text=memory_line(statement, mid))
        for mid, mtype, statement in rows
    ]


def open_conflicts(
    *, engine: Engine, scope: Scope, now: datetime, limit: int
) -> list[ConflictGroup]:
    """Conflict sets the scope sees that nobody has resolved yet, oldest first."""
    stmt = (
        select(Memory)
        .where(
            col(Memory.scope_key).in_(visible_scope_keys(scope)),
            col(Memory.session).in_(("", scope.session)),
            col(Memory.status) == MemoryStatus.pending_confirmation.value,
            col(Memory.conflict_set).is_not(None),
            or_(col(Memory.expires_at).is_(None), col(Memory.expires_at) > now),
        )
        .order_by(col(Memory.valid_from), col(Memory.id))
        .limit(limit * 4)
    )
    with Session(engine) as session:
        rows = list(session.execute(stmt).scalars())
    sets: dict[str, list[Memory]] = {}
    for m in rows:
        sets.setdefault(str(m.conflict_set), []).append(m)
    out = []
    for name, sides in itertools.islice(((n, s) for n, s in sets.items() if len(s) > 1), limit):
        out.append(ConflictGroup(conflict_set=name, score=0.0, sides=[
            MemoryCard(id=m.id, statement=m.statement, type=m.type, source=m.source,
                       trust=m.trust, valid_from=m.valid_from, confidence=m.confidence,
                       score=0.0, status="conflict")
            for m in sides
        ]))
    return out


@dataclass(slots=True)
class Packer:
    """Lines into a token budget, in order; a line that does not fit is left out."""

    budget: int
    count: Counter
    used: int = 0
    lines: list[str] = field(default_factory=list)
    items: list[ContextItem] = field(default_factory=list)
    dropped: int = 0

    def add(self, text: str, item: ContextItem | None = None, *, heading: str = "") -> bool:
        cost = self.count(text) + 1  # and the newline that joins it
        head_cost = self.count(heading) + 1 if heading and heading not in self.lines else 0
        if self.used + cost + head_cost > self.budget:
            if item is not None:
                self.dropped += 1
            return False
        if head_cost:
            self.lines.append(heading)
            self.used += head_cost
        self.lines.append(text)
        self.used += cost
        if item is not None:
            self.items.append(item.model_copy(update={"tokens": cost}))
        return True

    def part(self) -> ContextPart:
        text = "\n".join(self.lines)
        # Joining can merge tokens across lines differently from counting them one by one;
        # the final text is what the budget is about.
        while self.lines and self.count(text) > self.budget:
            self.lines.pop()
            text = "\n".join(self.lines)
        return ContextPart(text=text, tokens=self.count(text), items=self.items)


def pack_prefix(lines: Sequence[Line], *, budget: int, count: Counter) -> tuple[ContextPart, int]:
    packer = Packer(budget=budget, count=count)
    titles = dict(PREFIX_SECTIONS)
    for item in lines:
        packer.add(
            item.text,
            ContextItem(id=item.id, section=item.section, type=item.type,
                        statement=item.statement, tokens=0),
            heading=heading(titles[item.section]),
        )
    return packer.part(), packer.dropped


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def pack_dynamic(
    *,
    budget: int,
    checkpoint_budget: int,
    count: Counter,
    checkpoint: Checkpoint | None,
    conflicts: Sequence[ConflictGroup],
    relevant: Sequence[MemoryCard],
) -> tuple[ContextPart, int]:
    packer = Packer(budget=budget, count=count)
    if checkpoint is not None:
        inner = Packer(budget=min(budget, checkpoint_budget), count=count)
        for text in checkpoint_lines(checkpoint):
            inner.add(text)
        if inner.lines:
            part = inner.part()
            packer.lines.extend(part.text.split("\n"))
            packer.used += part.tokens + 1
            packer.items.append(ContextItem(
                id="", section="checkpoint", type="checkpoint",
                statement=f"session {checkpoint.scope.session} v{checkpoint.version}",
                tokens=part.tokens,
            ))
    for group in conflicts:
        text = "- " + " | ".join(memory_side(s.statement, s.id) for s in group.sides)
        first = group.sides[0]
        packer.add(text, ContextItem(id=first.id, section="conflict", type=first.type,
                                     statement=" | ".join(s.statement for s in group.sides),
                                     tokens=0),
                   heading=CONFLICT_HEADING)
    for card in relevant:
        packer.add(memory_line(card.statement, card.id),
                   ContextItem(id=card.id, section="relevant", type=card.type,
                               statement=card.statement, tokens=0),
                   heading=RELEVANT_HEADING)
    return packer.part(), packer.dropped


def checkpoint_lines(cp: Checkpoint) -> list[str]:
    """The checkpoint in priority order: what to do next and what not to redo come first."""
    st = cp.state
    out = [f"{CHECKPOINT_HEADING} (version {cp.version})"]
    if st.goal:
        out.append(f"Goal: {one_line(st.goal)}")
    if st.current_step:
        out.append(f"Current step: {one_line(st.current_step)}")
    if st.completed:
        out.append("Completed, do not repeat: " + "; ".join(
            f"{s.key}" + (f" ({one_line(s.step)})" if s.step else "") for s in st.completed
        ))
    if st.plan:
        out.append("Plan: " + " → ".join(one_line(p) for p in st.plan))
    out.extend(f"Verified: {one_line(f)}" for f in st.verified)
    for name, value in sorted(st.variables.items()):
        out.append(f"{name} = {_short(value)}")
    for tr in reversed(st.tool_results):
        out.append(f"Tool {tr.tool}: {_short(tr.result)}")
    return out


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    text = one_line(text)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def one_line(text: str) -> str:
    return " ".join(text.split())
