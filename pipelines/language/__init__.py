"""Language packs: what each language knows, behind one interface, and one detector.

``detect(text)`` names a text's language; ``pack(code)`` returns that language's pack;
``read(texts)`` reads each text with its own language's pack, in one batch per language.
Adding a language means adding a pack and naming it in ``_PACKS``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

from sleepmem.pipelines.language.base import LanguagePack, Mood, Owner, Reading, Time

__all__ = ["CJK_RANGES", "LanguagePack", "Mood", "Owner", "Reading", "Time", "codes", "detect",
           "has_cjk", "is_han", "pack", "read"]

# The one definition of Han text (CJK ideographs, extension A and compatibility): every
# module asks `detect` or `has_cjk` instead of keeping its own range.
CJK_RANGES = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF))


# One character class built from those ranges: scanning text is the hot loop of extraction.
_HAN = re.compile("[" + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in CJK_RANGES) + "]")
_LATIN = re.compile("[A-Za-z]")


def is_han(ch: str) -> bool:
    return _HAN.match(ch) is not None


def has_cjk(text: str) -> bool:
    return _HAN.search(text) is not None


def detect(text: str) -> str:
    """"zh" when Han characters carry the text, else "en": a sentence that names one
    Chinese place inside English words is English."""
    han = len(_HAN.findall(text))
    latin = len(_LATIN.findall(text))
    return "zh" if han and han * 3 >= latin else "en"


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
