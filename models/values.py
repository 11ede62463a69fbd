"""Stored values: a key-value table beside memory, for callers that need back exactly what
they put (the LangGraph store). A value is read and written at once, never consolidated;
it belongs to a scope, so erasing the scope erases it, and it may expire.

A namespace is a path of labels; it is stored joined by ``.``, which no label may hold
(LangGraph's own rule), so a prefix of the path is a prefix of the string.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator
from sqlalchemy import JSON, Column, Index
from sqlmodel import Field as SQLField

from sleepmem.models.scope import Scope
from sleepmem.models.tables import ScopeColumns, UTCDateTime, _now

SEPARATOR = "."
MAX_LABEL = 128
MAX_DEPTH = 8
MAX_KEY = 512
NAMESPACE_CHARS = MAX_DEPTH * (MAX_LABEL + 1)
# A wildcard in a namespace match condition stands for any one label.
WILDCARD = "*"
# ``index``: at most this many field paths, each at most this long.
MAX_INDEX_FIELDS = 32
MAX_INDEX_PATH = 256
# A century: any longer keeps a value as surely as no ttl, and an expiry time computed past
# year 9999 cannot be stored (it was a 500).
MAX_TTL_S = 100 * 365.25 * 86400


def _ts(**kw: Any) -> Any:
    return SQLField(sa_column=Column(UTCDateTime(), **kw))


class StoreValue(ScopeColumns, table=True):
    """One value under (scope, namespace, key); ``ttl_s`` is kept so a read can renew it."""

    __tablename__ = "store_value"
    __table_args__ = (
        Index("ix_store_value_namespace", "tenant", "namespace"),
        Index("ix_store_value_expires", "expires_at"),
    )

    # A hash of (scope_key, namespace, key): the three together are too long for one
    # PostgreSQL index entry.
    id: str = SQLField(primary_key=True, max_length=64)
    scope_key: str = SQLField(max_length=700)
    namespace: str = SQLField(max_length=NAMESPACE_CHARS)
    key: str = SQLField(max_length=MAX_KEY)
    value: dict[str, Any] = SQLField(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_at: datetime = _ts(nullable=False, default=_now)
    updated_at: datetime = _ts(nullable=False, default=_now)
    expires_at: datetime | None = _ts(nullable=True)
    ttl_s: float | None = None
    # The field paths a query matches (LangGraph's ``index``): NULL for the whole value,
    # ``[]`` for none (put with ``index=False``: never found by a query).
    index_fields: list[str] | None = SQLField(
        default=None, sa_column=Column(JSON(none_as_null=True), nullable=True))


def check_label(label: object, *, field: str) -> str:
    """One namespace label, or ValueError naming the rule it breaks."""
    if not isinstance(label, str) or not label:
        raise ValueError(f"{field}: a namespace label is a non-empty string")
    if SEPARATOR in label or "\x00" in label:
        raise ValueError(f"{field}: a namespace label may not hold '.' or NUL")
    if len(label) > MAX_LABEL:
        raise ValueError(f"{field}: a namespace label is at most {MAX_LABEL} characters")
    return label


def _path(labels: list[str], *, empty: bool, field: str) -> list[str]:
    if not labels and not empty:
        raise ValueError(f"{field}: name at least one label")
    if len(labels) > MAX_DEPTH:
        raise ValueError(f"{field}: at most {MAX_DEPTH} labels")
    return [check_label(label, field=f"{field}[{i}]") for i, label in enumerate(labels)]


def _check_path(path: str, *, field: str) -> None:
    from langgraph.store.base.embed import tokenize_path

    if path == "$":
        return
    parts = tokenize_path(path)
    if not parts:
        raise ValueError(f"{field}: {path!r} names no field")
    for part in parts:
        if part.startswith("["):
            digits = part[1:-1].removeprefix("-")
            if not part.endswith("]") or not (
                    part == "[*]" or (digits.isascii() and digits.isdigit())):
                raise ValueError(f"{field}: {path!r}: an index is [n], [-n] or [*], not "
                                 f"{part!r}")
        elif part.startswith("{"):
            if not part.endswith("}") or not all(f.strip() for f in part[1:-1].split(",")):
                raise ValueError(f"{field}: {path!r}: a field set is {{a,b}}, not {part!r}")
        elif any(c in part for c in "]}"):
            raise ValueError(f"{field}: {path!r}: unbalanced {part!r}")


def check_index(index: object, *, field: str = "index",
                parse: bool = True) -> Literal[False] | list[str] | None:
    """LangGraph's ``index`` on put, or ValueError naming the rule it breaks: None (the
    whole value), False (not indexed: no query finds it) or a list of field paths in
    LangGraph's syntax (``"title"``, ``"a.b"``, ``"a[0]"``, ``"a[*].b"``, ``"{a,b}"``,
    ``"$"``), parsed by LangGraph's own ``tokenize_path`` unless ``parse`` is False (a
    client leaves that to the server, which may have LangGraph where it has not)."""
    if index is None or index is False:
        return index
    if not isinstance(index, list | tuple):
        raise ValueError(f"{field}: give None, False or a list of field paths, not "
                         f"{type(index).__name__} {index!r}"[:300])
    if not index:
        raise ValueError(f"{field}: name at least one field path (False indexes none)")
    if len(index) > MAX_INDEX_FIELDS:
        raise ValueError(f"{field}: at most {MAX_INDEX_FIELDS} field paths")
    for i, path in enumerate(index):
        if not isinstance(path, str) or not path.strip():
            raise ValueError(f"{field}[{i}]: a field path is a non-empty string")
        if len(path) > MAX_INDEX_PATH:
            raise ValueError(f"{field}[{i}]: a field path is at most {MAX_INDEX_PATH} "
                             "characters")
        if not parse:
            continue
        try:
            _check_path(path, field=f"{field}[{i}]")
        except ImportError:
            raise ValueError(f"{field}: field paths need LangGraph on the server (pip "
                             "install 'sleepmem[langgraph]'); None or False need nothing"
                             ) from None
    return list(index)


def index_fields(index: Literal[False] | list[str] | None) -> list[str] | None:
    """What the ``index_fields`` column keeps for a put's ``index``."""
    return [] if index is False else index


