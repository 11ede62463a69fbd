"""One process per embedded index.

The edge index and Qdrant's local mode are files that one process opens: a second process
writing them fails ("WAL: WouldBlock") or reads a stale copy. ``sleepmem serve`` runs every
role in one process; a distributed role that would open the embedded index either owns it
alone (``sleepmem api``, held by an exclusive lock for the process's life) or is refused at
start with what to set instead (``sleepmem worker`` consuming queues that write the index).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterable

from sleepmem.core.errors import ConfigurationError
from sleepmem.core.settings import Settings

EMBEDDED_BACKENDS = frozenset({"edge", "qdrant-local"})
LOCK_FILE = "index.owner.lock"

_FIX = (
    "set SLEEPMEM_QDRANT_URL to a Qdrant server (and unset SLEEPMEM_INDEX_BACKEND), or run "
    "`sleepmem serve` for every role in one process"
)


def embedded_index(settings: Settings) -> bool:
    return settings.vector_backend in EMBEDDED_BACKENDS


def refuse_worker(settings: Settings, index_queues: Iterable[str]) -> None:
    """A worker consuming ``index_queues`` (queues whose tasks open the index) is refused
    on an embedded index: its pool processes and the API would each open it."""
    touching = sorted(index_queues)
    if embedded_index(settings) and touching:
        raise ConfigurationError(
            f"`sleepmem worker` on queues {', '.join(touching)} would open the embedded "
            f"{settings.vector_backend} index, which only one process may open; {_FIX} "
            "(a worker with --queues drain alone is allowed)"
        )


class IndexOwnership:
    """An exclusive lock on the embedded index's data directory, held until ``release``."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing the descriptor drops the lock
            self._fd = -1


def own_index(settings: Settings, role: str) -> IndexOwnership | None:
    """Take the embedded index for this process, or refuse when another process has it.
    None when the index is a server (any number of processes may use it)."""
    if not embedded_index(settings):
        return None
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(settings.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ConfigurationError(
            f"`sleepmem {role}`: another process already owns the embedded "
            f"{settings.vector_backend} index of this data directory; {_FIX}"
        ) from None
    return IndexOwnership(fd)
