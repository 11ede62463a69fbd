"""The speaker route: a question about a named person favours what that person said.

Where several people talk in one scope (a group chat, two friends, an agent relaying
what others told it), each turn is stored under its speaker ("Caroline: I'm keen on
counselling"). A question that names one of them ("What does Caroline want to study?")
asks about that person's own words; the other speaker's replies name them too ("Wow,
Caroline!"), so lexically they look as relevant and crowd the answer out. Among the
candidates the other routes found, those spoken by a person the question names form
one more route, scored by their fused relevance (the shape of the "when" route), so a
relevant turn of the named speaker rises and an irrelevant one does not.

Speakers are read from the statement's own prefix ("Name: ...", "名字：..."), on every
line of a card that joins several turns; names are matched case- and width-insensitively
as whole words (EN) or as a substring (ZH, which has no spaces). Memories without a
speaker (one user talking to an agent) are untouched, and so is a question naming no
speaker.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

from sleepmem.pipelines.language import has_cjk
from sleepmem.pipelines.language.words import alnum_runs
from sleepmem.pipelines.ports import Hit

_CJK = "\u3400-\u9fff"
# A line opening with a name and a colon: one to three capitalised words, or two to four
# Han characters (a Chinese name), then ":" or "：".
_LINE_SPEAKER = re.compile(
    rf"^(?P<name>[A-Z][\w'’-]*(?:[ \t]+[A-Z][\w'’-]*){{0,2}}|[{_CJK}]{{2,4}})\s*[:：]",
    re.MULTILINE,
)

# Runs of letters and digits: "Jon's" and "O'Brien" become "jon s" and "o brien" alike in
# the query and in the name.


def _key(name: str) -> str:
    return unicodedata.normalize("NFKC", name).casefold().strip()


def speakers(statement: str) -> frozenset[str]:
    """The speakers a statement's lines open with, case-folded; empty when none."""
    return frozenset(_key(m.group("name")) for m in _LINE_SPEAKER.finditer(statement))


def speaker_of(statement: str) -> str:
    """The speaker a statement opens with, as written ("Caroline", "小美"); '' when none."""
    m = _LINE_SPEAKER.match(statement)
    return m.group("name") if m else ""


def without_speaker(statement: str) -> str:
    """The statement after the speaker it opens with ("Caroline: ...", "小美：..."); the
    statement itself when it opens with none."""
    m = _LINE_SPEAKER.match(statement)
    return statement[m.end():].lstrip() if m else statement


def names_in(query: str, candidates: frozenset[str]) -> frozenset[str]:
    """Which of the candidate speaker names the query mentions."""
    text = _key(query)
    # Words separated by single spaces, so a name matches only as whole words.
    spaced = f" {' '.join(alnum_runs(text))} "
    return frozenset(
        name for name in candidates
        if (name in text if has_cjk(name) else f" {' '.join(alnum_runs(name))} " in spaced)
    )


def speaker_hits(query: str, statements: Mapping[str, str],
                 relevance: Mapping[str, float]) -> list[Hit]:
    """Candidates spoken by a person the query names, scored by their relevance so far.

    Empty when the query names none of the candidates' speakers, or when every
    candidate with a speaker is one the query names (the route would lift them all)."""
    spoken = {mid: speakers(text) for mid, text in statements.items()}
    everyone = frozenset().union(*spoken.values()) if spoken else frozenset()
    named = names_in(query, everyone)
    if not named:
        return []
    hits = [Hit(mid, relevance.get(mid, 0.0)) for mid, who in spoken.items() if who & named]
    if len(hits) == sum(1 for who in spoken.values() if who):
        return []
    return hits
