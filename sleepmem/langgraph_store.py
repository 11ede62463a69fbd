"""A LangGraph ``BaseStore`` backed by sleepmem: LangGraph agents keep long-term memory here.

``SleepmemStore(Client(...))`` reaches a server anywhere over HTTP with the caller's key, so
auth and tenancy hold; ``SleepmemStore(resources, tenant=...)`` runs in the server's own
process. Either way the store keeps the ``BaseStore`` contract:

- ``put(ns, key, value)`` stores the value in sleepmem's value table (secrets redacted
  first, as for every write); ``get(ns, key)`` returns it at once, as given. No
  consolidation stands between the two.
- ``delete(ns, key)`` (or ``put(…, None)``) deletes it; ``put(…, ttl=minutes)`` makes it
  expire that long after its last write or read (reads refresh it unless told not to).
- ``put(…, index=…)`` says what a search query matches in the value: ``None`` (the
  default) every string in it; ``False`` nothing, so no query finds the item, though
  ``get`` and a search without a query (filters included) still do; a list of field paths
  in LangGraph's syntax (``["title"]``, ``["a.b", "items[*].text", "tags[0]"]``, ``"$"``
  for the whole value) only the text at those paths, as LangGraph's ``get_text_at_path``
  reads it. Matching is lexical (shared words), not embeddings. A bad ``index`` is refused
  with a ValidationError naming the field.
- ``search(prefix, filter=…, query=…)`` returns the stored values first (filtered; with a
  query, those sharing its words, best first), then, for a query, the consolidated
  memories of the namespace's scope as extras (keyed by memory id, ``value`` =
  ``{"content", "type", "memory_id", "trust"}``). Memories never replace a value. SQL
  narrows the filtered read (string equality, numeric comparisons), and LangGraph's filter
  semantics decide each row in Python.
- ``list_namespaces(prefix=…, suffix=…, max_depth=…)`` lists the namespaces holding values.

A namespace's first labels name the scope below the tenant: ``(agent, user, project,
session)``, as many as it has, up to four; deeper labels only organise values. So erasing a
user's scope erases the values stored under their namespaces too.

Install with the extra: ``pip install 'sleepmem[langgraph]'``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from pydantic import ValidationError as PydanticValidationError

from sleepmem.client import Client
from sleepmem.core.errors import ValidationError
from sleepmem.models import Scope
from sleepmem.models.cards import MemoryCard
from sleepmem.models.values import SEPARATOR, StoredValue
from sleepmem.pipelines.values import matches
from sleepmem.reader import Reader, build_request
from sleepmem.resources import Resources
from sleepmem.values import Values

NAMESPACE_LEVELS = ("agent", "user", "project", "session")
MAX_MEMORIES = 100  # the search API's own bound on k


def scope_levels(namespace: Sequence[str]) -> dict[str, str]:
    """The scope levels a namespace names: its first labels, up to four."""
    for label in namespace:
        if not isinstance(label, str) or not label or SEPARATOR in label or "\x00" in label:
            raise InvalidNamespaceError(
                f"namespace {tuple(namespace)!r}: labels are non-empty strings without '.'")
    return dict(zip(NAMESPACE_LEVELS, namespace, strict=False))


def _memory_value(card: MemoryCard) -> dict[str, Any]:
    return {"content": card.statement, "type": card.type, "memory_id": card.id,
            "trust": card.trust}


def _item(stored: StoredValue) -> Item:
    return Item(value=stored.value, key=stored.key, namespace=tuple(stored.namespace),
                created_at=stored.created_at, updated_at=stored.updated_at)


class SleepmemStore(BaseStore):
    """``SleepmemStore(Client(...))`` (the client's tenant owns every namespace) or
    ``SleepmemStore(resources, tenant=...)`` in the server's process. ``memories=False``
    leaves consolidated memories out of search."""

    supports_ttl = True

    def __init__(self, client: Client | Resources | None = None, *, tenant: str | None = None,
                 ttl: TTLConfig | None = None, memories: bool = True) -> None:
        source = client if client is not None else Client()
        self.client: Client | None = source if isinstance(source, Client) else None
        self.values: Client | Values = source if isinstance(source, Client) else Values(source)
        self._resources = source if isinstance(source, Resources) else None
        self._reader: Reader | None = None
        self.memories = memories
        self.ttl_config = ttl
        owner = tenant or (self.client.target.defaults.get("tenant") if self.client else None)
        if not owner:
            raise ValidationError("tenant", "give the store a tenant (Client(tenant=...) or "
                                            "SleepmemStore(resources, tenant=...))")
        self.tenant = owner

    # -- the two methods BaseStore asks for -----------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._one(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # Both backends block (HTTP, SQL); a thread keeps the event loop free.
        return await asyncio.to_thread(self.batch, list(ops))

    # -- extras -----------------------------------------------------------------------------
    def consolidate(self, namespace: tuple[str, ...]) -> None:
        """Consolidate the namespace's scope now (its conversation events, not its values,
        which need none), instead of when it goes quiet. Needs a client."""
        if self.client is None:
            raise ValidationError("consolidate", "the in-process store has no client; "
                                  "consolidate through sleepmem.services or a Client")
        self.client.consolidate(self._scope(namespace[:len(NAMESPACE_LEVELS)]).key)

    # -- ops ------------------------------------------------------------------------------
    def _one(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, PutOp):
            self._put(op)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._namespaces(op)
        raise ValidationError("op", f"unknown store operation {type(op).__name__}")

    def _scope(self, namespace: Sequence[str]) -> Scope:
        try:
            return Scope(tenant=self.tenant, **scope_levels(namespace))
        except PydanticValidationError as exc:
            reason = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
            raise InvalidNamespaceError(
                f"namespace {tuple(namespace)!r}: its first four labels name the agent, user, "
                f"project and session, so each must be a scope id ({reason})") from None

    def _get(self, op: GetOp) -> Item | None:
        if not op.namespace:
            raise InvalidNamespaceError("a namespace has at least one label")
        found = self.values.get_value(op.namespace, op.key, scope=self._scope(op.namespace),
                                      refresh_ttl=op.refresh_ttl)
        return _item(found) if found is not None else None

    def _put(self, op: PutOp) -> None:
        if not op.namespace:
            raise InvalidNamespaceError("a namespace has at least one label")
        scope = self._scope(op.namespace)
        if op.value is None:
            self.values.delete_value(op.namespace, op.key, scope=scope)
            return
        if not isinstance(op.value, Mapping):
            raise ValidationError("value", "a store value is a dict (a JSON object)")
        # LangGraph gives TTLs in minutes.
        ttl_s = op.ttl * 60 if op.ttl is not None else None
        self.values.put_value(op.namespace, op.key, dict(op.value), scope=scope, ttl_s=ttl_s,
                              index=op.index)

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        prefix: tuple[str, ...] | None = None
        suffix: tuple[str, ...] | None = None
        for condition in op.match_conditions or ():
            if condition.match_type == "prefix" and prefix is None:
                prefix = tuple(condition.path)
            elif condition.match_type == "suffix" and suffix is None:
                suffix = tuple(condition.path)
            else:
                raise ValidationError("match_conditions", "give at most one prefix and one "
                                                          "suffix")
        return self.values.value_namespaces(
            scope=Scope(tenant=self.tenant), prefix=prefix, suffix=suffix,
            max_depth=op.max_depth, limit=op.limit, offset=op.offset)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = op.namespace_prefix
        scope = self._scope(prefix[:len(NAMESPACE_LEVELS)])
        wanted = op.offset + op.limit
        stored = self.values.search_values(
            prefix, scope=scope, filter=op.filter, query=op.query, limit=wanted, offset=0,
            refresh_ttl=op.refresh_ttl)
        items = [SearchItem(namespace=tuple(v.namespace), key=v.key, value=v.value,
                            created_at=v.created_at, updated_at=v.updated_at, score=v.score)
                 for v in stored]
        if op.query and self.memories and len(items) < wanted:
            items += self._memory_items(op, scope, wanted - len(items))
        return items[op.offset:wanted]

    def _memory_items(self, op: SearchOp, scope: Scope, k: int) -> list[SearchItem]:
        """Consolidated memories of the scope for the query, after the values."""
        query = op.query or ""
        if self.client is not None:
            cards = self.client.search(query, scope, k=min(k, MAX_MEMORIES)).flat()
        else:
            if self._reader is None:
                assert self._resources is not None
                self._reader = Reader(self._resources)
            request = build_request(query, scope=scope, k=min(k, MAX_MEMORIES))
            cards = self._reader.search(request).flat()
        return [
            # Keyed by memory id: a memory is no key's value, and get() never returns it.
            SearchItem(namespace=op.namespace_prefix, key=c.id, value=_memory_value(c),
                       created_at=c.valid_from, updated_at=c.valid_from, score=c.score)
            for c in cards if not op.filter or matches(_memory_value(c), op.filter)
        ]
