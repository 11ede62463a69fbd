"""Consolidation stages and lifecycle pipelines: plain functions over typed batches.

No Celery, no Redis, no global state: ports are passed in.
"""

# Written into every audit row, so an operator can tell which logic made a memory.
PIPELINE_VERSION = "1"
