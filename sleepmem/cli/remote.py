"""The running server, when there is one: lifecycle commands go through its API then.

In embedded mode the server holds the data directory's index (and in every mode it is the
process that already has the stores open): a second process opening them fails with
``Can't init WAL: Kind(WouldBlock)``. So a command first looks for a server of this data
directory, by ``SLEEPMEM_API_URL``, the key file ``sleepmem serve`` wrote, or the
configured host and port, and asks it to do the work.

A URL the user configured is the only one tried: when it does not answer the command stops
(a ``TransientError``, exit 75) rather than acting on another server or a local store, since
an erasure sent to the wrong store cannot be taken back. With no server at all, a command
runs on the local store only if there is one: it never creates an empty one to act on.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from sleepmem.core.errors import NotFoundError, TransientError

if TYPE_CHECKING:
    from sleepmem.client import Client
    from sleepmem.core.settings import Settings

PROBE_TIMEOUT_S = 0.5


def _answers(url: str) -> bool:
    # deferred: httpx and the client (with the models) take ~0.3 s to import; only the
    # commands that look for a server need them
    import httpx

    try:
        return httpx.get(f"{url.rstrip('/')}/healthz", timeout=PROBE_TIMEOUT_S).status_code == 200
    except httpx.HTTPError:
        return False


def running_server(settings: Settings, *, tenant: str | None = None) -> Client | None:
    """A client of the server that owns these stores, or None when none answers.

    The key: SLEEPMEM_API_KEY, else the tenant's key from SLEEPMEM_API_KEYS (an operator
    shell shares the server's environment), else the local key file."""
    from sleepmem.client import Client
    from sleepmem.core.localkey import read_local_key, server_url
    from sleepmem.core.settings import ENV_PREFIX

    local = read_local_key(settings.data_dir)
    configured = os.environ.get(f"{ENV_PREFIX}API_URL")
    if configured:
        if not _answers(configured):
            raise TransientError(
                f"the API at {configured} ({ENV_PREFIX}API_URL) does not answer; nothing was "
                "done: start that server, or unset the variable to use the local store"
            )
        url: str | None = configured
    else:
        candidates = [local.url if local is not None else "", server_url(settings)]
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


def require_local_store(settings: Settings) -> None:
    """Refuse to run on a store that does not exist: opening it would create an empty one
    (a data directory and its database) and report on that, as if all were well."""
    from sleepmem.core.settings import ENV_PREFIX

    if settings.database_url is not None:
        return  # a configured database: its server says whether it exists
    if not settings.local_database.exists():
        raise NotFoundError(
            f"no sleepmem store here: no server answers and {settings.data_dir} holds no "
            f"database; start `sleepmem serve`, or set {ENV_PREFIX}DATA_DIR, "
            f"{ENV_PREFIX}DATABASE_URL or {ENV_PREFIX}API_URL to the store to use"
        )
