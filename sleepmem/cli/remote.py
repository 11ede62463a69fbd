"""The running server, when there is one: lifecycle commands go through its API then.

In embedded mode the server holds the data directory's index (and in every mode it is the
process that already has the stores open): a second process opening them fails with
``Can't init WAL: Kind(WouldBlock)``. So a command first looks for a server of this data
directory, by ``SLEEPMEM_API_URL``, the key file ``sleepmem serve`` wrote, or the
configured host and port, and asks it to do the work.
"""

from __future__ import annotations

import os

import httpx

from sleepmem.client import Client
from sleepmem.core.localkey import read_local_key, server_url
from sleepmem.core.settings import Settings

PROBE_TIMEOUT_S = 0.5


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url.rstrip('/')}/healthz", timeout=PROBE_TIMEOUT_S).status_code == 200
    except httpx.HTTPError:
        return False


def running_server(settings: Settings, *, tenant: str | None = None) -> Client | None:
    """A client of the server that owns these stores, or None when none answers.

    The key: SLEEPMEM_API_KEY, else the tenant's key from SLEEPMEM_API_KEYS (an operator
    shell shares the server's environment), else the local key file."""
    local = read_local_key(settings.data_dir)
    candidates = [os.environ.get("SLEEPMEM_API_URL") or "",
                  local.url if local is not None else "", server_url(settings)]
    url = next((u for u in candidates if u and _answers(u)), None)
    if url is None:
        return None
    key = os.environ.get("SLEEPMEM_API_KEY")
    if key is None and settings.api_keys:
        name = tenant if tenant in settings.api_keys else sorted(settings.api_keys)[0]
        key = settings.api_keys[name].get_secret_value()
    if key is None and local is not None:
        key = local.key
    return Client(url, key, data_dir=settings.data_dir)
