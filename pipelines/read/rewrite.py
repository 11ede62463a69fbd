"""The optional LLM query rewriter: a question as 1-3 retrieval queries.

Off by default; on only when a chat model is configured and ``query_rewrite=llm``. The
model turns a question into short queries worded like the memory that would answer it
(a two-part question becomes its parts; "when did X…" becomes "X on <date>"), and search
fuses their hits as the ``rewrite`` route beside the plain ones.

It must never break search: :class:`CachedRewriter` answers ``()`` on any failure of the
model (timeout, refusal, bad JSON) and logs that once per search; answers are cached per
(scope, query) for a short time, and after a failure the model is left alone for a short
cool-down so a dead endpoint costs one timeout, not one per search.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from sleepmem.core.logs import get_logger
from sleepmem.pipelines.ports import ChatModel

MAX_QUERIES = 3
MAX_QUERY_CHARS = 300

SYSTEM = (
    "You turn a question about a person's past conversations into search queries for a "
    "memory store of short first-hand statements. Give 1 to 3 queries. If the question "
    "joins two facts, give one query per fact. Word each query like the statement that "
    "would answer it (the likely words of the answer), not like a question. Keep names, "
    "places and dates from the question. Do not answer the question."
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "queries": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "maxItems": MAX_QUERIES,
        }
    },
    "required": ["queries"],
}


class QueryRewriter(Protocol):
    """``rewriter(scope_key, query)`` → extra retrieval queries; never raises."""

    def __call__(self, scope_key: str, query: str) -> Sequence[str]: ...


def rewrite_query(chat: ChatModel, query: str, *, limit: int = MAX_QUERIES) -> list[str]:
    """The model's retrieval queries for ``query``: cleaned, distinct, not the query itself,
    at most ``limit``. Raises whatever the model raises."""
    data, _usage = chat.complete_json(system=SYSTEM, user=f"Question: {query}", schema=SCHEMA)
    raw = data.get("queries")
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list):
        raise ValueError("the model's reply has no list of queries")
    seen = {_key(query)}
    out: list[str] = []
    for item in raw:
        if not isinstance(item, str):
            continue
        text = " ".join(item.split())[:MAX_QUERY_CHARS]
        if text and _key(text) not in seen:
            seen.add(_key(text))
            out.append(text)
        if len(out) >= limit:
            break
    return out


def _key(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip("?.! ")


class CachedRewriter:
    """:func:`rewrite_query` behind a short per-(scope, query) cache and a failure cool-down.

    Thread-safe (the API runs searches in a thread pool). Concurrent misses of the same key
    may both ask the model; the cache keeps the last answer.
    """

    def __init__(
        self,
        chat: ChatModel,
        *,
        ttl_s: float = 300.0,
        cooldown_s: float = 30.0,
        max_entries: int = 4096,
        limit: int = MAX_QUERIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.chat = chat
        self.ttl_s = ttl_s
        self.cooldown_s = cooldown_s
        self.max_entries = max_entries
        self.limit = limit
        self._clock = clock
        self._cache: OrderedDict[tuple[str, str], tuple[float, tuple[str, ...]]] = OrderedDict()
        self._lock = threading.Lock()
        self._resting_until = 0.0
        self._log = get_logger("sleepmem.rewrite")

    def __call__(self, scope_key: str, query: str) -> tuple[str, ...]:
        key = (scope_key, query)
        now = self._clock()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and hit[0] > now:
                self._cache.move_to_end(key)
                return hit[1]
            if now < self._resting_until:
                return ()
        started = time.perf_counter()
        try:
            queries = tuple(rewrite_query(self.chat, query, limit=self.limit))
        except Exception as exc:  # any failure falls back to the plain routes
            with self._lock:
                self._resting_until = self._clock() + self.cooldown_s
            self._log.warning("query_rewrite.failed", error=type(exc).__name__,
                              detail=str(exc)[:200], scope=scope_key,
                              ms=round((time.perf_counter() - started) * 1000, 1),
                              cooldown_s=self.cooldown_s)
            return ()
        with self._lock:
            self._cache[key] = (self._clock() + self.ttl_s, queries)
            self._cache.move_to_end(key)
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)
        self._log.debug("query_rewrite", scope=scope_key, queries=len(queries),
                        ms=round((time.perf_counter() - started) * 1000, 1))
        return queries
