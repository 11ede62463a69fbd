"""Per-process resources: the clients a process needs, built once, closed once.

Nothing here runs at import time. ``build_resources`` is called from Celery's
``worker_process_init``, from the API's lifespan and from CLI commands.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import redis
from sqlalchemy.engine import Engine

from sleepmem.adapters.embedders import make_embedder
from sleepmem.adapters.redis.embedded import EmbeddedRedis
from sleepmem.adapters.redis.erase import RedisHotStore
from sleepmem.adapters.redis.hits import HitRecorder
from sleepmem.adapters.sql import make_engine
from sleepmem.adapters.vectors import open_index
from sleepmem.core.keys import Keys
from sleepmem.core.settings import Settings
from sleepmem.pipelines.ports import ChatModel, Clock, Embedder, LeaseGuard, Ports, VectorIndex
from sleepmem.pipelines.read.rewrite import QueryRewriter


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class Resources:
    settings: Settings
    redis: redis.Redis
    engine: Engine
    keys: Keys
    redis_url: str
    broker_url: str
    embedded_redis: EmbeddedRedis | None = None
    _index: Any = None
    _embedder: Any = None
    _chat: Any = None
    _rewriter: Any = None
    _hits: HitRecorder | None = None
    # A controlled clock (scenario runner, tests); the wall clock when None.
    clock: Clock | None = None
    # The embedded runtime's worker threads reach for these together at start-up: two
    # threads opening the same index directory at once break it, so one builds them.
    _building: threading.RLock = field(default_factory=threading.RLock)

    @property
    def index(self) -> VectorIndex:
        if self._index is None:
            with self._building:
                if self._index is None:
                    index = open_index(self.settings)
                    index.ensure(dim=self.embedder.dim)
                    self._index = index  # published only once usable
        return self._index  # type: ignore[no-any-return]

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            with self._building:
                if self._embedder is None:
                    self._embedder = make_embedder(self.settings)
        return self._embedder  # type: ignore[no-any-return]

    @property
    def chat(self) -> ChatModel | None:
        if self._chat is None and self.settings.extractor == "llm":
            with self._building:
                if self._chat is None:
                    # deferred: openai takes ~1.5 s to import and only extractor=llm uses it
                    from sleepmem.adapters.llm import make_chat_model

                    self._chat = make_chat_model(self.settings)
        return self._chat  # type: ignore[no-any-return]

    @property
    def rewriter(self) -> QueryRewriter | None:
        """The LLM query rewriter when ``query_rewrite=llm`` and a chat model is configured."""
        if self._rewriter is None and self.settings.query_rewrite == "llm":
            with self._building:
                if self._rewriter is None:
                    # deferred: openai takes ~1.5 s to import
                    from sleepmem.adapters.llm import make_rewriter

                    self._rewriter = make_rewriter(self.settings) or False
        rewriter: QueryRewriter | None = self._rewriter or None
        return rewriter

    @property
    def hits(self) -> HitRecorder:
        """This process's writer of retrieval hits (its thread starts with the first)."""
        if self._hits is None:
            with self._building:
                if self._hits is None:
                    self._hits = HitRecorder(self.redis, self.keys)
        return self._hits

    def ports(self, clock: Clock | None = None, *, lease: LeaseGuard | None = None) -> Ports:
        """The pipeline ports of this process, with the wall clock unless told otherwise,
        and ``lease`` when the run holds one (the pipeline confirms it before committing)."""
        return Ports(
            embedder=self.embedder,
            index=self.index,
            clock=clock or self.clock or _utcnow,
            chat=self.chat,
            hot=RedisHotStore(self.redis, self.keys),
            lease=lease,
        )

    def stop_hits(self) -> None:
        """Write the hits still queued and stop the writer (a later search starts a new
        one). Whoever deletes this process's keys calls it first: the writer would
        otherwise write queued hits after the deletion."""
        with self._building:
            hits, self._hits = self._hits, None
        if hits is not None:
            hits.close()

    def close(self) -> None:
        self.stop_hits()
        if self._index is not None:
            self._index.close()
            self._index = None
        self.redis.close()
        self.engine.dispose()

    def shutdown(self) -> None:
        """:meth:`close`, then stop the embedded Redis server if this process started it.

        For a process that owns the data directory's runtime (a CLI command, a bench); a
        worker only closes, since the server may serve other processes.
        """
        self.close()
        if self.embedded_redis is not None:
            self.embedded_redis.stop()


def redis_urls(settings: Settings) -> tuple[str, str, EmbeddedRedis | None]:
    """(client URL, Celery broker URL, embedded server if any)."""
    if settings.redis_url:
        url = settings.redis_url
        broker = url.replace("unix://", "redis+socket://", 1) if url.startswith("unix://") else url
        return url, broker, None
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    server = EmbeddedRedis(settings.data_dir.resolve()).start()
    return server.url, server.celery_url, server


def build_resources(settings: Settings | None = None) -> Resources:
    settings = settings or Settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    url, broker, server = redis_urls(settings)
    client = redis.Redis.from_url(url)
    try:
        engine = make_engine(settings.sql_url, migrate=settings.auto_migrate)
    except BaseException:
        client.close()
        if server is not None:
            server.stop()
        raise
    return Resources(
        settings=settings,
        redis=client,
        engine=engine,
        keys=Keys(settings.namespace),
        redis_url=url,
        broker_url=broker,
        embedded_redis=server,
    )
