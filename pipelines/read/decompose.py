"""Two-part questions, split so each part is searched on its own.

"Where did she move and what does she do there?" asks for two facts that rarely sit in
one memory; searched whole, the part with the rarer words wins every slot. Splitting on
coordinating conjunctions and clause breaks (EN and ZH) gives each part its own search;
a part must carry at least two content words (lexical tokens, so stopwords and
particles don't count), which keeps "Caroline and Melanie" and "salt and pepper" whole.
"""

from __future__ import annotations

import re

from sleepmem.pipelines.lexical import tokens

MAX_PARTS = 3
MIN_CONTENT_TOKENS = 2

# Clause joints: ", and", "and", "as well as", "also", ";", "?" between questions; ZH
# 和 / 以及 / 还有 / 并且 / 而且 / 同时 / full-width comma and semicolon.
_JOINTS = re.compile(
    r"\s*(?:[;?？；]|,?\s+\b(?:and|as well as|and also|but also|plus)\b\s+"
    r"|以及|还有|并且|而且|同时|，|、)\s*",
    re.IGNORECASE,
)


def _content(text: str) -> int:
    return len({t for t in tokens(text) if len(t) > 1 or not t.isascii()})


def parts(query: str) -> list[str]:
    """The query's parts when it joins two or more questions, else ``[]``.

    Adjacent pieces too thin to stand alone are merged back into their neighbour.
    """
    pieces = [p.strip(" ,.") for p in _JOINTS.split(query) if p and p.strip(" ,.")]
    if len(pieces) < 2:
        return []
    merged: list[str] = []
    for piece in pieces:
        if merged and (_content(piece) < MIN_CONTENT_TOKENS
                       or _content(merged[-1]) < MIN_CONTENT_TOKENS):
            merged[-1] = f"{merged[-1]} {piece}"
        else:
            merged.append(piece)
    merged = [m for m in merged if _content(m) >= MIN_CONTENT_TOKENS]
    return merged[:MAX_PARTS] if len(merged) >= 2 else []
