"""A LangGraph ``BaseStore`` backed by sleepmem: LangGraph agents keep long-term memory here.

Namespaces map to scopes below the client's tenant: ``(agent,)``, ``(agent, user)``,
``(agent, user, project)`` or ``(agent, user, project, session)``. Every call goes through
:class:`sleepmem.Client` (HTTP, the caller's key), so auth and tenancy hold.

sleepmem is a consolidating memory, not a key-value table, and the store says so:

- ``put(ns, key, value)`` appends an event (the value's ``content``/``text``/``memory``
  field, else its JSON); the memory it becomes exists once the scope is consolidated
  (when it goes quiet, or at once with :meth:`SleepmemStore.consolidate`).
- ``get(ns, key)`` returns the current memory made from that key's events (the newest),
  as ``{"content": statement, "type": …, "memory_id": …}``; ``None`` before consolidation.
- ``search(ns, query=…)`` is sleepmem's ranked search; without a query, the scope's list.
- ``delete(ns, key)`` (or ``put(…, None)``) erases those memories from every store.
- ``list_namespaces(prefix=…, suffix=…, max_depth=…)`` lists the namespaces that hold
  memories of the tenant, matched, cut and paged as ``BaseStore`` documents.

Install with the extra: ``pip install 'sleepmem[langgraph]'``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from sleepmem.client import Client
from sleepmem.core.errors import ValidationError
from sleepmem.models import Scope
from sleepmem.models.views import MemoryView

NAMESPACE_LEVELS = ("agent", "user", "project", "session")
_TEXT_FIELDS = ("content", "text", "memory")
PAGE = 500


def key_prefix(namespace: tuple[str, ...], key: str) -> str:
    """Event ids of one (namespace, key) share this prefix: memories keep their event ids
    as provenance, which is how ``get`` finds what a key became."""
    digest = hashlib.blake2b("\x1f".join((*namespace, key)).encode(), digest_size=10)
    return f"lg-{digest.hexdigest()}-"


def scope_for(namespace: tuple[str, ...]) -> dict[str, str]:
    if not 1 <= len(namespace) <= len(NAMESPACE_LEVELS):
        raise InvalidNamespaceError(
            f"namespace {namespace!r}: use (agent,), (agent, user), (agent, user, project) or "
            "(agent, user, project, session)"
        )
    return dict(zip(NAMESPACE_LEVELS, namespace, strict=False))


def _text(value: Mapping[str, Any]) -> str:
    for name in _TEXT_FIELDS:
        if isinstance(value.get(name), str) and value[name].strip():
            return str(value[name])
    return json.dumps(dict(value), ensure_ascii=False, sort_keys=True)


def _namespace_of(m: MemoryView) -> tuple[str, ...]:
    """The namespace a memory's scope is: its levels below the tenant, up to the last set."""
    levels = [getattr(m, level) for level in NAMESPACE_LEVELS]
    while levels and not levels[-1]:
        levels.pop()
    return tuple(levels)


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """``BaseStore``'s prefix/suffix match; ``"*"`` stands for any one level."""
    path = condition.path
    if len(namespace) < len(path):
        return False
    ends = namespace[:len(path)] if condition.match_type == "prefix" else \
        namespace[len(namespace) - len(path):]
    return all(p in ("*", n) for p, n in zip(path, ends, strict=True))


def _value(m: MemoryView) -> dict[str, Any]:
    return {"content": m.statement, "type": m.type, "memory_id": m.id, "trust": m.trust}


class SleepmemStore(BaseStore):
    """``SleepmemStore(Client(...))``; the client's tenant owns every namespace."""

    def __init__(self, client: Client | None = None) -> None:
        self.client = client or Client()

    # -- the two methods BaseStore asks for -----------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._one(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # The HTTP client is blocking; a thread keeps the event loop free.
        return await asyncio.to_thread(self.batch, list(ops))

    # -- extras -----------------------------------------------------------------------------
    def consolidate(self, namespace: tuple[str, ...]) -> None:
        """Consolidate the namespace's scope now, instead of when it goes quiet."""
        levels = {"tenant": self._tenant(), **scope_for(namespace)}
        self.client.consolidate(Scope(**levels).key)

    # -- ops ------------------------------------------------------------------------------
    def _one(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op.namespace, op.key)
        if isinstance(op, PutOp):
            if op.value is None:
                self._delete(op.namespace, op.key)
            else:
                self._put(op.namespace, op.key, op.value)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._namespaces(op)
        raise ValidationError("op", f"unknown store operation {type(op).__name__}")

    def _tenant(self) -> str:
        tenant = self.client.target.defaults.get("tenant")
        if not tenant:
            raise ValidationError("tenant", "give the client a tenant (Client(tenant=...))")
        return tenant

    def _put(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any]) -> None:
        event = {**scope_for(namespace), "role": "user", "content": _text(value),
                 "event_id": key_prefix(namespace, key) + uuid.uuid4().hex[:16],
                 "meta": {"langgraph_key": key[:200]}}
        self.client.emit(event)

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        """The namespaces that hold memories of the tenant, as ``BaseStore`` lists them:
        matched by every condition, cut to ``max_depth``, sorted, then paged."""
        found: set[tuple[str, ...]] = set()
        for m in self._memories(None):
            namespace = _namespace_of(m)
            if namespace and all(_matches(c, namespace) for c in op.match_conditions or ()):
                found.add(namespace[:op.max_depth] if op.max_depth is not None else namespace)
        return sorted(found)[op.offset:op.offset + op.limit]

    def _memories(self, namespace: tuple[str, ...] | None) -> list[MemoryView]:
        """A namespace's memories (and those under it); with None, the whole tenant's."""
        where = scope_for(namespace) if namespace is not None else None
        out: list[MemoryView] = []
        cursor: str | None = None
        while True:
            page = self.client.list(where, limit=PAGE, cursor=cursor)
            out += page.items
            if page.next_cursor is None:
                return out
            cursor = page.next_cursor

    def _of_key(self, namespace: tuple[str, ...], key: str) -> list[MemoryView]:
        prefix = key_prefix(namespace, key)
        return [m for m in self._memories(namespace)
                if any(p.startswith(prefix) for p in m.provenance)]

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        found = self._of_key(namespace, key)
        if not found:
            return None
        newest = max(found, key=lambda m: (m.recorded_at, m.id))
        return Item(value=_value(newest), key=key, namespace=namespace,
                    created_at=min(m.recorded_at for m in found), updated_at=newest.recorded_at)

    def _delete(self, namespace: tuple[str, ...], key: str) -> None:
        for m in self._of_key(namespace, key):
            self.client.forget(m.id)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        ns = op.namespace_prefix
        wanted = op.limit + op.offset
        views: list[tuple[MemoryView, float | None]]
        if op.query:
            cards = self.client.search(op.query, scope_for(ns), k=max(1, min(wanted, 100)),
                                       tail=False).flat()
            views = [(self.client.get(c.id), c.score) for c in cards]
        else:
            views = [(m, None) for m in self._memories(ns)[:wanted]]
        items = [
            # Search results are memories, keyed by memory id: one key's events may have
            # become several memories, and several keys' events one.
            SearchItem(namespace=ns, key=m.id, value=_value(m), created_at=m.recorded_at,
                       updated_at=m.recorded_at, score=score)
            for m, score in views
            if all(_value(m).get(k) == v for k, v in (op.filter or {}).items())
        ]
        return items[op.offset:op.offset + op.limit]
