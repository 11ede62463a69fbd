"""Keyed pseudonyms for what an erasure leaves in the audit: after a scope is erased its
audit rows name it, and the client event ids they quote, by HMAC pseudonyms, since a user,
project, session or event id may be an e-mail address or a phone number."""

from __future__ import annotations

import hashlib
import hmac

from sleepmem.models import LEVELS

# Levels whose ids may name a person (an address, a phone number): hashed in the audit.
# Tenant and agent are the operator's own names and stay readable.
PSEUDONYMOUS = ("u", "p", "s")
# No id may start with it (models.scope.IDENT), so a pseudonym is never hashed twice.
PSEUDONYM_MARK = "~"


def pseudonym(scope_key: str, *, key: bytes) -> str:
    """``scope_key`` with its user, project and session ids replaced by ``~`` and 32 hex
    digits of HMAC-SHA256(key, tenant/level=id): stable (every row of one user gets the
    same one), not reversible without the key, and different in another tenant."""
    parts = [p.partition("=") for p in scope_key.split("/")]
    tenant = next((value for level, _eq, value in parts if level == "t"), "")
    out = []
    for level, eq, value in parts:
        if level in PSEUDONYMOUS and value and not value.startswith(PSEUDONYM_MARK):
            message = f"{tenant}/{level}={value}".encode()
            value = PSEUDONYM_MARK + hmac.new(key, message, hashlib.sha256).hexdigest()[:32]
        out.append(f"{level}{eq}{value}")
    return "/".join(out)


def key_levels(scope_key: str) -> dict[str, str]:
    by_letter = dict(p.partition("=")[::2] for p in scope_key.split("/"))
    return {lvl: by_letter.get(lvl[0], "") for lvl in LEVELS}


def event_pseudonym(tenant: str, event_id: str, *, key: bytes) -> str:
    """A client's event id as the audit keeps it after an erasure: ids are the client's to
    choose and may hold an address, so they go the way of the scope's ids."""
    if event_id.startswith(PSEUDONYM_MARK):
        return event_id
    message = f"{tenant}/event={event_id}".encode()
    return PSEUDONYM_MARK + hmac.new(key, message, hashlib.sha256).hexdigest()[:32]
