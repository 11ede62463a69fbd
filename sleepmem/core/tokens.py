"""Token counting with a real tokenizer: cl100k_base from bpe-openai (ships its table).

Built once per process on first use, never at import time.
"""

from __future__ import annotations

import functools
from collections.abc import Callable


@functools.cache
def _cl100k() -> Callable[[str], int]:
    import bpe_openai

    enc = bpe_openai.get_encoding("cl100k_base")
    return lambda text: len(enc.encode(text))


TOKENIZER = "cl100k_base"


def count_tokens(text: str) -> int:
    """cl100k tokens of ``text``."""
    return _cl100k()(text) if text else 0
