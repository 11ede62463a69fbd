"""The use-cases: what a task, the HTTP API, the CLI, the demo and the benches all run.

Each takes the process's :class:`~sleepmem.resources.Resources` and plain arguments, takes
the leases its work needs, and calls a pipeline with ports built from those resources.
Transport (Celery retries, HTTP status codes, CLI exit codes) stays with the callers.

One module per use-case; every public name is re-exported here, so callers import from
``sleepmem.services`` whichever module holds it:

- :mod:`.drain`: the raw-event log filled from the stream;
- :mod:`.consolidate`: a scope's consolidation under its lease;
- :mod:`.jobs`: scheduled maintenance and the operator's jobs (re-consolidation, cancel,
  recovery at start-up), with :mod:`.job_rows` for how a job row ends;
- :mod:`.erasure`: erasure jobs and making the erased bytes leave every store;
- :mod:`.memories`: a person's reads, edits, pins, feedback and conflict settlements;
- :mod:`.state`: the shared state /metrics reports.
"""

from __future__ import annotations

from sleepmem.services.consolidate import (
    ConsolidatePipeline,
    consolidate_now,
    run_consolidation,
)
from sleepmem.services.drain import drain_until_empty
from sleepmem.services.erasure import (
    ERASE_KIND,
    create_erase_job,
    purge_postgres,
    reach_every_byte,
    run_erasure,
)
from sleepmem.services.job_rows import give_up
from sleepmem.services.jobs import (
    CANCEL_TTL_S,
    HITS_PER_REFRESH,
    SWEEP_RESULT_KINDS,
    MaintenanceJob,
    cancel_job,
    reconcile_job,
    recover_jobs,
    refresh_job,
    run_maintenance,
    run_reconsolidation,
    sweep_job,
)
from sleepmem.services.memories import (
    HELPFUL_STEP,
    LIST_MAX,
    get_memory,
    list_memories,
    memory_feedback,
    memory_history,
    pin_memory,
    resolve_conflict,
    update_memory,
)
from sleepmem.services.state import StateCollector, str_of

__all__ = [
    "CANCEL_TTL_S",
    "ERASE_KIND",
    "HELPFUL_STEP",
    "HITS_PER_REFRESH",
    "LIST_MAX",
    "SWEEP_RESULT_KINDS",
    "ConsolidatePipeline",
    "MaintenanceJob",
    "StateCollector",
    "cancel_job",
    "consolidate_now",
    "create_erase_job",
    "drain_until_empty",
    "get_memory",
    "give_up",
    "list_memories",
    "memory_feedback",
    "memory_history",
    "pin_memory",
    "purge_postgres",
    "reach_every_byte",
    "reconcile_job",
    "recover_jobs",
    "refresh_job",
    "resolve_conflict",
    "run_consolidation",
    "run_erasure",
    "run_maintenance",
    "run_reconsolidation",
    "str_of",
    "sweep_job",
    "update_memory",
]
