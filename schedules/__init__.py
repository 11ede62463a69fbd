"""APScheduler jobs behind a leader lock; each job only enqueues Celery tasks."""

# This folder is the package sleepmem.schedules. From the repository root it is also
# importable as `schedules`, and loaded under that second name its modules would run again
# beside those of sleepmem.schedules: two copies of every class, whose isinstance checks fail
# across them. Say so before anything runs.
if __name__ != "sleepmem.schedules":
    raise ImportError(
        f"the folder schedules/ is the package sleepmem.schedules: import sleepmem.schedules"
        f" (or sleepmem.schedules.<module>), not {__name__}"
    )