def join(labels: list[str] | tuple[str, ...]) -> str:
    return SEPARATOR.join(labels)


def split(path: str) -> tuple[str, ...]:
    return tuple(path.split(SEPARATOR)) if path else ()


class ValuePut(BaseModel):
    scope: Scope
    namespace: list[str]
    key: str = Field(min_length=1, max_length=MAX_KEY)
    value: dict[str, Any]
    ttl_s: float | None = Field(default=None, gt=0, le=MAX_TTL_S, description=(
        "seconds: expire this long after the last write (or read, when reads refresh), "
        "at most a century"))
    index: Literal[False] | list[str] | None = Field(
        default=None, description="what a query matches (LangGraph's index): null for the "
        "whole value, false for nothing (get and filters still find it), or field paths "
        "such as \"title\", \"a.b\", \"items[*].text\"")

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, v: list[str]) -> list[str]:
        return _path(v, empty=False, field="namespace")

    @field_validator("index", mode="before")
    @classmethod
    def _index(cls, v: object) -> object:
        return check_index(v, field="index")


class ValueSearch(BaseModel):
    scope: Scope
    namespace_prefix: list[str] = Field(default_factory=list)
    filter: dict[str, Any] | None = Field(
        default=None, description="exact matches on the value's fields, or operators "
        "$eq $ne $gt $gte $lt $lte")
    query: str | None = Field(default=None, max_length=2000,
                              description="keep values that share words with it, best first")
    limit: int = Field(default=10, ge=1, le=10_000)
    offset: int = Field(default=0, ge=0)
    refresh_ttl: bool = True

    @field_validator("namespace_prefix")
    @classmethod
    def _prefix(cls, v: list[str]) -> list[str]:
        return _path(v, empty=True, field="namespace_prefix")


class StoredValue(BaseModel):
    """A value as stored: secrets in it were redacted on the way in."""

    scope: Scope
    namespace: list[str]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = None
    # Search only: how well the value matched the query (None without a query).
    score: float | None = None


class StoredValues(BaseModel):
    items: list[StoredValue]


class ValueNamespaces(BaseModel):
    namespaces: list[list[str]]


class ValuesDeleted(BaseModel):
    deleted: int


__all__ = [
    "MAX_DEPTH",
    "MAX_INDEX_FIELDS",
    "MAX_INDEX_PATH",
    "MAX_KEY",
    "MAX_LABEL",
    "SEPARATOR",
    "WILDCARD",
    "StoreValue",
    "StoredValue",
    "StoredValues",
    "ValueNamespaces",
    "ValuePut",
    "ValueSearch",
    "ValuesDeleted",
    "check_index",
    "check_label",
    "index_fields",
    "join",
    "split",
]
