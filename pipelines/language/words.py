"""Words: one tokenizer and phrase lists matched by whole words, not by patterns.

``words(text)`` splits a text into its word runs once (a word character is a letter, a
digit or "_", as everywhere else in the packs). A ``Phrases`` list answers whether a
text holds one of its phrases as whole words (``search``) or starts with one
(``starts``); ``Literals`` does the same for scripts written without spaces, where a
phrase is any substring.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

__all__ = ["Literals", "Phrases", "gap", "is_word_char", "strip_prefix", "words"]


def is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


@lru_cache(maxsize=4096)
def words(text: str) -> tuple[str, ...]:
    """The word runs of a text, in order (letters, digits and "_"; case kept)."""
    out: list[str] = []
    start = -1
    for i, ch in enumerate(text):
        if ch.isalnum() or ch == "_":
            if start < 0:
                start = i
        elif start >= 0:
            out.append(text[start:i])
            start = -1
    if start >= 0:
        out.append(text[start:])
    return tuple(out)


def _bounded(text: str, start: int, end: int) -> bool:
    return (start == 0 or not is_word_char(text[start - 1])) and (
        end == len(text) or not is_word_char(text[end]))


class Phrases:
    """Phrases matched case-insensitively as whole words.

    A phrase starts and ends with a word character; it matches where the text holds it
    with no word character right before or after. With ``loose`` a space in a phrase
    stands for any run of white space in the text.
    """

    def __init__(self, phrases: Iterable[str], *, loose: bool = False) -> None:
        self.phrases = tuple(dict.fromkeys(p.lower() for p in phrases))
        self.loose = loose
        for p in self.phrases:
            if not (p and is_word_char(p[0]) and is_word_char(p[-1])):
                raise ValueError(f"a phrase starts and ends with a word character: {p!r}")

    def _text(self, text: str) -> str:
        low = text.lower()
        return " ".join(low.split()) if self.loose else low

    def search(self, text: str) -> bool:
        """Whether one phrase occurs in the text as whole words."""
        low = self._text(text)
        for p in self.phrases:
            at = low.find(p)
            while at >= 0:
                if _bounded(low, at, at + len(p)):
                    return True
                at = low.find(p, at + 1)
        return False

    def starts(self, text: str, *, lstrip: bool = False) -> bool:
        """Whether the text opens with one phrase, ending at a word boundary."""
        if not lstrip and text[:1].isspace():
            return False
        low = self._text(text).lstrip()
        return any(low.startswith(p) and _bounded(low, 0, len(p)) for p in self.phrases)

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
