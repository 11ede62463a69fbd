"""The ``store_value`` table: keyword-only functions over a Session or Connection, like
:mod:`sleepmem.pipelines.store`, and the two rules a read applies to a value (a filter, a
query). Expired rows are never read; :func:`sweep` deletes them.

A filter is judged by :func:`matches`, in Python, on every row a search reads; the parts of
it SQL can judge as well (:func:`pushable`, :func:`filter_clause`) narrow that read first.
SQL only narrows: a row it leaves out is one :func:`matches` would refuse."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement
from sqlmodel import Session, col

from sleepmem.core.errors import ValidationError
from sleepmem.models import LEVELS, Scope, StoreValue
from sleepmem.models.values import SEPARATOR
from sleepmem.pipelines.lexical import tokens

Executor = Session | Connection
PAGE = 500
OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


def value_id(*, scope_key: str, namespace: str, key: str) -> str:
    digest = hashlib.blake2b("\x00".join((scope_key, namespace, key)).encode(), digest_size=16)
    return digest.hexdigest()


def expiry(*, now: datetime, ttl_s: float | None) -> datetime | None:
    return now + timedelta(seconds=ttl_s) if ttl_s is not None else None


def live(*, now: datetime) -> ColumnElement[bool]:
    """Rows not expired at ``now``: expiry is judged on read, the sweep only frees space."""
    return sa.or_(col(StoreValue.expires_at).is_(None), col(StoreValue.expires_at) > now)


def within(scope: Scope) -> ColumnElement[bool]:
    """Values at ``scope`` or any narrower scope under it."""
    conds = [col(StoreValue.tenant) == scope.tenant]
    conds += [getattr(StoreValue, level) == getattr(scope, level)
              for level in LEVELS[1:] if getattr(scope, level)]
    return sa.and_(*conds)


def under(*, namespace: str) -> ColumnElement[bool]:
    """Values whose namespace is ``namespace`` or starts with it, label by label."""
    if not namespace:
        return sa.true()
    return sa.or_(col(StoreValue.namespace) == namespace,
                  col(StoreValue.namespace).startswith(namespace + SEPARATOR, autoescape=True))


def upsert(session: Session, *, scope: Scope, namespace: str, key: str,
           value: dict[str, Any], ttl_s: float | None, now: datetime,
           index_fields: list[str] | None = None) -> StoreValue:
    """Write the value; a value already under the key keeps its creation time.
    ``index_fields``: what a query matches (None: the whole value; []: nothing)."""
    scope_key = scope.key
    vid = value_id(scope_key=scope_key, namespace=namespace, key=key)
    row = session.get(StoreValue, vid)
    if row is None:
        row = StoreValue(id=vid, tenant=scope.tenant, agent=scope.agent, user=scope.user,
                         project=scope.project, session=scope.session, scope_key=scope_key,
                         namespace=namespace, key=key, created_at=now)
    row.value = value
    row.index_fields = index_fields
    row.updated_at = now
    row.ttl_s = ttl_s
    row.expires_at = expiry(now=now, ttl_s=ttl_s)
    session.add(row)
    return row


def fetch(session: Session, *, scope: Scope, namespace: str, key: str,
          now: datetime) -> StoreValue | None:
    row = session.get(StoreValue, value_id(scope_key=scope.key, namespace=namespace, key=key))
    if row is None or (row.expires_at is not None and row.expires_at <= now):
        return None
    return row


def refresh(session: Session, *, rows: list[StoreValue], now: datetime) -> None:
    """A read renews the TTL of the values it returned (those written with one)."""
    for row in rows:
        if row.ttl_s is not None:
            row.expires_at = expiry(now=now, ttl_s=row.ttl_s)
            session.add(row)


def delete(session: Session, *, scope: Scope, namespace: str, key: str) -> int:
    vid = value_id(scope_key=scope.key, namespace=namespace, key=key)
    gone = session.execute(sa.delete(StoreValue).where(col(StoreValue.id) == vid))
    return int(getattr(gone, "rowcount", 0) or 0)


def scan(session: Session, *, scope: Scope, namespace_prefix: str, now: datetime,
         where: ColumnElement[bool] | None = None) -> Iterator[StoreValue]:
    """Live values under the scope and namespace prefix (and ``where``, a
    :func:`filter_clause`), newest write first, in pages."""
    stmt = (sa.select(StoreValue)
            .where(within(scope), under(namespace=namespace_prefix), live(now=now),
                   *([where] if where is not None else []))
            .order_by(col(StoreValue.updated_at).desc(), col(StoreValue.id)))
    offset = 0
    while True:
        page = list(session.execute(stmt.offset(offset).limit(PAGE)).scalars())
        yield from page
        if len(page) < PAGE:
            return
        offset += PAGE


def namespaces(session: Session, *, scope: Scope, namespace_prefix: str,
               now: datetime) -> list[str]:
    """The distinct namespaces holding live values under the scope."""
    stmt = (sa.select(col(StoreValue.namespace)).distinct()
            .where(within(scope), under(namespace=namespace_prefix), live(now=now)))
    return sorted(session.execute(stmt).scalars())


def sweep(conn: Executor, *, now: datetime) -> int:
    """Delete expired values; returns how many."""
    gone = conn.execute(sa.delete(StoreValue).where(col(StoreValue.expires_at) <= now))
    return int(getattr(gone, "rowcount", 0) or 0)


# -- what a read keeps ---------------------------------------------------------------------


def check_filter(spec: Mapping[str, Any] | None, *, field: str = "filter") -> None:
    """Refuse an operator this store does not know, before any row is read."""
    for name, wanted in (spec or {}).items():
        if isinstance(wanted, Mapping):
            ops = [k for k in wanted if isinstance(k, str) and k.startswith("$")]
            unknown = [k for k in ops if k not in OPERATORS]
            if unknown:
                raise ValidationError(f"{field}.{name}", f"unknown operator {unknown[0]!r}; "
                                      f"use one of {', '.join(OPERATORS)}")
            if not ops:
                check_filter(wanted, field=f"{field}.{name}")


def matches(value: Any, spec: Mapping[str, Any]) -> bool:
    """LangGraph's filter semantics: each field equals (nested dicts field by field, lists
    element by element), or satisfies each of its ``$`` operators."""
    if not isinstance(value, Mapping):
        return False
    return all(_equal(value.get(name), wanted) for name, wanted in spec.items())


def _equal(have: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in wanted):
            return all(_apply(have, op, operand) for op, operand in wanted.items())
        return matches(have, wanted)
    if isinstance(wanted, list | tuple):
        return (isinstance(have, list | tuple) and len(have) == len(wanted)
                and all(_equal(h, w) for h, w in zip(have, wanted, strict=True)))
    return bool(have == wanted)


def _apply(have: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(have == operand)
    if op == "$ne":
        return bool(have != operand)
    # Ordering compares numbers with numbers and strings with strings; anything else
    # (a missing field included) does not match rather than failing the whole search.
    both_numbers = all(isinstance(v, int | float) and not isinstance(v, bool)
                       for v in (have, operand))
    if not (both_numbers or (isinstance(have, str) and isinstance(operand, str))):
        return False
    if op == "$gt":
        return bool(have > operand)
    if op == "$gte":
        return bool(have >= operand)
    if op == "$lt":
        return bool(have < operand)
    return bool(have <= operand)


# -- the filter in SQL ---------------------------------------------------------------------
# What SQL judges is a conjunction of some of the filter's conditions, each no stricter than
# matches(): equality with a string; equality with a number other than 0 or 1 (Python holds
# True == 1 and False == 0); $gt $gte $lt $lte with a number. A condition on a bool, None,
# a list, an empty object or with $ne, or a string ordering (collations differ), is left to
# Python alone. Numeric bounds are widened by SLACK (relative, at least absolute): SQL reads
# a JSON number as a double (SQLite) or an exact decimal (PostgreSQL) where Python reads an
# int exactly and a float rounded, so a bound exactly at the value could otherwise drop it.

Comparison = Literal["text", "$eq", "$gt", "$gte", "$lt", "$lte"]
Condition = tuple[tuple[str, ...], Comparison, str | int | float]
SLACK = 1e-9
_ORDERINGS: tuple[Comparison, ...] = ("$gt", "$gte", "$lt", "$lte")


def _plain_number(operand: Any) -> bool:
    if isinstance(operand, bool) or not isinstance(operand, int | float):
        return False
    try:
        return math.isfinite(float(operand))
    except OverflowError:
        return False


def _condition(path: tuple[str, ...], op: str, operand: Any) -> Condition | None:
    if op == "$eq" and isinstance(operand, str):
        return None if "\x00" in operand else (path, "text", operand)
    if not _plain_number(operand):
        return None
    if op == "$eq":
        return None if operand in (0, 1) else (path, "$eq", operand)
    for ordering in _ORDERINGS:
        if op == ordering:
            return (path, ordering, operand)
    return None


def _addressable(name: object, *, dialect: str) -> bool:
    if not isinstance(name, str) or not name or "\x00" in name:
        return False
    if dialect != "sqlite":
        return True
    # SQLite's JSON path compares a "quoted" label with the key as written, escapes and
    # all, and cannot hold a '"': only keys JSON writes without escapes can be named (the
    # stored JSON is ASCII, "ü" written as "\u00fc").
    return all(" " <= c <= "~" and c not in '"\\' for c in name)


def pushable(*, spec: Mapping[str, Any] | None, dialect: str,
             path: tuple[str, ...] = ()) -> list[Condition]:
    """The conditions of ``spec`` SQL (``dialect``) can judge as :func:`matches` does, as
    (field path, comparison, operand); ``text`` is equality with a string."""
    found: list[Condition] = []
    for name, wanted in (spec or {}).items():
        if not _addressable(name, dialect=dialect):
            continue
        at = (*path, name)
        if isinstance(wanted, Mapping):
            if any(isinstance(k, str) and k.startswith("$") for k in wanted):
                conds = [_condition(at, op, operand) for op, operand in wanted.items()]
                found += [c for c in conds if c is not None]
            else:
                found += pushable(spec=wanted, dialect=dialect, path=at)
            continue
        cond = _condition(at, "$eq", wanted)
        if cond is not None:
            found.append(cond)
    return found


def _bounds(operand: int | float) -> tuple[Decimal, Decimal]:
    exact = Decimal(operand)
    slack = Decimal(SLACK) * max(Decimal(1), abs(exact))
    return exact - slack, exact + slack


def _compare(number: ColumnElement[Any], op: Comparison,
             operand: int | float, *, as_float: bool) -> ColumnElement[bool]:
    low, high = _bounds(operand)
    lo = sa.literal(float(low), sa.Float()) if as_float else sa.literal(low, sa.Numeric())
    hi = sa.literal(float(high), sa.Float()) if as_float else sa.literal(high, sa.Numeric())
    if op == "$eq":
        return sa.and_(number >= lo, number <= hi)
    if op in ("$gt", "$gte"):
        return number >= lo
    return number <= hi


def _sqlite(cond: Condition) -> ColumnElement[bool]:
    path, op, operand = cond
    at = "$" + "".join(f'."{name}"' for name in path)
    value = col(StoreValue.value)
    kind = sa.func.json_type(value, at)
    got = sa.func.json_extract(value, at)
    if op == "text":
        return sa.and_(kind == "text", got == operand)
    assert not isinstance(operand, str)
    return sa.and_(kind.in_(("integer", "real")),
                   _compare(got, op, operand, as_float=True))


def _postgresql(cond: Condition) -> ColumnElement[bool]:
    path, op, operand = cond
    value = col(StoreValue.value)
    kind = sa.func.json_typeof(sa.func.json_extract_path(value, *path))
    text = sa.func.json_extract_path_text(value, *path)
    if op == "text":
        return sa.and_(kind == "string", text == operand)
    assert not isinstance(operand, str)
    # numeric, not double precision: a JSON integer of any length casts without overflow.
    number = sa.case((kind == "number", sa.cast(text, sa.Numeric())), else_=None)
    return _compare(number, op, operand, as_float=False)


def filter_clause(*, spec: Mapping[str, Any] | None,
                  dialect: str) -> ColumnElement[bool] | None:
    """The pushable part of ``spec`` (:func:`pushable`) as a WHERE condition for
    ``dialect`` ("sqlite" or "postgresql"), or None when there is nothing to push. It keeps
    every row :func:`matches` keeps; :func:`matches` still decides."""
    conds = pushable(spec=spec, dialect=dialect)
    if not conds:
        return None
    value = col(StoreValue.value)
    if dialect == "sqlite":
        # A value SQLite cannot parse as JSON (Python writes NaN as NaN) is left to Python.
        return sa.case((sa.func.json_valid(value) == 1, sa.and_(*map(_sqlite, conds))),
                       else_=sa.true())
    if dialect == "postgresql":
        # PostgreSQL refuses to read any field of a json value holding \u0000: Python's.
        nul = sa.func.strpos(sa.cast(value, sa.Text()), "\\u0000") > 0
        return sa.case((nul, sa.true()), else_=sa.and_(*map(_postgresql, conds)))
    return None


# -- what a query matches ------------------------------------------------------------------


def words(value: Any) -> set[str]:
    """The lexical tokens of every string in a JSON value (keys left out)."""
    if isinstance(value, str):
        return set(tokens(value))
    if isinstance(value, Mapping):
        return set().union(*(words(v) for v in value.values())) if value else set()
    if isinstance(value, list | tuple):
        return set().union(*(words(v) for v in value)) if value else set()
    return set()


def indexed_words(value: Any, *, fields: list[str] | None) -> set[str]:
    """The tokens a query is matched against: those of every string in the value (fields
    None, the default), of none (``[]``: put with ``index=False``), or of the text LangGraph
    reads at each field path (``get_text_at_path``: a string as is, a number or bool as
    written, an object or list as its JSON); ``"$"`` is the whole value, as by default."""
    if fields is None:
        return words(value)
    if not fields:
        return set()
    from langgraph.store.base.embed import get_text_at_path

    found: set[str] = set()
    for path in fields:
        if path == "$":
            found |= words(value)
            continue
        for text in get_text_at_path(value, path):
            found.update(tokens(text))
    return found


def query_score(value: Any, query: str, *, fields: list[str] | None = None) -> float:
    """The share of the query's tokens (stemmed, stop words out, CJK as n-grams) that the
    value holds (in ``fields``, see :func:`indexed_words`); 0 when it shares none."""
    wanted = set(tokens(query))
    if not wanted:
        return 0.0
    return len(wanted & indexed_words(value, fields=fields)) / len(wanted)
