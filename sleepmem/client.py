"""The documented client: ``sleepmem.Client`` (sync) and ``sleepmem.AsyncClient`` (async).

Both speak HTTP to a sleepmem server by URL and API key, so the server's auth and tenant
checks hold for every call. With nothing given, they find the server the way the CLI does:
``SLEEPMEM_API_URL`` / ``SLEEPMEM_API_KEY``, else the local key file that ``sleepmem serve``
writes into its data directory (``SLEEPMEM_DATA_DIR``, default ``.sleepmem``).

Trusted agents inside the cluster may append straight to Redis instead (the fast path,
:class:`sleepmem.sdk.MemoryClient`); everything else goes through here.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

import httpx
from pydantic import TypeAdapter

from sleepmem.core.errors import (
    AuthError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    SleepmemError,
    TransientError,
    ValidationError,
)
from sleepmem.core.localkey import read_local_key
from sleepmem.models import LEVELS, Scope, SearchResult
from sleepmem.models.positions import EventId, EventIds, Freshness, latest
from sleepmem.models.values import (
    StoredValue,
    StoredValues,
    ValueNamespaces,
    ValuesDeleted,
    check_index,
)
from sleepmem.models.views import ConflictResolution, JobView, MemoryPage, MemoryView
from sleepmem.models.working import (
    Checkpoint,
    CheckpointHistory,
    CheckpointState,
    ContextResult,
)
from sleepmem.pipelines.lifecycle.erase import DeletionReceipt
from sleepmem.pipelines.lifecycle.explain import Explanation

DEFAULT_URL = "http://127.0.0.1:8787"
WAIT_S = 30.0  # the default bound of a flush or a min_position wait
BATCH = 1000  # the server's default SLEEPMEM_BATCH_MAX_EVENTS


@dataclass(frozen=True, slots=True)
class Call:
    """One HTTP request and how to read its answer."""

    method: str
    path: str
    json: Any = None
    params: Any = None
    parse: Any = None  # a pydantic model / TypeAdapter, or None for raw JSON
    headers: dict[str, str] | None = None
    # Seconds to wait for the answer, when the call itself waits server-side (flush).
    timeout: float | None = None

    def options(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"timeout": self.timeout} if self.timeout is not None else {}
        return {"json": self.json, "params": self.params, "headers": self.headers, **extra}


@dataclass(slots=True)
class Target:
    url: str
    key: str | None
    defaults: dict[str, str] = field(default_factory=dict)
    admin_key: str | None = None  # for sweep / refresh, which act on every tenant


def resolve_target(
    url: str | None, api_key: str | None, *, data_dir: str | Path | None,
    scope: Mapping[str, str | None],
) -> Target:
    """Argument, then environment, then the local key file, then the default URL."""
    env = os.environ
    folder = Path(data_dir or env.get("SLEEPMEM_DATA_DIR") or ".sleepmem")
    local = read_local_key(folder)
    key = api_key or env.get("SLEEPMEM_API_KEY") or (local.key if local else None)
    base = url or env.get("SLEEPMEM_API_URL") or (local.url if local and local.url else None)
    defaults = {k: v for k, v in scope.items() if v}
    for level in LEVELS:
        if level not in defaults and env.get(f"SLEEPMEM_{level.upper()}"):
            defaults[level] = env[f"SLEEPMEM_{level.upper()}"]
    if "tenant" not in defaults and local is not None and key == local.key:
        defaults["tenant"] = local.tenant  # the local key writes this tenant only
    return Target(url=(base or DEFAULT_URL).rstrip("/"), key=key, defaults=defaults,
                  admin_key=env.get("SLEEPMEM_ADMIN_KEY"))


def _scope(target: Target, scope: Scope | Mapping[str, Any] | None) -> dict[str, Any]:
    if isinstance(scope, Scope):
        return dict(scope.levels())
    where = {k: v for k, v in target.defaults.items() if k in LEVELS}
    if scope is not None:
        where = {**where, **{k: v for k, v in scope.items() if v is not None}}
    if not where.get("tenant"):
        raise ValidationError("scope.tenant", "name a tenant: pass scope={'tenant': ...}, "
                                              "tenant= to the client, or set SLEEPMEM_TENANT")
    return where


def _scope_key(target: Target, scope: Scope | Mapping[str, Any] | str | None) -> str:
    """A scope named by key, for listing, jobs and erasure. The client's default session
    is left out: it names where new events go, while memories live at the owner's scope."""
    if isinstance(scope, str):
        return scope
    if isinstance(scope, Scope):
        return scope.key
    where = {k: v for k, v in target.defaults.items() if k in LEVELS and k != "session"}
    where.update({k: v for k, v in (scope or {}).items() if v is not None})
    if not where.get("tenant"):
        raise ValidationError("scope.tenant", "name a tenant: pass scope={'tenant': ...}, "
                                              "tenant= to the client, or set SLEEPMEM_TENANT")
    return Scope(**where).key


