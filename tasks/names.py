"""Task names and their queues, in one place.

The scheduler enqueues by name (``send_task``), so a name is the contract between a
schedule and the task that serves it, even before that task exists.
"""

from __future__ import annotations

DRAIN = "sleepmem.drain"
CONSOLIDATE = "sleepmem.consolidate"
SWEEP = "sleepmem.sweep"
REFRESH = "sleepmem.refresh"
RECONCILE = "sleepmem.reconcile"
INDEX_MAINTENANCE = "sleepmem.index_maintenance"
RECONSOLIDATE = "sleepmem.reconsolidate"
ERASE = "sleepmem.erase"
CHECKPOINTS = "sleepmem.checkpoints"

QUEUE_DRAIN = "drain"
QUEUE_CONSOLIDATE = "consolidate"
QUEUE_MAINTENANCE = "maintenance"
QUEUES: tuple[str, ...] = (QUEUE_DRAIN, QUEUE_CONSOLIDATE, QUEUE_MAINTENANCE)
# Queues whose tasks read or write the vector index (consolidation, sweeps, erasure, jobs);
# the drain only moves events from Redis to SQL.
INDEX_QUEUES: frozenset[str] = frozenset({QUEUE_CONSOLIDATE, QUEUE_MAINTENANCE})

# Anything not listed here runs on the maintenance queue (the app's default queue), so a
# new lifecycle task needs no routing entry.
ROUTES: dict[str, str] = {DRAIN: QUEUE_DRAIN, CONSOLIDATE: QUEUE_CONSOLIDATE}

# Slot of the ``task_once`` key that coalesces queued drains (set by the tick, cleared by
# the drain task when it starts).
DRAIN_QUEUED_SLOT = "queued"
