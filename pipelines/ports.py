"""The ports a pipeline is given: the outside world seen as small protocols.

Stages never build these themselves; tasks build them once per worker process and pass
them in, and unit tests pass in-memory versions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from sleepmem.models.scope import Scope
from sleepmem.pipelines.types import Extractor

Clock = Callable[[], datetime]
Vector = npt.NDArray[np.float32]
SparseVector = dict[int, float]


class Embedder(Protocol):
    """Turns text into unit-length dense vectors. Always called with a batch."""

    name: str
    dim: int

    def embed(
        self, texts: Sequence[str], *, kind: Literal["query", "document"] = "document"
    ) -> Vector: ...


@dataclass(frozen=True, slots=True)
class LLMUsage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: LLMUsage) -> LLMUsage:
        return LLMUsage(
            self.calls + other.calls,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )


class ChatModel(Protocol):
    """An OpenAI-compatible chat model asked for one JSON object per call."""

    model: str

    def complete_json(
        self, *, system: str, user: str, schema: dict[str, Any]
    ) -> tuple[dict[str, Any], LLMUsage]: ...


@dataclass(frozen=True, slots=True)
class IndexPoint:
    """One current memory version in the vector index."""

    id: str
    vector: Vector
    sparse: SparseVector
    payload: dict[str, Any]
    # One vector per sentence of a first-hand memory that has several (see
    # sleepmem.pipelines.write.index.own_sentences); empty for the rest.
    sentences: Sequence[Vector] = ()


@dataclass(frozen=True, slots=True)
class IndexFilter:
    """What a search may see. Backends translate it into their own filter language.

    ``scope``: each level of a point must be unset or equal to the scope's (nesting);
    the tenant must match exactly. ``as_of``: points valid at that time, whatever their
    status; otherwise only current statuses not expired at ``now``. ``valid_between``:
    besides, points that became valid in that half-open window.
    """

    scope: Scope
    now: datetime
    types: tuple[str, ...] | None = None
    as_of: datetime | None = None
    statuses: tuple[str, ...] = ("active", "pending_confirmation")
    # The time route: only points whose valid_from lies in [start, end).
    valid_between: tuple[datetime, datetime] | None = None


@dataclass(frozen=True, slots=True)
class Hit:
    id: str
    score: float


class VectorIndex(Protocol):
    """Dense + sparse (lexical) index over current memory versions."""

    def ensure(self, *, dim: int) -> None: ...

    def upsert(self, points: Sequence[IndexPoint]) -> None: ...

    def set_payload(self, ids: Sequence[str], payload: dict[str, Any]) -> None: ...

    def delete(self, ids: Sequence[str]) -> None: ...

    def search_dense(self, vector: Vector, *, where: IndexFilter, limit: int) -> list[Hit]: ...

    def search_sentences(
        self, vector: Vector, *, where: IndexFilter, limit: int
    ) -> list[Hit]:
        """Points scored by their best-matching sentence (points without sentences are not
        candidates); empty when the index predates sentence vectors."""
        ...

    def search_sparse(
        self, sparse: SparseVector, *, where: IndexFilter, limit: int
    ) -> list[Hit]: ...

    def payloads(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]: ...

    def all_ids(self, *, tenant: str | None = None) -> list[str]: ...

    def count(self) -> int: ...

    def maintain(self) -> bool:
        """Off-hot-path housekeeping (index build, segment merge); True if anything changed."""
        ...

    def compact(self) -> str:
        """After an erasure: make deleted points leave every file; the state, in words."""
        ...

    def close(self) -> None: ...


class HotStore(Protocol):
    """What the request path keeps outside SQL: pending stream entries, retrieval hits,
    consolidation leases and per-scope markers. Erasure reaches them only through this."""

    def hold_scopes(self, scope_keys: Sequence[str]) -> AbstractContextManager[object]:
        """Hold the consolidation lease of every scope named, for as long as the context."""
        ...

    def erase_pending_events(self, covers: Callable[[dict[str, str]], bool]) -> int:
        """Drop not-yet-drained events whose scope levels ``covers`` accepts; the count."""
        ...

    def erase_hits(self, memory_ids: set[str]) -> int: ...

    def erase_scope_markers(self, scope_keys: Sequence[str]) -> int: ...

    def erase_checkpoints(self, covers: Callable[[dict[str, str]], bool]) -> int:
        """Drop the session checkpoints (and their history) whose scope ``covers`` accepts,
        mirrored to SQL or not yet; the count of sessions."""
        ...


class LeaseGuard(Protocol):
    """The lease a run holds (one scope's consolidation lease)."""

    def confirm(self) -> bool:
        """Renew the lease now; False when it was lost (expired or taken by another)."""
        ...


@dataclass(frozen=True, slots=True)
class Ports:
    """Everything a consolidation or lifecycle pipeline may touch.

    Frozen: built complete by whoever runs the pipeline (``Resources.ports``, a bench, a
    test), never changed afterwards, so a pipeline can pass it on without a stage seeing
    another stage's changes. A variant is a new object (``dataclasses.replace``).
    """

    embedder: Embedder
    index: VectorIndex
    clock: Clock
    chat: ChatModel | None = None
    hot: HotStore | None = None
    # Set while a consolidation runs under a lease: confirmed right before the commit, so
    # a run whose lease was lost rolls back instead of writing beside the next holder.
    lease: LeaseGuard | None = None
    # A caller-chosen extractor (benches, tests); otherwise settings decide.
    extractor: Extractor | None = None
