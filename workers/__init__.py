"""Celery app factory and per-process resources."""

# This folder is the package sleepmem.workers. From the repository root it is also
# importable as `workers`, and loaded under that second name its modules would run again
# beside those of sleepmem.workers: two copies of every class, whose isinstance checks fail
# across them. Say so before anything runs.
if __name__ != "sleepmem.workers":
    raise ImportError(
        f"the folder workers/ is the package sleepmem.workers: import sleepmem.workers"
        f" (or sleepmem.workers.<module>), not {__name__}"
    )
