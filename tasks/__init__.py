"""Thin Celery tasks: validate ids, take a lease, build ports, call a pipeline, retry."""

# This folder is the package sleepmem.tasks. From the repository root it is also
# importable as `tasks`, and loaded under that second name its modules would run again
# beside those of sleepmem.tasks: two copies of every class, whose isinstance checks fail
# across them. Say so before anything runs.
if __name__ != "sleepmem.tasks":
    raise ImportError(
        f"the folder tasks/ is the package sleepmem.tasks: import sleepmem.tasks"
        f" (or sleepmem.tasks.<module>), not {__name__}"
    )
