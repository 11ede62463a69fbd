"""The HTTP API: event ingest, health, and (added by later issues) search."""

from sleepmem.api.app import ROUTERS, create_app

__all__ = ["ROUTERS", "create_app"]
