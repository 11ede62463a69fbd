"""The key of the audit's pseudonyms (docs/security.md "Erasure").

After an erasure the audit keeps its rows, with the user, project and session of their
scope keys replaced by HMAC-SHA256 digests under this key. Keyed, not a plain or salted
hash: user ids are often e-mail addresses, which anyone holding the database could hash
from a list of guesses and match; without the key they cannot, while an operator holding
it can still answer "was this user erased, and when?" by computing the same digest.

``SLEEPMEM_AUDIT_KEY`` names it (set the same value in every process of a distributed
deployment). Unset, a random key is created once in ``<data dir>/audit-key`` (mode 0600),
which suits the embedded mode's single process and data directory.
"""

from __future__ import annotations

import os
import secrets
import uuid
from pathlib import Path

from sleepmem.core.errors import ConfigurationError
from sleepmem.core.settings import Settings

KEY_FILE = "audit-key"


def audit_key(settings: Settings) -> bytes:
    configured = settings.audit_key.get_secret_value()
    if configured:
        return configured.encode()
    path = settings.data_dir / KEY_FILE
    found = _read(path)
    if found is not None:
        return found
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(32)
    # Written aside, then linked into place: a process racing us either wins the link (and
    # we read its key) or finds the whole file, never a half-written one.
    tmp = path.with_name(f".{KEY_FILE}.{uuid.uuid4().hex}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key.hex())
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    found = _read(path)
    if found is None:
        raise ConfigurationError(f"cannot create the audit key file {path}")
    return found


def _read(path: Path) -> bytes | None:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise ConfigurationError(
            f"the audit key file {path} is damaged; restore it (or set SLEEPMEM_AUDIT_KEY)"
        ) from None
