"""What agents read back: search requests and short memory cards."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sleepmem.core.tokens import TOKENIZER
from sleepmem.models.scope import Scope

MemoryTypeName = Literal["identity", "preference", "fact", "task", "event", "summary", "procedure"]
MEMORY_TYPES: tuple[str, ...] = (
    "identity",
    "preference",
    "fact",
    "task",
    "event",
    "summary",
    "procedure",
)


SEARCH_K_MAX = 100  # memories one search may return

# How a result shows its k memories: ``cards``, each whole (a passage of overlapping
# episodes reads several memories in one card); ``lines``, each as its one sentence that
# shares most words with the query (sleepmem.pipelines.read.snippets); ``mixed``, the best
# memories whole and the rest one line each, within the budget.
SearchFormat = Literal["cards", "lines", "mixed"]
SEARCH_FORMATS: tuple[str, ...] = ("cards", "lines", "mixed")


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    query: str = Field(min_length=1, max_length=4096)
    scope: Scope
    k: int = Field(default=5, ge=1, le=SEARCH_K_MAX)
    types: tuple[MemoryTypeName, ...] | None = None
    as_of: datetime | None = None
    max_tokens: int | None = Field(default=None, ge=1, le=100_000)
    with_provenance: bool = False
    format: SearchFormat = "cards"

    @field_validator("query", mode="after")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("query must contain some text, not only whitespace")
        return v

    @field_validator("as_of", mode="after")
    @classmethod
    def _aware(cls, v: datetime | None) -> datetime | None:
        if v is None:
            return None
        try:
            return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)
        except OverflowError:  # 0001-01-01T00:00:00+05:00 is before year 1 in UTC
            raise ValueError(
                "as_of is outside the supported range: give a UTC time between 0001-01-02 "
                "and 9999-12-30"
            ) from None


class MemoryCard(BaseModel):
    id: str
    statement: str
    type: str
    source: str
    trust: str
    valid_from: datetime
    confidence: float
    score: float
    status: str = "active"
    provenance: list[str] | None = None
    # Which recall routes proposed it (dense, lexical, time, part, entity, ...); left out
    # of the JSON when empty so clients that predate routes see the card they know.
    routes: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    # The memories whose words this card also reads, when overlapping episodes came back
    # as one passage (``statement`` holds them all, each turn once); left out when empty.
    joined: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    # ``statement`` is one line of the memory (the sentence sharing most words with the
    # query, behind its speaker), not the memory whole: formats ``lines`` and ``mixed``.
    # Left out when False.
    line: bool = Field(default=False, exclude_if=lambda v: not v)
    # When each memory the card reads became valid, in the order of ``[id, *joined]``:
    # a passage's turns may be hours apart and ``valid_from`` is only the earliest. Left
    # out when the card reads one memory.
    times: list[datetime] = Field(default_factory=list, exclude_if=lambda v: not v)


class ConflictGroup(BaseModel):
    """Two or more trusted memories that disagree; returned together, never as winners."""

    conflict: Literal[True] = True
    conflict_set: str
    score: float
    sides: list[MemoryCard]


def card_sides(card: MemoryCard | ConflictGroup) -> list[MemoryCard]:
    """The memories a result entry stands for: a card itself, or each side of a conflict."""
    return card.sides if isinstance(card, ConflictGroup) else [card]


class SearchResult(BaseModel):
    cards: list[MemoryCard | ConflictGroup]
    # The format the cards are in, the memories they read (at most the request's k: a
    # passage counts each memory it joins, a conflict counts once, its sides together),
    # and their cl100k tokens (at most max_tokens when the request named one).
    format: SearchFormat = "cards"
    memories: int = 0
    tokens: int = 0
    tokenizer: str = TOKENIZER
    # Set when the search named a min_position: whether memory held every event of the
    # scope up to it when the answer was made, and the position it had reached.
    fresh: bool | None = None
    reached: str | None = None

    def flat(self) -> list[MemoryCard]:
        return [m for c in self.cards for m in card_sides(c)]
