"""Scheduled and operator pipelines: forgetting, refresh, re-consolidation, erasure, explain."""
