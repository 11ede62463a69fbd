"""The local key: what makes an unconfigured ``sleepmem serve`` usable and still safe.

On a loopback bind with no ``SLEEPMEM_API_KEYS``, the server generates one key for the
tenant ``default`` and keeps it in ``<data dir>/local-key.json`` (mode 0600, readable by
this user only). The CLI and :class:`sleepmem.Client` read the same file, so a user on the
same machine and data directory needs no configuration; a remote caller must be given the
key. Off loopback there is no such shortcut: without keys the server refuses to start.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from sleepmem.core.errors import ConfigurationError
from sleepmem.core.settings import LOOPBACK_HOSTS, Settings

KEY_FILE = "local-key.json"
DEFAULT_TENANT = "default"


@dataclass(frozen=True, slots=True)
class LocalKey:
    tenant: str
    key: str
    url: str
    path: Path


def key_file(data_dir: Path) -> Path:
    return data_dir / KEY_FILE


def read_local_key(data_dir: Path) -> LocalKey | None:
    path = key_file(data_dir)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read the local key file {path}: {exc}") from None
    try:
        return LocalKey(tenant=str(data["tenant"]), key=str(data["key"]),
                        url=str(data.get("url", "")), path=path)
    except (KeyError, TypeError):
        raise ConfigurationError(
            f"the local key file {path} is damaged; delete it and restart `sleepmem serve`"
        ) from None


def _write(path: Path, key: LocalKey) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = json.dumps({"tenant": key.tenant, "key": key.key, "url": key.url}).encode()
    # Created 0600 from the first byte: no window in which another user could read it.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, body)
    finally:
        os.close(fd)


def server_url(settings: Settings, port: int | None = None) -> str:
    host = settings.host
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.port if port is None else port}"


@dataclass(frozen=True, slots=True)
class AuthSetup:
    settings: Settings
    local_key: LocalKey | None = None
    created: bool = False


def prepare_auth(settings: Settings) -> AuthSetup:
    """Settings a server may start with: keys configured, or the local key on loopback.

    Raises ConfigurationError (one line) for a non-loopback bind with auth on and no keys.
    """
    if not settings.auth_enabled or settings.api_keys:
        return AuthSetup(settings)
    if settings.host not in LOOPBACK_HOSTS:
        raise ConfigurationError(
            f"refusing to listen on {settings.host} without API keys: set "
            "SLEEPMEM_API_KEYS='{\"tenant\": \"key\"}', or bind to 127.0.0.1 "
            "(SLEEPMEM_HOST) to get a generated local key"
        )
    existing = read_local_key(settings.data_dir)
    created = existing is None
    key = existing or LocalKey(
        tenant=DEFAULT_TENANT, key="sm_" + secrets.token_urlsafe(32), url="",
        path=key_file(settings.data_dir),
    )
    from pydantic import SecretStr

    return AuthSetup(
        # One person owns a loopback server with a generated key: they are its operator too.
        settings=settings.model_copy(update={
            "api_keys": {key.tenant: SecretStr(key.key)},
            "admin_key": settings.admin_key or SecretStr(key.key),
        }),
        local_key=key,
        created=created,
    )


def publish_local_key(setup: AuthSetup, url: str) -> LocalKey | None:
    """Write the key file with the URL the server listens on (once it does)."""
    if setup.local_key is None:
        return None
    key = LocalKey(tenant=setup.local_key.tenant, key=setup.local_key.key, url=url,
                   path=setup.local_key.path)
    _write(key.path, key)
    return key


def auth_hint(settings: Settings) -> str:
    """What a 401/403 tells the caller to set."""
    # The answer goes to a caller who has not authenticated: it names the file relative to
    # the data directory, never the server's absolute path.
    where = f"<data dir>/{key_file(settings.data_dir).name}"
    return (
        "send 'Authorization: Bearer <key>'; the CLI and sleepmem.Client read the key from "
        f"SLEEPMEM_API_KEY, else from {where} (written by `sleepmem serve` on a loopback "
        "bind); server keys are set with SLEEPMEM_API_KEYS='{\"tenant\": \"key\"}'"
    )
