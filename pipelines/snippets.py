"""The tail of a result: the next memories, one line each, in one last card.

A question whose answer is spread over many conversations ("which books has Tim read",
"what helped her through grief") needs many memories, each for one sentence. Whole
passages spend a slot on the words around a hit, so past the first half of the k entries
a result asks for, the budget those slots would take reads the next memories instead, as
the one sentence of each that shares most words with the query. Measured on LoCoMo (the
README's search section): at 10 entries, multi-hop evidence read from 0.57 to 0.76 and
open-domain from 0.52 to 0.67, in 1.2 times the tokens of ten whole cards.

A line keeps the speaker its memory opens with ("Tim: …"), so whose words it holds stays
said. The card's ``joined`` lists every memory after the first, and its provenance each
line's own event, so a caller can read any of them whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field

from sleepmem.models import Memory
from sleepmem.pipelines.extract.text import is_zh, split_sentences
from sleepmem.pipelines.lexical import tokens
from sleepmem.pipelines.memories import own_events, own_words
from sleepmem.pipelines.speakers import without_speaker


def query_terms(query: str) -> re.Pattern[str] | None:
    """One pattern for the query's lexical terms (stems and CJK characters and pairs), a
    group each: a Latin term matches at the start of a word ("read" in "reading", never
    "tim" in "overtime"), a CJK one anywhere. None when the query has no terms."""
    terms = sorted(set(tokens(query)))
    if not terms:
        return None
    return re.compile(
        "|".join(f"({re.escape(t)})" if is_zh(t) else rf"\b({re.escape(t)})"
                 for t in terms),
        re.IGNORECASE,
    )


def best_line(text: str, terms: re.Pattern[str] | None) -> str:
    """The sentence of ``text`` holding most of the query's ``terms`` (the first on a
    tie), behind the speaker ``text`` opens with."""
    words = without_speaker(text)
    sentences = split_sentences(words) or [words]
    best = sentences[0]
    if len(sentences) > 1 and terms is not None:
        # One pass over the text, then each sentence counts the terms inside its span: a
        # search reads dozens of lines, and a pass per sentence doubled their cost.
        found = [(m.start(), m.lastindex) for m in terms.finditer(words)]
        most, at = 0, 0
        for sentence in sentences:
            # A sentence rejoined after an abbreviation may differ in its spaces.
            start = max(words.find(sentence, at), at)
            at = start + len(sentence)
            held = len({term for pos, term in found if start <= pos < at})
            if held > most:
                best, most = sentence, held
    return text[: len(text) - len(words)] + best


@dataclass(slots=True)
class Tail:
    """The lines of a result's tail, best first, and what they cost."""

    lines: list[str] = field(default_factory=list)
    members: list[Memory] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    tokens: int = 0


def tail(
    ranked: Iterable[Memory], *, query: str, shown: Collection[str], budget: int,
    cost: Callable[[str], int], holds_turns: Callable[[Memory], bool],
) -> Tail:
    """One line per memory of ``ranked`` (best first) whose own events are not all in
    ``shown`` (the turns the cards above read whole), while the lines' ``cost`` stays
    within ``budget``. The first line over the budget ends the tail: a shorter one further
    down ranks below it, and the tail stays in rank order.

    ``holds_turns``: whether a memory's words are its turns' own (an episode) rather than
    one thing extracted from them. Only such a line stands for its turns: after it,
    another memory of the same turns would read the same words again. Facts extracted
    from one message ("Django backend, MySQL database, hosted on DigitalOcean") are each a
    line of their own."""
    terms = query_terms(query)
    out = Tail()
    seen = set(shown)
    for m in ranked:
        own = own_events(m)
        if own and all(e in seen for e in own):
            continue
        line = best_line(own_words(m), terms)
        price = cost(line)
        if out.tokens + price > budget:
            break
        out.lines.append(line)
        out.members.append(m)
        out.events += [e for e in own if e not in seen and e not in out.events]
        out.tokens += price
        if holds_turns(m):
            seen.update(own)
    return out


def lead(k: int) -> int:
    """How many of a result's k entries are read whole: the first half, rounded up."""
    return (k + 1) // 2
