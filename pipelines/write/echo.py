"""The service's own echo: what sleepmem returned, coming back inside an agent turn.

An agent puts the context block it was given into its prompt, its reply or a tool message,
and emits that turn. Read as words, the echo restates memories in the service's own voice
("- The user is vegetarian. [#1a2b3c]"), so every turn would mention every shown memory
again, and the echo would outrank what people actually say (DESIGN rule 2, last bullet).

The echo is recognised by identity, never by the shape of a sentence: the service knows
what it shows, so it looks for exactly that. A turn's text is compared with the scope's
memories as the service renders them:

- a context line, ``- statement [#ref]`` (:func:`sleepmem.pipelines.context.memory_line`),
  or one side of a conflict line, ``statement [#ref]``, whose ref names a memory of the
  scope and whose words are that memory's (its statement, or the turn of it a passage
  card shows); whitespace may differ, since agents re-wrap text;
- a memory card as JSON (search results dumped into a tool message): an object whose
  ``id`` is a memory of the scope and whose ``statement`` carries that memory's words, and
  the arrays and wrappers around such cards that hold nothing else but numbers, flags and
  the service's own ids;
- a memory id of the scope on its own, whole or as its short ref ``#1a2b3c``;
- the headings a context block writes (``## Standing preferences`` ...).

Words that merely resemble a memory (a user restating a preference in their own words)
carry no ref and no id of the service, so they stay and are judged as usual (a repeat
is a mention). Only extraction reads the stripped text: the raw event stays as it was.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from sleepmem.models import Memory
from sleepmem.pipelines.context import (
    CHECKPOINT_HEADING,
    HEADINGS,
    REF_CHARS,
    one_line,
    ref,
)
from sleepmem.pipelines.memories import own_words
from sleepmem.pipelines.types import EventView

# The two forms in which the service prints a memory id: memory_id() is a uuid's 32 hex
# digits, and context.ref() shows its first REF_CHARS in "[#…]". Only ids that belong to
# the scope's memories count; any other hex string is left alone.
_FULL_ID = re.compile(r"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])")
_SHORT_REF = re.compile(rf"\[?#([0-9a-f]{{{REF_CHARS}}})(?![0-9a-f])\]?")
# Where a removal happened, while the leftovers of a rendered line are tidied.
_CUT = "\x00"


@dataclass(frozen=True, slots=True)
class Shown:
    """One memory as the service may have shown it: its id and the words it renders."""

    id: str
    statement: str
    # The memory's own turn, which a passage card shows without the turn it answers.
    words: str
    conflict_set: str | None = None

    @classmethod
    def of(cls, memory: Memory) -> Shown:
        return cls(id=memory.id, statement=memory.statement, words=own_words(memory),
                   conflict_set=memory.conflict_set)

    def said_in(self, text: str) -> bool:
        """Whether ``text`` carries this memory's words, whitespace aside."""
        flat = one_line(text)
        return any(w and w in flat for w in (one_line(self.statement), one_line(self.words)))


@dataclass(frozen=True, slots=True)
class Output:
    """What the service has shown of a scope: its memories, by id and by short ref."""

    by_id: Mapping[str, Shown] = field(default_factory=dict)
    by_ref: Mapping[str, tuple[Shown, ...]] = field(default_factory=dict)
    conflict_sets: frozenset[str] = frozenset()

    @classmethod
    def of(cls, shown: Iterable[Shown]) -> Output:
        by_id = {s.id: s for s in shown}
        by_ref: dict[str, list[Shown]] = {}
        for s in by_id.values():
            by_ref.setdefault(s.id[:REF_CHARS], []).append(s)
        return cls(
            by_id=by_id, by_ref={k: tuple(v) for k, v in by_ref.items()},
            conflict_sets=frozenset(s.conflict_set for s in by_id.values() if s.conflict_set),
        )

    @classmethod
    def of_memories(cls, memories: Iterable[Memory]) -> Output:
        return cls.of(Shown.of(m) for m in memories)

    def named(self, token: str) -> tuple[Shown, ...]:
        """The memories a printed id names: a whole id, or a short ref's digits."""
        if len(token) == REF_CHARS:
            return self.by_ref.get(token, ())
        hit = self.by_id.get(token)
        return (hit,) if hit is not None else ()


