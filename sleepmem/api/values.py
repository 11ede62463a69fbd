"""Stored values over HTTP: values kept exactly as given (less secrets), read back at once.

| route | body / query | answer |
|---|---|---|
| ``PUT /v1/store/items`` | :class:`ValuePut` | :class:`StoredValue` |
| ``GET /v1/store/items`` | scope, namespace (repeated), key | :class:`StoredValue`; 404 |
| ``DELETE /v1/store/items`` | the same | :class:`ValuesDeleted` |
| ``POST /v1/store/search`` | :class:`ValueSearch` | :class:`StoredValues` |
| ``GET /v1/store/namespaces`` | scope, prefix, suffix, max_depth | :class:`ValueNamespaces` |

A namespace is a path of labels, given in order as repeated query parameters (or a JSON
list in a body). Item routes name one exact scope; search and namespaces read the scope and
every scope under it. The use-cases are in :mod:`sleepmem.values`.
"""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool

from sleepmem.api.auth import CallerTenant
from sleepmem.api.errors import ERROR_RESPONSES, error_response
from sleepmem.api.memories import owned_scope
from sleepmem.core.errors import ForbiddenError, NotFoundError
from sleepmem.models import Scope
from sleepmem.models.values import (
    StoredValue,
    StoredValues,
    ValueNamespaces,
    ValuePut,
    ValuesDeleted,
    ValueSearch,
)
from sleepmem.values import MAX_NAMESPACES, Values

router = APIRouter(prefix="/v1/store", tags=["stored values"],
                   responses={**ERROR_RESPONSES,
                              404: error_response("No live value under that key")})

NO_VALUE = "no value under this scope, namespace and key (never written, deleted or expired)"
_SCOPE = "scope key 't=…/a=…/u=…/p=…/s=…' (levels may be left out)"
_NAMESPACE = "the namespace's labels in order, one parameter each"


def _values(request: Request) -> Values:
    values: Values | None = getattr(request.app.state, "values", None)
    if values is None:
        values = request.app.state.values = Values(request.app.state.resources)
    return values


def _own(tenant: str | None, scope: Scope) -> Scope:
    if tenant is not None and scope.tenant != tenant:
        raise ForbiddenError(f"scope.tenant: this API key may only use tenant {tenant!r}")
    return scope


@router.put("/items", response_model=StoredValue,
            summary="Store a value under a scope, namespace and key (replacing it)",
            description=(
                "The value is kept as given, readable at once: no consolidation stands "
                "between a put and a get. Secrets in it are redacted before it is stored; a "
                "key or namespace label holding one is refused. With ttl_s the value "
                "expires that long after its last write (or read, when reads refresh it). "
                "index: what a search query matches, as LangGraph's put takes it: null for "
                "the whole value, false for nothing (get and filters still find it), or a "
                "list of field paths (\"title\", \"a.b\", \"items[*].text\")."))
async def put_value(body: ValuePut, request: Request, tenant: CallerTenant) -> StoredValue:
    scope = _own(tenant, body.scope)
    values = _values(request)
    return await run_in_threadpool(
        lambda: values.put_value(body.namespace, body.key, body.value, scope=scope,
                                 ttl_s=body.ttl_s, index=body.index))


@router.get("/items", response_model=StoredValue, summary="The value under a key")
async def get_value(
    request: Request, tenant: CallerTenant,
    scope: str = Query(description=_SCOPE),
    namespace: list[str] = Query(description=_NAMESPACE),
    key: str = Query(min_length=1),
    refresh_ttl: bool = Query(default=True, description="renew the value's TTL"),
) -> StoredValue:
    where = owned_scope(scope, tenant, "read")
    values = _values(request)
    found = await run_in_threadpool(
        lambda: values.get_value(namespace, key, scope=where, refresh_ttl=refresh_ttl))
    if found is None:
        raise NotFoundError(NO_VALUE)
    return found


@router.delete("/items", response_model=ValuesDeleted,
               summary="Delete the value under a key (0 when there was none)")
async def delete_value(
    request: Request, tenant: CallerTenant,
    scope: str = Query(description=_SCOPE),
    namespace: list[str] = Query(description=_NAMESPACE),
    key: str = Query(min_length=1),
) -> ValuesDeleted:
    where = owned_scope(scope, tenant, "delete from")
    values = _values(request)
    gone = await run_in_threadpool(lambda: values.delete_value(namespace, key, scope=where))
    return ValuesDeleted(deleted=int(gone))


@router.post("/search", response_model=StoredValues,
             summary="Values under a namespace prefix, filtered, optionally ranked by a query",
             description=(
                 "Reads the scope and every scope under it. filter: exact matches on the "
                 "value's fields (nested objects field by field) or the operators $eq $ne "
                 "$gt $gte $lt $lte. query: keeps the values that share words with it, best "
                 "match first (score); without one, the newest write comes first."))
async def search_values(body: ValueSearch, request: Request,
                        tenant: CallerTenant) -> StoredValues:
    scope = _own(tenant, body.scope)
    values = _values(request)
    found = await run_in_threadpool(
        lambda: values.search_values(
            body.namespace_prefix, scope=scope, filter=body.filter, query=body.query,
            limit=body.limit, offset=body.offset, refresh_ttl=body.refresh_ttl))
    return StoredValues(items=found)


@router.get("/namespaces", response_model=ValueNamespaces,
            summary="The namespaces holding values: matched, cut to a depth, sorted, paged",
            description="prefix and suffix are label paths; '*' matches any one label.")
async def value_namespaces(
    request: Request, tenant: CallerTenant,
    scope: str = Query(description=_SCOPE),
    prefix: list[str] = Query(default=[], description="labels the namespace starts with"),
    suffix: list[str] = Query(default=[], description="labels the namespace ends with"),
    max_depth: int | None = Query(default=None, ge=1),
    limit: int = Query(default=100, ge=1, le=MAX_NAMESPACES),
    offset: int = Query(default=0, ge=0),
) -> ValueNamespaces:
    where = owned_scope(scope, tenant, "read")
    values = _values(request)
    found = await run_in_threadpool(
        lambda: values.value_namespaces(scope=where, prefix=prefix or None,
                                        suffix=suffix or None, max_depth=max_depth,
                                        limit=limit, offset=offset))
    return ValueNamespaces(namespaces=[list(ns) for ns in found])
