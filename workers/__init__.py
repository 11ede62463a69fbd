"""Celery app factory and per-process resources."""
