"""Words: one tokenizer and phrase lists matched by whole words, not by patterns.

``words(text)`` splits a text into its word runs once (a word character is a letter, a
digit or "_", as everywhere else in the packs). A ``Phrases`` list answers whether a
text holds one of its phrases as whole words (``search``) or starts with one
(``starts``); ``Literals`` does the same for scripts written without spaces, where a
phrase is any substring.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache

__all__ = ["Literals", "Phrases", "alnum_runs", "gap", "is_word_char", "runs", "strip_prefix",
           "strip_trailing_word", "strip_word", "without_word", "words"]


def is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def runs(text: str, starts: Callable[[str], bool], goes_on: str = "") -> list[str]:
    """The runs of a text whose characters ``starts`` accepts, each of which may go on
    (never start) with the characters of ``goes_on`` ("c++", "node.js", "don't")."""
    out: list[str] = []
    start = -1
    for i, ch in enumerate(text):
        if starts(ch) or (start >= 0 and ch in goes_on):
            if start < 0:
                start = i
        elif start >= 0:
            out.append(text[start:i])
            start = -1
    if start >= 0:
        out.append(text[start:])
    return out


@lru_cache(maxsize=4096)
def words(text: str) -> tuple[str, ...]:
    """The word runs of a text, in order (letters, digits and "_"; case kept)."""
    return tuple(runs(text, is_word_char))


def alnum_runs(text: str) -> list[str]:
    """The runs of letters and digits in a text ("_" and everything else separates)."""
    return [w for run in words(text) for w in run.split("_") if w]


def _bounded(text: str, start: int, end: int, prefix: bool = False) -> bool:
    """Whether text[start:end] has a word boundary at each end (as ``\\b``: a word
    character on one side only, the text's ends counting as non-word)."""
    before = start > 0 and is_word_char(text[start - 1])
    after = end < len(text) and is_word_char(text[end])
    return before != is_word_char(text[start]) and (
        prefix or after != is_word_char(text[end - 1]))


class Phrases:
    """Phrases matched case-insensitively as whole words.

    A phrase matches where the text holds it with a word boundary at each end, as
    ``\\b`` would have it (before "'ve" that is a word character). With ``loose`` a space
    in a phrase stands for any run of white space in the text; with ``case`` case counts;
    with ``prefix`` a phrase may end inside a word.
    """

    def __init__(self, phrases: Iterable[str], *, loose: bool = False, case: bool = False,
                 prefix: bool = False) -> None:
        self.case = case
        self.phrases = tuple(dict.fromkeys(p if case else p.lower() for p in phrases))
        self.loose = loose
        self.prefix = prefix
        self._found: dict[str, bool] = {}  # the same sentence is asked about again and again
        for p in self.phrases:
            if not p:
                raise ValueError("an empty phrase")

    def _text(self, text: str) -> str:
        low = text if self.case else text.lower()
        if len(low) != len(text):  # "İ" folds to two characters: keep every offset
            low = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
        return " ".join(low.split()) if self.loose else low

    def search(self, text: str) -> bool:
        """Whether one phrase occurs in the text as whole words."""
        found = self._found.get(text)
        if found is None:
            if len(self._found) >= 4096:
                self._found.clear()
            found = self._found[text] = self._search(text)
        return found

    def _search(self, text: str) -> bool:
        low = self._text(text)
        for p in self.phrases:
            at = low.find(p)
            while at >= 0:
                if _bounded(low, at, at + len(p), self.prefix):
                    return True
                at = low.find(p, at + 1)
        return False

    def starts(self, text: str, *, lstrip: bool = False) -> bool:
        """Whether the text opens with one phrase, ending at a word boundary."""
        if not lstrip and text[:1].isspace():
            return False
        low = self._text(text).lstrip()
        return any(low.startswith(p) and _bounded(low, 0, len(p), self.prefix)
                   for p in self.phrases)

    def count(self, text: str) -> int:
        """How many times the phrases occur as whole words (phrases that never overlap)."""
        low = self._text(text)
        n = 0
        for p in self.phrases:
            at = low.find(p)
            while at >= 0:
                if _bounded(low, at, at + len(p), self.prefix):
                    n += 1
                    at = low.find(p, at + len(p))
                else:
                    at = low.find(p, at + 1)
        return n

    def replace(self, text: str, new: str, *, eat_space: bool = False) -> str:
        """The text with each phrase found (leftmost first; at one place, the first listed)
        replaced by ``new``; with ``eat_space`` the white space after it goes too."""
        low = self._text(text)
        out: list[str] = []
        pos = 0
        while True:
            best: tuple[int, int] | None = None
            for p in self.phrases:
                at = low.find(p, pos)
                while at >= 0 and (best is None or at < best[0]):
                    if _bounded(low, at, at + len(p), self.prefix):
                        best = (at, at + len(p))
                        break
                    at = low.find(p, at + 1)
            if best is None:
                return "".join(out) + text[pos:]
            start, end = best
            if eat_space:
                while end < len(text) and text[end].isspace():
                    end += 1
            out += [text[pos:start], new]
            pos = end

    def opening(self, text: str) -> str | None:
        """The first listed phrase the text opens with (as ``starts``), in the text's case."""
        if text[:1].isspace():
            return None
        low = self._text(text)
        for p in self.phrases:
            if low.startswith(p) and _bounded(low, 0, len(p)):
                return text[:len(p)]
        return None


class Literals:
    """Phrases of a script written without spaces: any occurrence counts."""

    def __init__(self, phrases: Iterable[str]) -> None:
        self.phrases = tuple(dict.fromkeys(phrases))

    def search(self, text: str) -> bool:
        return any(p in text for p in self.phrases)

    def starts(self, text: str) -> bool:
        return text.startswith(self.phrases)


def strip_word(text: str, lead: tuple[str, ...]) -> str:
    """The text without the first of the ``lead`` words (any case) that opens it followed by
    white space, and without that white space ("to  go" -> "go")."""
    for w in lead:
        if text[:len(w)].lower() == w and text[len(w):len(w) + 1].isspace():
            return text[len(w):].lstrip()
    return text


def strip_trailing_word(text: str, tail: tuple[str, ...]) -> str:
    """The text without the longest of the ``tail`` words (any case) that ends it after
    white space, and without that white space ("teacher now" -> "teacher")."""
    low = text.lower()
    for w in sorted(tail, key=len, reverse=True):
        head = text[:len(text) - len(w)]
        if low.endswith(w) and head[-1:].isspace():
            return head.rstrip()
    return text


def without_word(text: str, word: str) -> str:
    """The text without each whole-word occurrence of ``word`` (any case)."""
    low, out, pos = text.lower(), [], 0
    at = low.find(word)
    while at >= 0:
        if _bounded(low, at, at + len(word)):
            out.append(text[pos:at])
            pos = at + len(word)
            at = low.find(word, pos)
        else:
            at = low.find(word, at + 1)
    return "".join(out) + text[pos:]


def strip_prefix(text: str, prefixes: tuple[str, ...]) -> str:
    """The text without the first of the prefixes it starts with."""
    for p in prefixes:
        if text.startswith(p):
            return text[len(p):]
    return text


def gap(text: str, head: str, tail: str, least: int, most: int, *, bounded: bool = False) -> bool:
    """Whether ``head``, then ``least`` to ``most`` characters of one line, then ``tail``
    occur in the text ("not … but", 不是…了). With ``bounded``, ``head`` starts and
    ``tail`` ends at a word boundary."""
    at = text.find(head)
    while at >= 0:
        if not bounded or at == 0 or not is_word_char(text[at - 1]):
            lo = at + len(head) + least
            hi = at + len(head) + most
            nl = text.find("\n", at + len(head))
            if nl >= 0:
                hi = min(hi, nl)
            end = text.find(tail, lo)
            while 0 <= end <= hi:
                stop = end + len(tail)
                if not bounded or stop == len(text) or not is_word_char(text[stop]):
                    return True
                end = text.find(tail, end + 1)
        at = text.find(head, at + 1)
    return False
