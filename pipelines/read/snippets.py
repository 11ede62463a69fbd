"""Lines: a memory read as its one sentence that shares most words with the query.

A question whose answer is spread over many conversations ("which books has Tim read",
"what helped her through grief") needs many memories, each for one sentence. A whole
passage spends its tokens on the words around a hit, so the ``lines`` and ``mixed``
formats of search read memories as their best sentence instead: more memories in the
same tokens. A line keeps the speaker its memory opens with ("Tim: …"), so whose words
it holds stays said, and its card keeps the memory's id, so a caller can read it whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field

from sleepmem.models import Memory
from sleepmem.pipelines.lexical import tokens
from sleepmem.pipelines.memories import own_events, own_words
from sleepmem.pipelines.speakers import without_speaker
from sleepmem.pipelines.text import is_zh, split_sentences


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


class LinePicker:
    """Picks the lines of a result, best memory first: a memory whose own turns were all
    read already (whole, above, or as an earlier line) gets none.

    ``holds_turns``: whether a memory's words are its turns' own (an episode) rather than
    one thing extracted from them. Only such a memory stands for its turns: after it,
    another memory of the same turns would read the same words again. Facts extracted
    from one message ("Django backend, MySQL database, hosted on DigitalOcean") are each a
    line of their own."""

    def __init__(self, query: str, *, shown: Collection[str],
                 holds_turns: Callable[[Memory], bool]) -> None:
        self.terms = query_terms(query)
        self.seen = set(shown)
        self.holds_turns = holds_turns

    def line(self, m: Memory) -> str | None:
        """``m``'s line, or None when every turn it holds was read already."""
        own = own_events(m)
        if own and all(e in self.seen for e in own):
            return None
        return best_line(own_words(m), self.terms)

    def took(self, m: Memory) -> None:
        """``m``'s line is in the result: an episode's turns are read now."""
        if self.holds_turns(m):
            self.seen.update(own_events(m))


@dataclass(slots=True)
class Lines:
    """The lines picked, best first, and what they cost."""

    lines: list[str] = field(default_factory=list)
    members: list[Memory] = field(default_factory=list)
    tokens: int = 0


def pick_lines(
    ranked: Iterable[Memory], *, query: str, shown: Collection[str], budget: int | None,
    cost: Callable[[str], int], holds_turns: Callable[[Memory], bool],
    most: int | None = None,
) -> Lines:
    """One line per memory of ``ranked`` (best first), at most ``most`` of them, while
    their ``cost`` stays within ``budget`` (None: no budget). A line over what is left is
    skipped and the next tried, as the raw-turn baselines of the evaluations pack theirs."""
    picker = LinePicker(query, shown=shown, holds_turns=holds_turns)
    out = Lines()
    for m in ranked:
        if most is not None and len(out.lines) >= most:
            break
        line = picker.line(m)
        if line is None:
            continue
        price = cost(line)
        if budget is not None and out.tokens + price > budget:
            continue
        out.lines.append(line)
        out.members.append(m)
        out.tokens += price
        picker.took(m)
    return out


def lead(k: int) -> int:
    """How many of k memories the ``mixed`` format reads whole: the first half, rounded
    up."""
    return (k + 1) // 2