@dataclass(frozen=True, slots=True)
class Stripped:
    """A turn's text without the service's echo."""

    text: str
    removed: int  # characters of echo dropped
    memories: tuple[str, ...] = ()  # the memories whose rendering came back

    @property
    def echoed(self) -> bool:
        return self.removed > 0


def strip_echo(text: str, output: Output) -> Stripped:
    """``text`` without what the service rendered of ``output``'s memories."""
    spans: list[tuple[int, int]] = []
    named: set[str] = set()
    if output.by_id and ("#" in text or _FULL_ID.search(text)):
        spans += _json_cards(text, output, named)
        spans += _context_lines(text, output, spans, named)
        spans += _ids(text, output, spans, named)
    spans += _headings(text, spans)
    if not spans:
        return Stripped(text=text, removed=0)
    kept = _tidy(_cut(text, spans))
    return Stripped(text=kept, removed=len(text) - len(kept), memories=tuple(sorted(named)))


def strip_events(events: list[EventView], output: Output) -> tuple[list[EventView], dict[str, int]]:
    """The events with their echo cut from the content, and the characters cut per event.

    Every kind of event is read: an agent echoes the block in whatever message it emits
    (system prompt, its reply, the user message it builds, a tool result). An event that
    was nothing but echo is kept with empty content, so it still takes its place in the
    conversation and yields nothing.
    """
    out: list[EventView] = []
    cut: dict[str, int] = {}
    for event in events:
        stripped = strip_echo(event.content, output)
        if stripped.echoed:
            cut[event.event_id] = stripped.removed
            event = replace(event, content=stripped.text)
        out.append(event)
    return out, cut


# -- what is recognised ----------------------------------------------------------------------


def _json_cards(text: str, output: Output, named: set[str]) -> list[tuple[int, int]]:
    """Memory cards as JSON, and what wraps them when it holds nothing of the agent's."""
    if not _FULL_ID.search(text):
        return []
    decoder = json.JSONDecoder()
    spans: list[tuple[int, int]] = []
    covered = 0
    for start, ch in enumerate(text):
        if start < covered or ch not in "{[":
            continue
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            continue
        cards: set[str] = set()
        if _ours(value, output, cards) and cards:
            spans.append((start, end))
            named |= cards
            covered = end
    return spans


def _ours(value: Any, output: Output, cards: set[str]) -> bool:
    """Whether a JSON value is the service's output through and through: its cards, and
    around them only numbers, flags, nulls and the service's own ids."""
    if isinstance(value, dict):
        card = _card(value, output)
        if card is not None:
            cards.add(card)
            return True
        return all(_ours(v, output, cards) for v in value.values())
    if isinstance(value, list):
        return all(_ours(v, output, cards) for v in value)
    if isinstance(value, str):
        return value in output.conflict_sets or value in output.by_id
    return True


def _card(value: dict[str, Any], output: Output) -> str | None:
    mid, statement = value.get("id"), value.get("statement")
    if not isinstance(mid, str) or not isinstance(statement, str) or "type" not in value:
        return None
    shown = output.by_id.get(mid)
    # The id alone is not enough: an agent asking to update memory X sends X's id with
    # new words of its own; a card of X carries X's words.
    return mid if shown is not None and shown.said_in(statement) else None


