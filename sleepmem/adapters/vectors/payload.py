"""What both index backends store, and what an :class:`IndexFilter` means, in one place.

Backends differ in their filter classes, not in semantics: :func:`conditions` states the
filter as a list of engine-neutral conditions (all must hold) that each backend translates
one-to-one. Stored payloads avoid values engines treat inconsistently: an unset scope level
('') is stored as :data:`UNSET`, and an open-ended time (None) as :data:`FOREVER`, so every
condition is a plain keyword match or a numeric range. Flags (``hidden``) are stored as
0/1: qdrant-edge's binding turns a bool match value into an integer, which then never
matches a stored bool.

Point ids are our 32-hex-digit memory ids; engines want UUIDs, which hold them losslessly.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from sleepmem.core.errors import ValidationError
from sleepmem.models.scope import LEVELS
from sleepmem.pipelines.ports import IndexFilter, SparseVector

# Cannot be a scope identifier (those start with a letter or digit).
UNSET = "~"
# An epoch-seconds time far past any real one (year ~2.8e8) that JSON and f64 carry exactly.
FOREVER = 9.0e15

SCOPE_FIELDS: tuple[str, ...] = LEVELS
KEYWORD_FIELDS: tuple[str, ...] = (*LEVELS, "scope_key", "lineage", "type", "status")
TIME_FIELDS: tuple[str, ...] = ("valid_from", "valid_to", "expires_at")
OPEN_TIME_FIELDS: frozenset[str] = frozenset({"valid_to", "expires_at"})
FLAG_FIELDS: tuple[str, ...] = ("hidden",)
CONTENT_KEYS: frozenset[str] = frozenset({"statement", "content", "text"})

_U32_MAX = 2**32 - 1

DENSE = "dense"
# A multivector per point, one per sentence, compared by its best match (MaxSim).
SENTENCES = "sentences"
LEXICAL = "lexical"


# -- ids -------------------------------------------------------------------------------


def point_id(memory_id: str) -> uuid.UUID:
    """The engine id of a memory id; refuses anything that would not map back unchanged."""
    try:
        pid = uuid.UUID(hex=memory_id)
    except (ValueError, TypeError, AttributeError) as exc:
        raise ValidationError("id", f"must be 32 hex digits, got {memory_id!r}") from exc
    if pid.hex != memory_id:
        raise ValidationError("id", f"must be 32 lowercase hex digits, got {memory_id!r}")
    return pid


def memory_id(pid: uuid.UUID | str | int) -> str:
    """Our id of an engine point id (engines hand back UUID objects or hyphenated strings)."""
    if isinstance(pid, uuid.UUID):
        return pid.hex
    return uuid.UUID(str(pid)).hex


def sparse_pairs(vec: SparseVector) -> tuple[list[int], list[float]]:
    """(indices, values) sorted by index; refuses ids outside the engines' u32 range."""
    indices = sorted(vec)
    if indices and (indices[0] < 0 or indices[-1] > _U32_MAX):
        raise ValidationError("sparse", "token ids must be in 0..2**32-1")
    return indices, [float(vec[i]) for i in indices]


# -- payload ---------------------------------------------------------------------------