def _explain_call(memory_id: str, query: str | None) -> Call:
    if query is None:
        return Call("GET", f"/v1/memories/{memory_id}/explain", parse=Explanation)
    if not isinstance(query, str) or not query.strip():
        raise ValidationError("query", "query must be a non-empty string")
    return Call("GET", f"/v1/memories/{memory_id}/explain", params={"query": query},
                parse=Explanation)


def _event(target: Target, event: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(event)
    for level in LEVELS:
        if level in target.defaults and not out.get(level):
            out[level] = target.defaults[level]
    return out


def _error(response: httpx.Response) -> SleepmemError:
    try:
        err = response.json().get("error") or {}
    except ValueError:
        err = {}
    message = str(err.get("message") or response.text or f"HTTP {response.status_code}")
    status = response.status_code
    if status == 401:
        return AuthError(message)
    if status == 403:
        return ForbiddenError(message)
    if status == 404:
        return NotFoundError(message)
    if status == 409:
        current = err.get("current_version")
        return ConflictError(message, current_version=int(current) if current is not None else 0)
    if status in (400, 422):
        return ValidationError(str(err.get("field", "request")), message)
    if status in (502, 503, 504):
        return TransientError(f"server busy (HTTP {status}): {message}")
    return SleepmemError(f"HTTP {status}: {message}")


def _accepted(answers: Sequence[Mapping[str, Any]]) -> EventIds:
    """The ids of every accepted batch, and the position of the last append."""
    ids = [str(i) for a in answers for i in a["ids"]]
    return EventIds(ids, latest(*(str(a.get("position") or "") for a in answers)))


def _waited(state: Freshness) -> None:
    if not state.done:
        raise TransientError(
            f"the session is not in memory yet after {state.waited_s:g} s (reached "
            f"{state.reached} of {state.position}, {state.pending} events pending); "
            "call flush() again or pass a longer timeout")


def _read(call: Call, response: httpx.Response) -> Any:
    if response.status_code >= 400:
        raise _error(response)
    data = response.json()
    if call.parse is None:
        return data
    if isinstance(call.parse, TypeAdapter):
        return call.parse.validate_python(data)
    return call.parse.model_validate(data)


_VIEWS: TypeAdapter[list[MemoryView]] = TypeAdapter(list[MemoryView])
_JOBS: TypeAdapter[list[JobView]] = TypeAdapter(list[JobView])


def _labels(labels: Sequence[str] | None, field: str) -> builtins.list[str]:
    """A namespace as its labels; a bare string is refused, not read letter by letter."""
    if labels is None:
        return []
    if isinstance(labels, str) or not all(isinstance(x, str) for x in labels):
        raise ValidationError(field, "a namespace is a tuple of string labels, "
                                     "e.g. ('agent', 'user')")
    return list(labels)


def _bool(flag: bool) -> str:
    return "true" if flag else "false"


class _Calls:
    """The requests both clients send; each method returns a :class:`Call`."""

    target: Target

    def _emit_calls(self, events: Iterable[Mapping[str, Any]]) -> builtins.list[Call]:
        items = [_event(self.target, e) for e in events]
        return [Call("POST", "/v1/events", json={"events": items[i:i + BATCH]})
                for i in range(0, len(items), BATCH)]

    def _end_session(self, session: str | None) -> Call:
        event = {"kind": "session_end", "role": "system", "content": ""}
        if session:
            event["session"] = session
        if not (session or self.target.defaults.get("session")):
            raise ValidationError("session", "name the session to end (session=...)")
        return Call("POST", "/v1/events", json=_event(self.target, event))

    def _flush(self, scope: Any, position: str | None, timeout: float) -> Call:
        body = {"scope": _scope(self.target, scope), "position": position,
                "timeout_s": timeout}
        # The server answers by timeout_s at the latest; the margin is for the trip.
        return Call("POST", "/v1/flush", json=body, parse=Freshness, timeout=timeout + 10)

    def _maintenance(self, name: str) -> Call:
        admin = self.target.admin_key
        headers = {"Authorization": f"Bearer {admin}"} if admin else None
        return Call("POST", f"/v1/jobs/{name}/run", headers=headers)

    def _search(self, query: str, scope: Any, k: int, types: Sequence[str] | None,
                as_of: datetime | str | None, max_tokens: int | None, format: str,
                min_position: str | None = None, wait: float = WAIT_S) -> Call:
        body = {"query": query, "scope": _scope(self.target, scope), "k": k,
                "types": list(types) if types else None, "max_tokens": max_tokens,
                "format": format,
                "as_of": as_of.isoformat() if isinstance(as_of, datetime) else as_of}
        if min_position is None:
            return Call("POST", "/v1/search", json=body, parse=SearchResult)
        body |= {"min_position": min_position, "wait_s": wait}
        return Call("POST", "/v1/search", json=body, parse=SearchResult, timeout=wait + 10)

    def _context(self, query: str, scope: Any, budget_tokens: int, k: int,
                 min_position: str | None = None, wait: float = WAIT_S,
                 format: str = "cards") -> Call:
        body = {"query": query, "scope": _scope(self.target, scope), "k": k,
                "budget_tokens": budget_tokens, "format": format}
        if min_position is None:
            return Call("POST", "/v1/context", json=body, parse=ContextResult)
        body |= {"min_position": min_position, "wait_s": wait}
        return Call("POST", "/v1/context", json=body, parse=ContextResult, timeout=wait + 10)

    def _list(self, scope: Any, type: str | Sequence[str] | None,
              status: str | Sequence[str] | None, limit: int, cursor: str | None) -> Call:
        params: builtins.list[tuple[str, str | int]] = [("scope", _scope_key(self.target, scope)),
                                               ("limit", limit)]
        for name, value in (("type", type), ("status", status)):
            if value:
                params += [(name, v) for v in ([value] if isinstance(value, str) else value)]
        if cursor:
            params.append(("cursor", cursor))
        return Call("GET", "/v1/memories", params=params, parse=MemoryPage)

    def _forget(self, memory_id: str | None, scope: Any) -> Call:
        if (memory_id is None) == (scope is None):
            raise ValidationError("forget", "name exactly one of memory_id or scope")
        if memory_id is not None:
            return Call("DELETE", f"/v1/memories/{memory_id}", parse=DeletionReceipt)
        return Call("DELETE", "/v1/memories", params={"scope": _scope_key(self.target, scope)},
                    parse=DeletionReceipt)

    @staticmethod
    def _memory(memory_id: str, suffix: str = "", method: str = "GET", json: Any = None,
                parse: Any = MemoryView) -> Call:
        return Call(method, f"/v1/memories/{memory_id}{suffix}", json=json, parse=parse)

    @staticmethod
    def _resolve(conflict_set: str, keep: str, reason: str) -> Call:
        return Call("POST", f"/v1/conflicts/{conflict_set}/resolve",
                    json={"keep": keep, "reason": reason}, parse=ConflictResolution)

    # -- working memory (session checkpoints) ---------------------------------------------
    def _session_scope(self, scope: Any) -> dict[str, Any]:
        where = _scope(self.target, scope)
        if not where.get("session"):
            raise ValidationError("scope.session", "a checkpoint belongs to a session: pass "
                                  "scope={'session': ...} or session= to the client")
        return where

    def _put_checkpoint(self, state: CheckpointState | Mapping[str, Any], base_version: int,
                        scope: Any) -> Call:
        body = {"scope": self._session_scope(scope), "base_version": base_version,
                "state": state.model_dump(mode="json") if isinstance(state, CheckpointState)
                else dict(state)}
        return Call("PUT", "/v1/checkpoints", json=body, parse=Checkpoint)

    def _get_checkpoint(self, scope: Any) -> Call:
        return Call("GET", "/v1/checkpoints",
                    params={"scope": Scope(**self._session_scope(scope)).key}, parse=Checkpoint)

    def _checkpoint_history(self, scope: Any, limit: int) -> Call:
        return Call("GET", "/v1/checkpoints/history",
                    params={"scope": Scope(**self._session_scope(scope)).key, "limit": limit},
                    parse=CheckpointHistory)

    def _evict(self, messages: Iterable[Mapping[str, Any]], scope: Any) -> Call:
        return Call("POST", "/v1/sessions/evict",
                    json={"scope": self._session_scope(scope), "messages": list(messages)})

    def _reconsolidate(self, scope: Any, since: datetime | None, apply: bool) -> Call:
        body = {"scope": _scope_key(self.target, scope), "apply": apply,
                "since": since.isoformat() if since else None}
        return Call("POST", "/v1/jobs/reconsolidate", json=body, parse=JobView)

    # -- stored values (the LangGraph store) ----------------------------------------------
    def _item_params(self, namespace: Sequence[str], key: str,
                     scope: Any) -> builtins.list[tuple[str, str]]:
        levels = _scope(self.target, scope)
        return [("scope", Scope(**levels).key),
                *(("namespace", label) for label in _labels(namespace, "namespace")),
                ("key", key)]

    def _put_value(self, namespace: Sequence[str], key: str, value: Mapping[str, Any],
                   scope: Any, ttl_s: float | None,
                   index: Literal[False] | builtins.list[str] | None) -> Call:
        body = {"scope": _scope(self.target, scope),
                "namespace": _labels(namespace, "namespace"), "key": key,
                "value": value, "ttl_s": ttl_s}
        try:
            checked = check_index(index, parse=False)
        except ValueError as exc:
            field, _, reason = str(exc).partition(": ")
            raise ValidationError(field, reason) from None
        if checked is not None:  # left out by default: a server before index still answers
            body["index"] = checked
        return Call("PUT", "/v1/store/items", json=body, parse=StoredValue)

    def _get_value(self, namespace: Sequence[str], key: str, scope: Any,
                   refresh_ttl: bool) -> Call:
        params = [*self._item_params(namespace, key, scope), ("refresh_ttl", _bool(refresh_ttl))]
        return Call("GET", "/v1/store/items", params=params, parse=StoredValue)

    def _delete_value(self, namespace: Sequence[str], key: str, scope: Any) -> Call:
        return Call("DELETE", "/v1/store/items", params=self._item_params(namespace, key, scope),
                    parse=ValuesDeleted)

    def _search_values(self, namespace_prefix: Sequence[str], scope: Any,
                       filter: Mapping[str, Any] | None, query: str | None, limit: int,
                       offset: int, refresh_ttl: bool) -> Call:
        body = {"scope": Scope.from_key(_scope_key(self.target, scope)).levels(),
                "namespace_prefix": _labels(namespace_prefix, "namespace_prefix"),
                "filter": dict(filter) if filter is not None else None, "query": query,
                "limit": limit, "offset": offset, "refresh_ttl": refresh_ttl}
        return Call("POST", "/v1/store/search", json=body, parse=StoredValues)

    def _value_namespaces(self, scope: Any, prefix: Sequence[str] | None,
                          suffix: Sequence[str] | None, max_depth: int | None, limit: int,
                          offset: int) -> Call:
        params: builtins.list[tuple[str, str | int]] = [
            ("scope", _scope_key(self.target, scope)), ("limit", limit), ("offset", offset)]
        params += [("prefix", label) for label in _labels(prefix, "prefix")]
        params += [("suffix", label) for label in _labels(suffix, "suffix")]
        if max_depth is not None:
            params.append(("max_depth", max_depth))
        return Call("GET", "/v1/store/namespaces", params=params, parse=ValueNamespaces)


def _headers(target: Target) -> dict[str, str]:
    return {"Authorization": f"Bearer {target.key}"} if target.key else {}


class Client(_Calls):
    """Synchronous client. ``with Client() as mem: mem.emit(content="…")``."""

    def __init__(
        self, url: str | None = None, api_key: str | None = None, *,
        tenant: str | None = None, agent: str | None = None, user: str | None = None,
        project: str | None = None, session: str | None = None,
        data_dir: str | Path | None = None, timeout: float = 30.0,
        http: httpx.Client | None = None,
    ) -> None:
        self.target = resolve_target(url, api_key, data_dir=data_dir, scope={
            "tenant": tenant, "agent": agent, "user": user, "project": project,
            "session": session})
        self._http = http or httpx.Client(base_url=self.target.url, timeout=timeout,
                                          headers=_headers(self.target))
        self._owns = http is None

    def _send(self, call: Call) -> Any:
        try:
            response = self._http.request(call.method, call.path, **call.options())
        except httpx.HTTPError as exc:
            raise TransientError(f"sleepmem server at {self.target.url} unreachable ({exc}); "
                                 "start it with `sleepmem serve` or set SLEEPMEM_API_URL"
                                 ) from exc
        return _read(call, response)

    # -- writing -----------------------------------------------------------------------
    def emit(self, event: Mapping[str, Any] | None = None, /, **fields: Any) -> EventId:
        """Append one event (``content``, ``kind``, ``role``, scope levels); its id, whose
        ``.position`` is where it sits in the event log (for :meth:`flush`)."""
        ids = self.emit_many([{**(event or {}), **fields}])
        return EventId(ids[0], ids.position)

    def emit_many(self, events: Iterable[Mapping[str, Any]]) -> EventIds:
        """Append a batch (all or nothing per 1,000); the ids in order, and ``.position``,
        the stream position of the last one."""
        return _accepted([self._send(call) for call in self._emit_calls(events)])

    def end_session(self, session: str | None = None, *, wait: bool = False,
                    timeout: float = WAIT_S) -> EventId:
        """Tell the server the session is over: it consolidates at once. ``wait=True``
        returns only once the session is in memory (searchable); TransientError when that
        takes longer than ``timeout`` seconds."""
        answer = self._send(self._end_session(session))
        ended = EventId(str(answer["ids"][0]), str(answer.get("position") or ""))
        if wait:
            _waited(self.flush(position=ended.position or None, timeout=timeout))
        return ended

    def flush(self, scope: Scope | Mapping[str, Any] | None = None, *,
              position: str | None = None, timeout: float = WAIT_S) -> Freshness:
        """Wait until every event of the scope up to ``position`` (default: everything
        appended so far) is consolidated and indexed, asking the server to consolidate
        now; or until ``timeout`` seconds pass. ``.done`` says which; ``.reached`` how far
        memory got."""
        state: Freshness = self._send(self._flush(scope, position, timeout))
        return state

    # -- reading -----------------------------------------------------------------------
    def put_checkpoint(self, state: CheckpointState | Mapping[str, Any], *, base_version: int,
                       scope: Scope | Mapping[str, Any] | None = None) -> Checkpoint:
        """Write the session's working state as version ``base_version + 1`` (0 creates);
        ConflictError (409) when another writer moved it on: re-read, never overwrite."""
        checkpoint: Checkpoint = self._send(self._put_checkpoint(state, base_version, scope))
        return checkpoint

    def get_checkpoint(self, scope: Scope | Mapping[str, Any] | None = None) -> Checkpoint:
        """The session's current checkpoint; NotFoundError when it has none yet."""
        checkpoint: Checkpoint = self._send(self._get_checkpoint(scope))
        return checkpoint

    def checkpoint_history(self, scope: Scope | Mapping[str, Any] | None = None, *,
                           limit: int = 20) -> builtins.list[Checkpoint]:
        """Earlier versions, newest first."""
        history: CheckpointHistory = self._send(self._checkpoint_history(scope, limit))
        return history.versions

    def evict(self, messages: Iterable[Mapping[str, Any]],
              scope: Scope | Mapping[str, Any] | None = None) -> builtins.list[str]:
        """Hand context the agent drops from its prompt to memory (as events); their ids."""
        return list(self._send(self._evict(messages, scope))["ids"])

    def search(self, query: str, scope: Scope | Mapping[str, Any] | None = None, *, k: int = 5,
               types: Sequence[str] | None = None, as_of: datetime | str | None = None,
               max_tokens: int | None = None, format: str = "cards",
               min_position: str | None = None, wait: float = WAIT_S) -> SearchResult:
        """At most ``k`` memories, within ``max_tokens`` cl100k tokens when given, in
        ``format``: ``cards`` (each whole), ``lines`` (each as its best sentence) or
        ``mixed`` (the first half of k whole, the rest as lines).
        ``min_position`` (what an emit answered): first wait up to ``wait`` seconds for
        every event of the scope up to it to be in memory; ``.fresh`` says whether it was."""
        result: SearchResult = self._send(self._search(query, scope, k, types, as_of,
                                                       max_tokens, format, min_position,
                                                       wait))
        return result

    def context(self, query: str, scope: Scope | Mapping[str, Any] | None = None, *,
                budget_tokens: int = 800, k: int = 10, min_position: str | None = None,
                wait: float = WAIT_S, format: str = "cards") -> ContextResult:
        """What memory knows for this turn, within ``budget_tokens``: a stable prefix
        (identity, standing preferences, procedures) and the part relevant to ``query``
        (with the session's checkpoint when the scope names a session); ``.text`` is both.
        ``min_position``, ``wait`` and ``format`` (of the relevant memories) as for
        :meth:`search`."""
        result: ContextResult = self._send(self._context(query, scope, budget_tokens, k,
                                                         min_position, wait, format))
        return result

    def get(self, memory_id: str) -> MemoryView:
        view: MemoryView = self._send(self._memory(memory_id))
        return view

    def list(self, scope: Scope | Mapping[str, Any] | str | None = None, *,
             type: str | Sequence[str] | None = None,
             status: str | Sequence[str] | None = None, limit: int = 50,
             cursor: str | None = None) -> MemoryPage:
        page: MemoryPage = self._send(self._list(scope, type, status, limit, cursor))
        return page

    def history(self, memory_id: str) -> builtins.list[MemoryView]:
        views: builtins.list[MemoryView] = self._send(
            self._memory(memory_id, "/history", parse=_VIEWS))
        return views

    def explain(self, memory_id: str, *, query: str | None = None) -> Explanation:
        """Why the memory exists; with ``query``, also which search routes found it for that
        query, its rank and score in each, and the rerank's terms (``Explanation.query``)."""
        ex: Explanation = self._send(_explain_call(memory_id, query))
        return ex

    # -- a person's corrections --------------------------------------------------------
    def update(self, memory_id: str, statement: str, *, importance: float | None = None,
               reason: str = "") -> MemoryView:
        body = {"statement": statement, "importance": importance, "reason": reason}
        view: MemoryView = self._send(self._memory(memory_id, "", "PATCH", body))
        return view

    def pin(self, memory_id: str) -> MemoryView:
        view: MemoryView = self._send(self._memory(memory_id, "/pin", "POST"))
        return view

    def unpin(self, memory_id: str) -> MemoryView:
        view: MemoryView = self._send(self._memory(memory_id, "/unpin", "POST"))
        return view

    def feedback(self, memory_id: str, verdict: str, *, note: str = "") -> MemoryView:
        """``"helpful"`` raises importance; ``"wrong"`` invalidates the memory."""
        view: MemoryView = self._send(
            self._memory(memory_id, "/feedback", "POST", {"verdict": verdict, "note": note}))
        return view

    def resolve_conflict(self, conflict_set: str, keep: str, *,
                         reason: str = "") -> ConflictResolution:
        """Keep one side of a conflict set (it becomes active, trust ``"human"``); the
        other sides are invalidated and superseded by it."""
        done: ConflictResolution = self._send(self._resolve(conflict_set, keep, reason))
        return done

    def forget(self, memory_id: str | None = None, *,
               scope: Scope | Mapping[str, Any] | str | None = None) -> DeletionReceipt:
        """Erase one memory or a whole scope from every store; the deletion receipt."""
        receipt: DeletionReceipt = self._send(self._forget(memory_id, scope))
        return receipt

    # -- stored values -------------------------------------------------------------------
    def put_value(self, namespace: Sequence[str], key: str, value: Mapping[str, Any], *,
                  scope: Scope | Mapping[str, Any] | None = None,
                  ttl_s: float | None = None,
                  index: Literal[False] | builtins.list[str] | None = None) -> StoredValue:
        """Keep ``value`` (a JSON object) under (scope, namespace, key), replacing what was
        there; :meth:`get_value` returns it at once, as given less any secret (redacted).
        ``ttl_s``: it expires that long after its last write, or read when reads refresh.
        ``index``: what a :meth:`search_values` query matches, as LangGraph's put takes it:
        None the whole value, False nothing (get and filters still find it), or a list of
        field paths (``"title"``, ``"a.b"``, ``"items[*].text"``)."""
        stored: StoredValue = self._send(
            self._put_value(namespace, key, value, scope, ttl_s, index))
        return stored

    def get_value(self, namespace: Sequence[str], key: str, *,
                  scope: Scope | Mapping[str, Any] | None = None,
                  refresh_ttl: bool = True) -> StoredValue | None:
        """The value under the key, or None (never written, deleted or expired)."""
        try:
            stored: StoredValue = self._send(self._get_value(namespace, key, scope,
                                                             refresh_ttl))
        except NotFoundError:
            return None
        return stored

    def delete_value(self, namespace: Sequence[str], key: str, *,
                     scope: Scope | Mapping[str, Any] | None = None) -> bool:
        """Delete the value; False when there was none."""
        done: ValuesDeleted = self._send(self._delete_value(namespace, key, scope))
        return done.deleted > 0

    def search_values(self, namespace_prefix: Sequence[str] = (), *,
                      scope: Scope | Mapping[str, Any] | str | None = None,
                      filter: Mapping[str, Any] | None = None, query: str | None = None,
                      limit: int = 10, offset: int = 0,
                      refresh_ttl: bool = True) -> builtins.list[StoredValue]:
        """Values of the scope and the scopes under it whose namespace starts with
        ``namespace_prefix`` and that pass ``filter`` (LangGraph's: exact fields or $eq $ne
        $gt $gte $lt $lte); with ``query``, those sharing its words, best first."""
        found: StoredValues = self._send(self._search_values(
            namespace_prefix, scope, filter, query, limit, offset, refresh_ttl))
        return found.items

    def value_namespaces(self, *, scope: Scope | Mapping[str, Any] | str | None = None,
                         prefix: Sequence[str] | None = None,
                         suffix: Sequence[str] | None = None, max_depth: int | None = None,
                         limit: int = 100,
                         offset: int = 0) -> builtins.list[tuple[str, ...]]:
        """The namespaces holding values, as ``BaseStore.list_namespaces`` lists them."""
        found: ValueNamespaces = self._send(self._value_namespaces(
            scope, prefix, suffix, max_depth, limit, offset))
        return [tuple(ns) for ns in found.namespaces]

    # -- jobs --------------------------------------------------------------------------
    def reconsolidate(self, scope: Scope | Mapping[str, Any] | str | None = None, *,
                      since: datetime | None = None, apply: bool = False) -> JobView:
        job: JobView = self._send(self._reconsolidate(scope, since, apply))
        return job

    def job(self, job_id: str) -> JobView:
        job: JobView = self._send(Call("GET", f"/v1/jobs/{job_id}", parse=JobView))
        return job

    def jobs(self, *, limit: int = 20) -> builtins.list[JobView]:
        rows: builtins.list[JobView] = self._send(Call("GET", "/v1/jobs", params={"limit": limit},
                                              parse=_JOBS))
        return rows

    def cancel_job(self, job_id: str) -> JobView:
        job: JobView = self._send(Call("POST", f"/v1/jobs/{job_id}/cancel", parse=JobView))
        return job

    def consolidate(self, scope: Scope | Mapping[str, Any] | str | None = None) -> dict[str, Any]:
        """Consolidate a scope now instead of waiting for it to go quiet."""
        body = {"scope": _scope_key(self.target, scope)}
        out: dict[str, Any] = self._send(Call("POST", "/v1/jobs/consolidate", json=body))
        return out

    def run_maintenance(self, name: str) -> dict[str, Any]:
        """``"sweep"`` or ``"refresh"`` now, on the server (the operator key:
        ``SLEEPMEM_ADMIN_KEY``, or the local key of a loopback server)."""
        out: dict[str, Any] = self._send(self._maintenance(name))
        return out

    def close(self) -> None:
        if self._owns:
            self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class AsyncClient(_Calls):
    """The same calls as :class:`Client`, awaited. ``async with AsyncClient() as mem:``."""

    def __init__(
        self, url: str | None = None, api_key: str | None = None, *,
        tenant: str | None = None, agent: str | None = None, user: str | None = None,
        project: str | None = None, session: str | None = None,
        data_dir: str | Path | None = None, timeout: float = 30.0,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.target = resolve_target(url, api_key, data_dir=data_dir, scope={
            "tenant": tenant, "agent": agent, "user": user, "project": project,
            "session": session})
        self._http = http or httpx.AsyncClient(base_url=self.target.url, timeout=timeout,
                                               headers=_headers(self.target))
        self._owns = http is None

    async def _send(self, call: Call) -> Any:
        try:
            response = await self._http.request(call.method, call.path, **call.options())
        except httpx.HTTPError as exc:
            raise TransientError(f"sleepmem server at {self.target.url} unreachable ({exc}); "
                                 "start it with `sleepmem serve` or set SLEEPMEM_API_URL"
                                 ) from exc
        return _read(call, response)

    async def emit(self, event: Mapping[str, Any] | None = None, /, **fields: Any) -> EventId:
        ids = await self.emit_many([{**(event or {}), **fields}])
        return EventId(ids[0], ids.position)

    async def emit_many(self, events: Iterable[Mapping[str, Any]]) -> EventIds:
        return _accepted([await self._send(call) for call in self._emit_calls(events)])

    async def end_session(self, session: str | None = None, *, wait: bool = False,
                          timeout: float = WAIT_S) -> EventId:
        """See :meth:`Client.end_session`."""
        answer = await self._send(self._end_session(session))
        ended = EventId(str(answer["ids"][0]), str(answer.get("position") or ""))
        if wait:
            _waited(await self.flush(position=ended.position or None, timeout=timeout))
        return ended

    async def flush(self, scope: Scope | Mapping[str, Any] | None = None, *,
                    position: str | None = None, timeout: float = WAIT_S) -> Freshness:
        """See :meth:`Client.flush`."""
        state: Freshness = await self._send(self._flush(scope, position, timeout))
        return state

    async def put_checkpoint(self, state: CheckpointState | Mapping[str, Any], *,
                             base_version: int,
                             scope: Scope | Mapping[str, Any] | None = None) -> Checkpoint:
        checkpoint: Checkpoint = await self._send(
            self._put_checkpoint(state, base_version, scope))
        return checkpoint

    async def get_checkpoint(self, scope: Scope | Mapping[str, Any] | None = None) -> Checkpoint:
        checkpoint: Checkpoint = await self._send(self._get_checkpoint(scope))
        return checkpoint

    async def checkpoint_history(self, scope: Scope | Mapping[str, Any] | None = None, *,
                                 limit: int = 20) -> builtins.list[Checkpoint]:
        history: CheckpointHistory = await self._send(self._checkpoint_history(scope, limit))
        return history.versions

    async def evict(self, messages: Iterable[Mapping[str, Any]],
                    scope: Scope | Mapping[str, Any] | None = None) -> builtins.list[str]:
        return list((await self._send(self._evict(messages, scope)))["ids"])

    async def search(self, query: str, scope: Scope | Mapping[str, Any] | None = None, *,
                     k: int = 5, types: Sequence[str] | None = None,
                     as_of: datetime | str | None = None,
                     max_tokens: int | None = None, format: str = "cards",
                     min_position: str | None = None, wait: float = WAIT_S) -> SearchResult:
        result: SearchResult = await self._send(self._search(
            query, scope, k, types, as_of, max_tokens, format, min_position, wait))
        return result

    async def context(self, query: str, scope: Scope | Mapping[str, Any] | None = None, *,
                      budget_tokens: int = 800, k: int = 10, min_position: str | None = None,
                      wait: float = WAIT_S, format: str = "cards") -> ContextResult:
        result: ContextResult = await self._send(self._context(
            query, scope, budget_tokens, k, min_position, wait, format))
        return result

    async def get(self, memory_id: str) -> MemoryView:
        view: MemoryView = await self._send(self._memory(memory_id))
        return view

    async def list(self, scope: Scope | Mapping[str, Any] | str | None = None, *,
                   type: str | Sequence[str] | None = None,
                   status: str | Sequence[str] | None = None, limit: int = 50,
                   cursor: str | None = None) -> MemoryPage:
        page: MemoryPage = await self._send(self._list(scope, type, status, limit, cursor))
        return page

    async def history(self, memory_id: str) -> builtins.list[MemoryView]:
        views: builtins.list[MemoryView] = await self._send(
            self._memory(memory_id, "/history", parse=_VIEWS))
        return views

    async def explain(self, memory_id: str, *, query: str | None = None) -> Explanation:
        """See :meth:`Client.explain`."""
        ex: Explanation = await self._send(_explain_call(memory_id, query))
        return ex

    async def update(self, memory_id: str, statement: str, *, importance: float | None = None,
                     reason: str = "") -> MemoryView:
        body = {"statement": statement, "importance": importance, "reason": reason}
        view: MemoryView = await self._send(self._memory(memory_id, "", "PATCH", body))
        return view

    async def pin(self, memory_id: str) -> MemoryView:
        view: MemoryView = await self._send(self._memory(memory_id, "/pin", "POST"))
        return view

    async def unpin(self, memory_id: str) -> MemoryView:
        view: MemoryView = await self._send(self._memory(memory_id, "/unpin", "POST"))
        return view

    async def feedback(self, memory_id: str, verdict: str, *, note: str = "") -> MemoryView:
        view: MemoryView = await self._send(
            self._memory(memory_id, "/feedback", "POST", {"verdict": verdict, "note": note}))
        return view

    async def resolve_conflict(self, conflict_set: str, keep: str, *,
                               reason: str = "") -> ConflictResolution:
        done: ConflictResolution = await self._send(self._resolve(conflict_set, keep, reason))
        return done

    async def forget(self, memory_id: str | None = None, *,
                     scope: Scope | Mapping[str, Any] | str | None = None) -> DeletionReceipt:
        receipt: DeletionReceipt = await self._send(self._forget(memory_id, scope))
        return receipt

    async def put_value(self, namespace: Sequence[str], key: str, value: Mapping[str, Any], *,
                        scope: Scope | Mapping[str, Any] | None = None,
                        ttl_s: float | None = None,
                        index: Literal[False] | builtins.list[str] | None = None
                        ) -> StoredValue:
        """See :meth:`Client.put_value`."""
        stored: StoredValue = await self._send(
            self._put_value(namespace, key, value, scope, ttl_s, index))
        return stored

    async def get_value(self, namespace: Sequence[str], key: str, *,
                        scope: Scope | Mapping[str, Any] | None = None,
                        refresh_ttl: bool = True) -> StoredValue | None:
        """See :meth:`Client.get_value`."""
        try:
            stored: StoredValue = await self._send(
                self._get_value(namespace, key, scope, refresh_ttl))
        except NotFoundError:
            return None
        return stored

    async def delete_value(self, namespace: Sequence[str], key: str, *,
                           scope: Scope | Mapping[str, Any] | None = None) -> bool:
        done: ValuesDeleted = await self._send(self._delete_value(namespace, key, scope))
        return done.deleted > 0

    async def search_values(self, namespace_prefix: Sequence[str] = (), *,
                            scope: Scope | Mapping[str, Any] | str | None = None,
                            filter: Mapping[str, Any] | None = None,
                            query: str | None = None, limit: int = 10, offset: int = 0,
                            refresh_ttl: bool = True) -> builtins.list[StoredValue]:
        """See :meth:`Client.search_values`."""
        found: StoredValues = await self._send(self._search_values(
            namespace_prefix, scope, filter, query, limit, offset, refresh_ttl))
        return found.items

    async def value_namespaces(self, *, scope: Scope | Mapping[str, Any] | str | None = None,
                               prefix: Sequence[str] | None = None,
                               suffix: Sequence[str] | None = None,
                               max_depth: int | None = None, limit: int = 100,
                               offset: int = 0) -> builtins.list[tuple[str, ...]]:
        found: ValueNamespaces = await self._send(self._value_namespaces(
            scope, prefix, suffix, max_depth, limit, offset))
        return [tuple(ns) for ns in found.namespaces]

    async def reconsolidate(self, scope: Scope | Mapping[str, Any] | str | None = None, *,
                            since: datetime | None = None, apply: bool = False) -> JobView:
        job: JobView = await self._send(self._reconsolidate(scope, since, apply))
        return job

    async def job(self, job_id: str) -> JobView:
        job: JobView = await self._send(Call("GET", f"/v1/jobs/{job_id}", parse=JobView))
        return job

    async def jobs(self, *, limit: int = 20) -> builtins.list[JobView]:
        rows: builtins.list[JobView] = await self._send(
            Call("GET", "/v1/jobs", params={"limit": limit}, parse=_JOBS))
        return rows

    async def cancel_job(self, job_id: str) -> JobView:
        job: JobView = await self._send(Call("POST", f"/v1/jobs/{job_id}/cancel",
                                             parse=JobView))
        return job

    async def consolidate(
        self, scope: Scope | Mapping[str, Any] | str | None = None
    ) -> dict[str, Any]:
        body = {"scope": _scope_key(self.target, scope)}
        out: dict[str, Any] = await self._send(Call("POST", "/v1/jobs/consolidate", json=body))
        return out

    async def run_maintenance(self, name: str) -> dict[str, Any]:
        out: dict[str, Any] = await self._send(self._maintenance(name))
        return out

    async def aclose(self) -> None:
        if self._owns:
            await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()


__all__ = ["AsyncClient", "Client"]