def _context_lines(
    text: str, output: Output, taken: list[tuple[int, int]], named: set[str]
) -> list[tuple[int, int]]:
    """Whole lines a context block rendered: ``- <words> [#ref]``, the ref a memory of the
    scope whose words the line carries (its statement, or its turn of a passage card; a
    conflict line ends with its last side)."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for raw in text.splitlines(keepends=True):
        start, pos = pos, pos + len(raw)
        body = raw.strip()
        if not body.startswith("- ") or _inside(start, taken):
            continue
        refs = list(_SHORT_REF.finditer(body))
        last = refs[-1] if refs else None
        if last is None or last.end() != len(body):
            continue
        words = body[2:last.start()]
        hits = [s for s in output.named(last.group(1)) if s.said_in(words)]
        if hits:
            spans.append((start, pos))
            named.update(s.id for s in hits)
            # A conflict line names its other sides too.
            named.update(s.id for m in _SHORT_REF.finditer(words) for s in output.named(m.group(1)))
    return spans


def _ids(
    text: str, output: Output, taken: list[tuple[int, int]], named: set[str]
) -> list[tuple[int, int]]:
    """Every other id of the scope in the text, with the memory's words when they come
    right before it as a context block renders them (a block whose lines were re-wrapped
    or joined onto one line)."""
    spans: list[tuple[int, int]] = []
    found = [(m, m.group(1)) for m in _SHORT_REF.finditer(text)]
    found += [(m, m.group(0)) for m in _FULL_ID.finditer(text)]
    for match, token in found:
        if _inside(match.start(), taken) or _inside(match.start(), spans):
            continue
        shown = output.named(token)
        if not shown:
            continue
        start = match.start()
        for s in shown:
            before = _ends_with(text, start, one_line(s.statement))
            if before is not None and ref(s.id) == match.group(0):
                start = _bullet(text, before)
                break
        spans.append((start, match.end()))
        named.update(s.id for s in shown)
    return spans


def _headings(text: str, taken: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The labels a context block writes, wherever they stand."""
    spans: list[tuple[int, int]] = []
    for label in (*HEADINGS, CHECKPOINT_HEADING):
        at = text.find(label)
        while at >= 0:
            start, end = at, at + len(label)
            at = text.find(label, end)
            if not _inside(start, taken):
                if label == CHECKPOINT_HEADING:
                    # "## Session checkpoint (version 3)": the label and its version.
                    close = text.find(")", end, end + 24)
                    end = close + 1 if text.startswith(" (version ", end) and close > 0 else end
                spans.append((start, end))
    return spans


# -- cutting ------------------------------------------------------------------------------


def _inside(pos: int, spans: list[tuple[int, int]]) -> bool:
    return any(a <= pos < b for a, b in spans)


def _ends_with(text: str, end: int, words: str) -> int | None:
    """Where ``words`` starts if it ends (before whitespace) at ``end``, whitespace runs
    compared as one space; None when it does not."""
    i = end
    while i > 0 and text[i - 1].isspace():
        i -= 1
    if i == end or not words:
        return None  # a rendered ref is always separated from its words by a space
    j = len(words)
    while j > 0:
        if words[j - 1].isspace():
            if i == 0 or not text[i - 1].isspace():
                return None
            while i > 0 and text[i - 1].isspace():
                i -= 1
            while j > 0 and words[j - 1].isspace():
                j -= 1
        elif i > 0 and text[i - 1] == words[j - 1]:
            i, j = i - 1, j - 1
        else:
            return None
    return i


def _bullet(text: str, start: int) -> int:
    """Include the "- " a context line starts with, when it is there."""
    i = start
    while i > 0 and text[i - 1] in " \t":
        i -= 1
    return i - 1 if i > 0 and text[i - 1] == "-" else start


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    parts: list[str] = []
    pos = 0
    for a, b in sorted(spans):
        if b <= pos:
            continue
        parts.append(text[pos:max(a, pos)])
        parts.append(_CUT)
        pos = b
    parts.append(text[pos:])
    return "".join(parts)


def _tidy(text: str) -> str:
    """Drop what a removal left of a rendered line (a bullet, a "|" between conflict
    sides, a blank): lines that were cut and hold no letter or digit any more."""
    lines = [ln for ln in text.split("\n")
             if _CUT not in ln or any(ch.isalnum() for ch in ln.replace(_CUT, ""))]
    return "\n".join(lines).replace(_CUT, "").strip()
