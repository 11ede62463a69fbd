"""Every Redis key sleepmem keeps, in one place (the arq pattern).

All keys live under the configured namespace so that a test run, or two deployments on
one Redis, never touch each other's keys. Nothing here holds event content for longer
than the drain needs; scope-bound keys embed a hash of the scope, never its names.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

DRAIN_GROUP = "drain"


def scope_digest(scope_key: str) -> str:
    return hashlib.blake2b(scope_key.encode(), digest_size=12).hexdigest()


@dataclass(frozen=True, slots=True)
class Keys:
    namespace: str

    @property
    def events(self) -> str:
        """The ingest stream every emit appends to."""
        return f"{self.namespace}:events"

    @property
    def hits(self) -> str:
        """Stream of retrieval hits, applied to SQL by the refresh task."""
        return f"{self.namespace}:hits"

    @property
    def hits_epoch(self) -> str:
        """A counter every erasure of hits bumps first: a hit read under an older value is
        of a search that may have seen an erased memory, and is dropped (hits.py)."""
        return f"{self.namespace}:hits:epoch"

    @property
    def scheduler_leader(self) -> str:
        return f"{self.namespace}:scheduler:leader"

    @property
    def celery_prefix(self) -> str:
        return f"{self.namespace}:celery:"

    def lease(self, scope_key: str) -> str:
        """Held while one consolidation of the scope runs: never two at once."""
        return f"{self.namespace}:lease:consolidate:{scope_digest(scope_key)}"

    def trace(self, scope_key: str) -> str:
        """The newest traced emit's context of a scope (traceparent), for its trigger."""
        return f"{self.namespace}:trace:{scope_digest(scope_key)}"

    def queued(self, scope_key: str) -> str:
        """Set while a consolidation of the scope is queued, to coalesce triggers."""
        return f"{self.namespace}:queued:consolidate:{scope_digest(scope_key)}"

    def again(self, scope_key: str) -> str:
        """Set when a consolidation of the scope was asked for while one was queued or
        running: the running one sends the next as soon as its lease frees."""
        return f"{self.namespace}:again:consolidate:{scope_digest(scope_key)}"

    def job_lease(self, job_id: str) -> str:
        return f"{self.namespace}:lease:job:{job_id}"

    def job_cancel(self, job_id: str) -> str:
        return f"{self.namespace}:cancel:job:{job_id}"

    def task_once(self, name: str, slot: str) -> str:
        """Dedup key for a scheduled enqueue, so a double fire is harmless."""
        return f"{self.namespace}:once:{name}:{slot}"

    def checkpoint(self, digest: str) -> str:
        """Hash of a session's working-memory checkpoint (by ``scope_digest`` of the session's
        scope key): version, document, end time."""
        return f"{self.namespace}:ckpt:{digest}"

    def checkpoint_history(self, digest: str) -> str:
        """List of a session's latest checkpoint documents, newest first (trimmed)."""
        return f"{self.namespace}:ckpt:h:{digest}"

    @property
    def checkpoints_dirty(self) -> str:
        """Sorted set: digests of checkpoints written since their last SQL mirror."""
        return f"{self.namespace}:ckpt:dirty"

    def pattern(self) -> str:
        return f"{self.namespace}:*"
