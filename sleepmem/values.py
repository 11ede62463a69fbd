"""Stored values, the use-case: what the HTTP routes and an in-process LangGraph store call.

A value is kept as given, less its secrets: every string in it passes the same redaction as
an event's content before the row is written, so a secret never reaches the database. A
key or namespace label that holds a secret is refused (ids are stored as they are). Reads
skip expired values and, by default, renew the TTL of those they return; the checkpoint
upkeep deletes expired ones (:func:`sweep_values`).

The methods have the names and arguments of the client's (``put_value`` ...), so a caller
holds either and makes the same calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError
from sqlmodel import Session

from sleepmem.core.errors import ValidationError
from sleepmem.core.logs import get_logger
from sleepmem.core.redaction import redact_json, secret_in_ids
from sleepmem.models import Scope, StoreValue
from sleepmem.models.values import (
    WILDCARD,
    StoredValue,
    ValuePut,
    ValueSearch,
    check_label,
    index_fields,
    join,
    split,
)
from sleepmem.pipelines import values as repo
from sleepmem.pipelines.lexical import tokens
from sleepmem.resources import Resources

log = get_logger("sleepmem.values")

M = TypeVar("M", bound=BaseModel)
MAX_NAMESPACES = 1000


def _parse(model: type[M], data: Mapping[str, Any]) -> M:
    try:
        return model.model_validate(data)
    except PydanticValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "request"
        raise ValidationError(field, str(err["msg"]).removeprefix("Value error, ")) from None


def _scope(scope: Scope | Mapping[str, Any]) -> Scope:
    if isinstance(scope, Scope):
        return scope
    try:
        return Scope.parse_levels(**{k: v for k, v in scope.items() if v is not None})
    except TypeError:
        raise ValidationError("scope", "name the levels tenant, agent, user, project, "
                              "session") from None


def _labels(labels: Sequence[str], *, field: str) -> list[str]:
    out = []
    for i, label in enumerate(labels):
        try:
            out.append(check_label(label, field=f"{field}[{i}]"))
        except ValueError as exc:
            raise ValidationError(f"{field}[{i}]", str(exc).split(": ", 1)[-1]) from None
    return out


def _no_secret_ids(namespace: Sequence[str], key: str) -> None:
    found = secret_in_ids((*namespace, key))
    if found is not None:
        index, kind = found
        field = "key" if index == len(namespace) else f"namespace[{index}]"
        raise ValidationError(field, f"holds what looks like a secret ({kind}); keys and "
                              "namespaces are stored as they are, so choose one that is not "
                              "a credential")


def view(row: StoreValue, score: float | None = None) -> StoredValue:
    return StoredValue(
        scope=Scope(tenant=row.tenant, agent=row.agent, user=row.user, project=row.project,
                    session=row.session),
        namespace=list(split(row.namespace)), key=row.key, value=row.value,
        created_at=row.created_at, updated_at=row.updated_at, expires_at=row.expires_at,
        score=score)


def _matches(condition: Sequence[str], namespace: tuple[str, ...], *, suffix: bool) -> bool:
    if len(namespace) < len(condition):
        return False
    ends = namespace[len(namespace) - len(condition):] if suffix else namespace[:len(condition)]
    return all(c in (WILDCARD, n) for c, n in zip(condition, ends, strict=True))


def select_namespaces(
    found: Sequence[tuple[str, ...]], *, prefix: Sequence[str] | None,
    suffix: Sequence[str] | None, max_depth: int | None, limit: int, offset: int,
) -> list[tuple[str, ...]]:
    """``BaseStore.list_namespaces``: matched by prefix and suffix (``*`` is any one label),
    cut to ``max_depth``, deduplicated, sorted, then paged."""
    kept = {ns[:max_depth] if max_depth is not None else ns for ns in found
            if (not prefix or _matches(prefix, ns, suffix=False))
            and (not suffix or _matches(suffix, ns, suffix=True))}
    return sorted(kept)[offset:offset + limit]


class Values:
    """Value reads and writes for one process; build once, share across threads."""

    def __init__(self, resources: Resources) -> None:
        self.res = resources

    def _now(self) -> datetime:
        clock = self.res.clock
        return clock() if clock is not None else datetime.now(UTC)

    def put_value(self, namespace: Sequence[str], key: str, value: Mapping[str, Any], *,
                  scope: Scope | Mapping[str, Any], ttl_s: float | None = None,
                  index: Literal[False] | list[str] | None = None) -> StoredValue:
        """Write ``value`` under (scope, namespace, key), replacing what was there.
        ``index``: what a query matches, as LangGraph's put takes it (None: the whole value;
        False: nothing, though get and filters still find it; a list: those field paths)."""
        if not isinstance(value, Mapping):
            raise ValidationError("value", "a value is a JSON object (a dict)")
        request = _parse(ValuePut, {"scope": _scope(scope), "namespace": list(namespace),
                                    "key": key, "value": dict(value), "ttl_s": ttl_s,
                                    "index": index})
        _no_secret_ids(request.namespace, request.key)
        clean = redact_json(request.value)
        now = self._now()
        with Session(self.res.engine, expire_on_commit=False) as session:
            row = repo.upsert(session, scope=request.scope, namespace=join(request.namespace),
                              key=request.key, value=clean, ttl_s=request.ttl_s, now=now,
                              index_fields=index_fields(request.index))
            session.commit()
            stored = view(row)
        log.debug("value_put", tenant=request.scope.tenant, redacted=clean is not request.value)
        return stored

    def get_value(self, namespace: Sequence[str], key: str, *,
                  scope: Scope | Mapping[str, Any], refresh_ttl: bool = True
                  ) -> StoredValue | None:
        """The live value under (scope, namespace, key), or None."""
        where = _scope(scope)
        path = join(_labels(namespace, field="namespace"))
        now = self._now()
        with Session(self.res.engine, expire_on_commit=False) as session:
            row = repo.fetch(session, scope=where, namespace=path, key=key, now=now)
            if row is None:
                return None
            if refresh_ttl and row.ttl_s is not None:
                repo.refresh(session, rows=[row], now=now)
                session.commit()
            return view(row)

    def delete_value(self, namespace: Sequence[str], key: str, *,
                     scope: Scope | Mapping[str, Any]) -> bool:
        """Delete the value; False when there was none."""
        where = _scope(scope)
        path = join(_labels(namespace, field="namespace"))
        with Session(self.res.engine) as session:
            gone = repo.delete(session, scope=where, namespace=path, key=key)
            session.commit()
        return gone > 0

    def search_values(
        self, namespace_prefix: Sequence[str] = (), *, scope: Scope | Mapping[str, Any],
        filter: Mapping[str, Any] | None = None, query: str | None = None, limit: int = 10,
        offset: int = 0, refresh_ttl: bool = True,
    ) -> list[StoredValue]:
        """Live values at the scope or under it, in the namespace prefix, that pass
        ``filter``; with ``query``, only those sharing its words, best match first;
        otherwise the newest write first."""
        request = _parse(ValueSearch, {
            "scope": _scope(scope), "namespace_prefix": list(namespace_prefix),
            "filter": dict(filter) if filter is not None else None, "query": query,
            "limit": limit, "offset": offset, "refresh_ttl": refresh_ttl})
        repo.check_filter(request.filter)
        wanted = bool(request.query and tokens(request.query))
        now = self._now()
        # SQL narrows the read to rows that may pass the filter; matches() decides.
        narrowed = repo.filter_clause(spec=request.filter, dialect=self.res.engine.dialect.name)
        with Session(self.res.engine, expire_on_commit=False) as session:
            found: list[tuple[float | None, StoreValue]] = []
            for row in repo.scan(session, scope=request.scope,
                                 namespace_prefix=join(request.namespace_prefix), now=now,
                                 where=narrowed):
                if request.filter and not repo.matches(row.value, request.filter):
                    continue
                score = (repo.query_score(row.value, request.query or "",
                                          fields=row.index_fields) if wanted else None)
                if score == 0.0:
                    continue
                found.append((score, row))
                if not wanted and len(found) >= request.offset + request.limit:
                    break
            if wanted:
                # Stable: equal scores keep the newest write first.
                found.sort(key=lambda pair: -(pair[0] or 0.0))
            page = found[request.offset:request.offset + request.limit]
            if request.refresh_ttl and any(row.ttl_s is not None for _s, row in page):
                repo.refresh(session, rows=[row for _s, row in page], now=now)
                session.commit()
            return [view(row, score) for score, row in page]

    def value_namespaces(
        self, *, scope: Scope | Mapping[str, Any], prefix: Sequence[str] | None = None,
        suffix: Sequence[str] | None = None, max_depth: int | None = None, limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        """The namespaces holding live values at the scope or under it, as
        ``BaseStore.list_namespaces`` lists them."""
        where = _scope(scope)
        if not 1 <= limit <= MAX_NAMESPACES:
            raise ValidationError("limit", f"must be between 1 and {MAX_NAMESPACES}")
        if offset < 0:
            raise ValidationError("offset", "must be 0 or more")
        if max_depth is not None and max_depth < 1:
            raise ValidationError("max_depth", "must be 1 or more")
        for name, condition in (("prefix", prefix), ("suffix", suffix)):
            _labels(condition or (), field=name)
        # A prefix without wildcards narrows the read in SQL; the rest is judged here.
        literal: list[str] = []
        for label in prefix or ():
            if label == WILDCARD:
                break
            literal.append(label)
        with Session(self.res.engine) as session:
            found = [split(p) for p in repo.namespaces(session, scope=where,
                                                       namespace_prefix=join(literal),
                                                       now=self._now())]
        return select_namespaces(found, prefix=prefix, suffix=suffix, max_depth=max_depth,
                                 limit=limit, offset=offset)


def sweep_values(res: Resources, *, now: datetime | None = None) -> int:
    """Delete expired values (the checkpoint upkeep runs it); how many went."""
    at = now or (res.clock() if res.clock is not None else datetime.now(UTC))
    with res.engine.begin() as conn:
        gone = repo.sweep(conn, now=at)
    if gone:
        log.info("values_expired", deleted=gone)
    return gone


__all__ = ["Values", "select_namespaces", "sweep_values", "view"]
