"""Consolidation stages and lifecycle pipelines: plain functions over typed batches.

No Celery, no Redis, no global state: ports are passed in.
"""

# This folder is the package sleepmem.pipelines. From the repository root it is also
# importable as `pipelines`, and loaded under that second name its modules would run again
# beside those of sleepmem.pipelines: two copies of every class, whose isinstance checks fail
# across them. Say so before anything runs.
if __name__ != "sleepmem.pipelines":
    raise ImportError(
        f"the folder pipelines/ is the package sleepmem.pipelines: import sleepmem.pipelines"
        f" (or sleepmem.pipelines.<module>), not {__name__}"
    )

# Written into every audit row, so an operator can tell which logic made a memory.
PIPELINE_VERSION = "1"
