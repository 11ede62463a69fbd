"""The ``store_value`` table: keyword-only functions over a Session or Connection, like
:mod:`sleepmem.pipelines.store`, and the two rules a read applies to a value (a filter, a
query). Expired rows are never read; :func:`sweep` deletes them."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

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
           value: dict[str, Any], ttl_s: float | None, now: datetime) -> StoreValue:
    """Write the value; a value already under the key keeps its creation time."""
    scope_key = scope.key
    vid = value_id(scope_key=scope_key, namespace=namespace, key=key)
    row = session.get(StoreValue, vid)
    if row is None:
        row = StoreValue(id=vid, tenant=scope.tenant, agent=scope.agent, user=scope.user,
                         project=scope.project, session=scope.session, scope_key=scope_key,
                         namespace=namespace, key=key, created_at=now)
    row.value = value
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


def scan(session: Session, *, scope: Scope, namespace_prefix: str,
         now: datetime) -> Iterator[StoreValue]:
    """Live values under the scope and namespace prefix, newest write first, in pages."""
    stmt = (sa.select(StoreValue)
            .where(within(scope), under(namespace=namespace_prefix), live(now=now))
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


def words(value: Any) -> set[str]:
    """The lexical tokens of every string in a JSON value (keys left out)."""
    if isinstance(value, str):
        return set(tokens(value))
    if isinstance(value, Mapping):
        return set().union(*(words(v) for v in value.values())) if value else set()
    if isinstance(value, list | tuple):
        return set().union(*(words(v) for v in value)) if value else set()
    return set()


def query_score(value: Any, query: str) -> float:
    """The share of the query's tokens (stemmed, stop words out, CJK as n-grams) that the
    value holds; 0 when it shares none."""
    wanted = set(tokens(query))
    if not wanted:
        return 0.0
    return len(wanted & words(value)) / len(wanted)
