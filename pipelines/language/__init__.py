"""Language packs: what each language knows, behind one interface, and one detector.

``detect(text)`` names a text's language; ``pack(code)`` returns that language's pack;
``read(texts)`` reads each text with its own language's pack, in one batch per language.
Adding a language means adding a pack and naming it in ``_PACKS``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from sleepmem.pipelines.language.base import LanguagePack, Mood, Owner, Reading, Time

__all__ = ["CJK_RANGES", "LanguagePack", "Mood", "Owner", "Reading", "Time", "codes", "detect",
           "han_runs", "has_cjk", "is_han", "main_clause", "normalised", "pack", "read"]

# The one definition of Han text (CJK ideographs, extension A and compatibility): every
# module asks `detect` or `has_cjk` instead of keeping its own range.
CJK_RANGES = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF))


_LO, _HI = CJK_RANGES[0][0], CJK_RANGES[-1][1]


def is_han(ch: str) -> bool:
    """Whether the first character of ``ch`` is a Han character."""
    if not ch:
        return False
    o = ord(ch[0])
    return _LO <= o <= _HI and any(lo <= o <= hi for lo, hi in CJK_RANGES)


def has_cjk(text: str) -> bool:
    # ASCII text (most English) has none: one C-level test instead of a scan.
    return not text.isascii() and any(is_han(ch) for ch in text)


def han_runs(text: str, least: int = 1) -> list[str]:
    """The runs of consecutive Han characters in a text, of ``least`` characters or more."""
    if text.isascii():
        return []
    out: list[str] = []
    start = -1
    for i, ch in enumerate(text):
        if is_han(ch):
            if start < 0:
                start = i
        elif start >= 0:
            if i - start >= least:
                out.append(text[start:i])
            start = -1
    if start >= 0 and len(text) - start >= least:
        out.append(text[start:])
    return out


def detect(text: str) -> str:
    """"zh" when Han characters carry the text, else "en": a sentence that names one
    Chinese place inside English words is English."""
    if text.isascii():
        return "en"
    han = sum(1 for ch in text if is_han(ch))
    if not han:
        return "en"
    latin = sum(1 for ch in text if ch.isascii() and ch.isalpha())
    return "zh" if han * 3 >= latin else "en"


def _english() -> LanguagePack:
    from sleepmem.pipelines.language.en import EnglishPack

    return EnglishPack()


def _chinese() -> LanguagePack:
    from sleepmem.pipelines.language.zh import ChinesePack

    return ChinesePack()


_PACKS: dict[str, Callable[[], LanguagePack]] = {"en": _english, "zh": _chinese}


@cache
def pack(code: str) -> LanguagePack:
    """The pack of a language (built once per process, on first use)."""
    try:
        return _PACKS[code]()
    except KeyError:
        raise ValueError(f"no language pack for {code!r}; packs: {sorted(_PACKS)}") from None


def codes() -> list[str]:
    """Every language a pack is written for."""
    return sorted(_PACKS)


def normalised(text: str) -> str:
    """``text`` as its language's pack reads it (see ``LanguagePack.normalised``)."""
    return pack(detect(text)).normalised(text)


def main_clause(text: str) -> str:
    """``text`` from where its main clause starts (see ``LanguagePack.main_clause``)."""
    return pack(detect(text)).main_clause(text)


def read(texts: list[str]) -> list[Reading]:
    """A reading of each text, each by its own language's pack, order kept."""
    out: list[Reading | None] = [None] * len(texts)
    by_lang: dict[str, list[int]] = {}
    for i, text in enumerate(texts):
        by_lang.setdefault(detect(text), []).append(i)
    for code, idx in by_lang.items():
        for i, reading in zip(idx, pack(code).readings([texts[i] for i in idx]), strict=True):
            out[i] = reading
    return [r for r in out if r is not None]
