"""Per-tenant bearer keys: a key writes its own tenant and nothing else.

Keys come from ``settings.api_keys`` (tenant -> key); an unconfigured loopback server gets
one generated local key (sleepmem.core.localkey). With ``auth_enabled`` false, which
settings only allow on a loopback host, every request may write any tenant. Every 401 and
403 says what to set (``hint``).
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from sleepmem.core.errors import AuthError, ForbiddenError
from sleepmem.core.localkey import auth_hint
from sleepmem.core.settings import Settings
from sleepmem.models.events import EventFields


@dataclass(frozen=True, slots=True)
class KeyRing:
    enabled: bool
    keys: tuple[tuple[str, bytes], ...]
    hint: str = ""
    admin: bytes = b""

    @classmethod
    def from_settings(cls, settings: Settings) -> KeyRing:
        keys = tuple(
            (tenant, secret.get_secret_value().encode())
            for tenant, secret in sorted(settings.api_keys.items())
            if secret.get_secret_value()
        )
        admin = settings.admin_key.get_secret_value().encode() if settings.admin_key else b""
        return cls(enabled=settings.auth_enabled, keys=keys, hint=auth_hint(settings),
                   admin=admin)

    def tenant_for(self, authorization: str | None) -> str | None:
        """The tenant a header's key belongs to; None when auth is off (any tenant)."""
        if not self.enabled:
            return None
        presented = _bearer(authorization)
        found: str | None = None
        # Every key is compared, match or not, so timing does not tell which one was close.
        for tenant, key in self.keys:
            if hmac.compare_digest(presented, key):
                found = tenant
        if found is None:
            raise AuthError("the API key is not valid")
        return found

    def check_operator(self, authorization: str | None) -> None:
        """Jobs over every tenant need the operator key; a tenant's key is refused (403)."""
        if not self.enabled:
            return
        presented = _bearer(authorization)
        if self.admin and hmac.compare_digest(presented, self.admin):
            return
        self.tenant_for(authorization)  # 401 for a key nobody issued
        raise ForbiddenError(
            "this job runs over every tenant and needs the operator key: set "
            "SLEEPMEM_ADMIN_KEY on the server and send it as the bearer key"
        )

    @staticmethod
    def check_tenant(tenant: str | None, events: Sequence[EventFields]) -> None:
        """Refuse the whole request if any event belongs to another tenant."""
        if tenant is None:
            return
        for i, event in enumerate(events):
            if event["tenant"] != tenant:
                raise ForbiddenError(
                    f"events[{i}].tenant: this API key may only write tenant {tenant!r}"
                )


def _bearer(authorization: str | None) -> bytes:
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthError("no API key was sent")
    return token.strip().encode()


async def caller_tenant(request: Request) -> str | None:
    """FastAPI dependency: the caller's tenant (None = auth off), or 401.

    ``async`` although it awaits nothing: FastAPI runs plain ``def`` dependencies in a
    thread pool, a hop that cost more than the whole ingest.
    """
    keyring: KeyRing = request.app.state.keyring
    return keyring.tenant_for(request.headers.get("authorization"))


async def operator(request: Request) -> None:
    """FastAPI dependency: the caller holds the operator key (or auth is off), else 401/403."""
    keyring: KeyRing = request.app.state.keyring
    keyring.check_operator(request.headers.get("authorization"))


CallerTenant = Annotated[str | None, Depends(caller_tenant)]
Operator = Depends(operator)
