"""sleepmem: long-term memory for LLM agents that does its thinking at sleep time."""

from pathlib import Path
from typing import TYPE_CHECKING, Any

from sleepmem import _layers
from sleepmem.core.errors import SleepmemError, ValidationError

if TYPE_CHECKING:
    from sleepmem.client import AsyncClient, Client

__all__ = ["AsyncClient", "Client", "SleepmemError", "ValidationError"]
__version__ = "0.1.0"

# In a checkout, sleepmem.models, .pipelines, .tasks, .workers and .schedules load from the
# top-level folders of the same names (the wheel has them under sleepmem/ instead).
_layers.install(Path(__file__).parent)


def __getattr__(name: str) -> Any:
    # The clients import httpx and the models: loaded on first use, not with every
    # ``import sleepmem`` (workers and the CLI import the package too).
    if name in ("Client", "AsyncClient"):
        from sleepmem import client

        return getattr(client, name)
    raise AttributeError(f"module 'sleepmem' has no attribute {name!r}")
