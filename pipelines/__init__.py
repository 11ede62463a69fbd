"""Consolidation stages and lifecycle pipelines: plain functions over typed batches.

No Celery, no Redis, no global state: ports are passed in.
"""