def epoch(value: datetime | float | int) -> float:
    """Epoch seconds; a naive datetime is taken as UTC, never as the machine's zone."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.timestamp()
    return float(value)


def _encode_field(key: str, value: Any) -> Any:
    if key in SCOPE_FIELDS:
        if value is None or value == "":
            return UNSET
        return str(value)
    if key in TIME_FIELDS:
        if value is None:
            if key not in OPEN_TIME_FIELDS:
                raise ValidationError(key, "is required (epoch seconds)")
            return FOREVER
        return epoch(value)
    if key in FLAG_FIELDS:
        return int(bool(value))
    return value


def encode(payload: Mapping[str, Any], *, partial: bool = False) -> dict[str, Any]:
    """The stored form of a payload. A full payload gets every filter field a value.

    ``partial`` encodes only the keys given (``set_payload``); a full one needs a tenant
    and a valid_from, and fills the optional fields with their "unset" values.
    """
    content = CONTENT_KEYS.intersection(payload)
    if content:
        # SQL holds content; the index must not be a second copy that a forget could miss.
        raise ValidationError(sorted(content)[0], "memory content never goes into the index")
    out = {key: _encode_field(key, value) for key, value in payload.items()}
    if partial:
        if out.get("tenant") == UNSET:
            raise ValidationError("tenant", "cannot be unset")
        return out
    if out.get("tenant", UNSET) == UNSET:
        raise ValidationError("tenant", "is required in every index payload")
    if "valid_from" not in out:
        raise ValidationError("valid_from", "is required in every index payload")
    for key in SCOPE_FIELDS:
        out.setdefault(key, UNSET)
    for key in OPEN_TIME_FIELDS:
        out.setdefault(key, FOREVER)
    out.setdefault("hidden", 0)
    return out


def decode(stored: Mapping[str, Any]) -> dict[str, Any]:
    """The payload as the pipeline wrote it: '' and None back in place of the sentinels."""
    out = dict(stored)
    for key in SCOPE_FIELDS:
        if out.get(key) == UNSET:
            out[key] = ""
    for key in OPEN_TIME_FIELDS:
        if key in out and (out[key] is None or out[key] >= FOREVER):
            out[key] = None
    for key in FLAG_FIELDS:
        if key in out:
            out[key] = bool(out[key])
    return out


# -- filter ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AnyOf:
    """The keyword field equals one of ``values``."""

    key: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Flag:
    """The flag field (stored as 0/1) equals ``value``."""

    key: str
    value: bool

    @property
    def stored(self) -> int:
        return int(self.value)


@dataclass(frozen=True, slots=True)
class Range:
    """The float field lies in the range; None bounds are open."""

    key: str
    gt: float | None = None
    lte: float | None = None


Condition = AnyOf | Flag | Range


def matches_nothing(where: IndexFilter) -> bool:
    """An empty allow-list of types or statuses: skip the engine, the answer is []."""
    return (where.types is not None and not where.types) or (
        where.as_of is None and not where.statuses
    )


def conditions(where: IndexFilter) -> list[Condition]:
    """The filter as conditions that must all hold. The semantics of IndexFilter live here."""
    scope = where.scope
    out: list[Condition] = [AnyOf("tenant", (scope.tenant,))]
    for level in SCOPE_FIELDS[1:]:
        mine = getattr(scope, level)
        # A point at a broader scope ('' at this level) is visible; a sibling or a narrower
        # one is not. A searcher with '' here sees only points with '' here.
        out.append(AnyOf(level, (UNSET, mine) if mine else (UNSET,)))
    if where.types is not None:
        out.append(AnyOf("type", tuple(where.types)))
    out.append(Flag("hidden", False))
    if where.as_of is None:
        out.append(AnyOf("status", tuple(where.statuses)))
        out.append(Range("expires_at", gt=epoch(where.now)))
    else:
        at = epoch(where.as_of)
        # What was true then, whatever has happened to it since: status and expiry ignored.
        out.append(Range("valid_from", lte=at))
        out.append(Range("valid_to", gt=at))
    if where.valid_between is not None:
        # [start, end) with the (gt, lte] ranges the engines offer: a microsecond inside.
        start, end = where.valid_between
        out.append(Range("valid_from", gt=epoch(start) - 1e-6, lte=epoch(end) - 1e-6))
    return out


IndexKind = Literal["keyword", "float", "integer"]


def indexed_fields() -> dict[str, IndexKind]:
    """Payload indexes every backend creates: one per field a filter touches or a
    maintenance job selects by."""
    fields: dict[str, IndexKind] = dict.fromkeys(KEYWORD_FIELDS, "keyword")
    fields.update(dict.fromkeys(TIME_FIELDS, "float"))
    fields.update(dict.fromkeys(FLAG_FIELDS, "integer"))
    return fields
