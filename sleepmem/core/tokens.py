"""Token counting with a real tokenizer: cl100k_base from bpe-openai (ships its table).

Built once per process on first use, never at import time. Short texts (one rendered
memory line) repeat from turn to turn, so their counts are cached.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

TOKENIZER = "cl100k_base"
CACHED_CHARS = 1000


@functools.cache
def _cl100k() -> Callable[[str], int]:
    import bpe_openai

    enc = bpe_openai.get_encoding("cl100k_base")
    return lambda text: len(enc.encode(text))


@functools.lru_cache(maxsize=1 << 16)
def _cached(text: str) -> int:
    return _cl100k()(text)


def count_tokens(text: str) -> int:
    """cl100k tokens of ``text``."""
    if not text:
        return 0
    return _cached(text) if len(text) <= CACHED_CHARS else _cl100k()(text)
