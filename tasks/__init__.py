"""Thin Celery tasks: validate ids, take a lease, build ports, call a pipeline, retry."""
