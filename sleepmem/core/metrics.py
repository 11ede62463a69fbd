"""The service's Prometheus metrics: the metric objects, and how a process renders them.

The layers that do the work increment these (the API counts what it accepts, the drain
what it moves, the consolidation service its runs and ops). Label values come from fixed
vocabularies (a stage name, an op kind, a rejection reason, a configured model name),
never from content, tenants or user ids, so the series count stays bounded.

Prefork Celery workers: each child counts in its own process. With
``PROMETHEUS_MULTIPROC_DIR`` set before ``prometheus_client`` is imported, every process
writes its values to files in that directory and :func:`render` sums them, so one scrape
sees the whole worker. Without it (the embedded ``serve``, the API alone, tests), values
live in this process and :func:`render` reads the default registry.

Gauges that describe shared state (stream lag, pending entries, job states, the index
backlog) are not kept here: they are read from Redis and SQL at scrape time by a
collector the serving layer passes to :func:`render` (one value for the whole service,
whichever process is scraped).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.registry import Collector

CONTENT_TYPE = CONTENT_TYPE_LATEST
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

# -- ingest -----------------------------------------------------------------------------

EVENTS_ACCEPTED = Counter(
    "sleepmem_events_accepted", "Events the API accepted into the stream."
)
EVENTS_REJECTED = Counter(
    "sleepmem_events_rejected",
    "Events (or requests) the API refused, by reason: invalid, unauthorized, forbidden, "
    "unavailable.",
    ("reason",),
)
EVENTS_DRAINED = Counter(
    "sleepmem_events_drained",
    "Stream entries the drain settled, by outcome: inserted (a new raw_event row) or "
    "duplicate (the event id was already in the raw log).",
    ("outcome",),
)
EVENTS_DEAD_LETTERED = Counter(
    "sleepmem_events_dead_lettered", "Stream entries moved to dead_letter after failing."
)

# -- consolidation ----------------------------------------------------------------------

CONSOLIDATION_RUNS = Counter(
    "sleepmem_consolidation_runs",
    "Consolidation runs, by outcome: ok, deferred (lease held), retry (transient), failed.",
    ("outcome",),
)
CONSOLIDATION_EVENTS = Counter(
    "sleepmem_consolidation_events", "Raw events consolidated by successful runs."
)
STAGE_SECONDS = Histogram(
    "sleepmem_consolidation_stage_seconds",
    "Seconds one consolidation run spent in a pipeline stage.",
    ("stage",),
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
MEMORY_OPS = Counter(
    "sleepmem_memory_ops",
    "Write decisions on candidates, by op: ADD, UPDATE, NOOP, CONFLICT, DELETE, REJECT.",
    ("op",),
)
OP_KINDS = ("ADD", "UPDATE", "NOOP", "CONFLICT", "DELETE", "REJECT")

# -- models -----------------------------------------------------------------------------

LLM_CALLS = Counter(
    "sleepmem_llm_calls", "Chat model calls, by model and outcome.", ("model", "outcome")
)
LLM_TOKENS = Counter(
    "sleepmem_llm_tokens", "Chat model tokens, by model and kind.", ("model", "kind")
)

# -- reading and lifecycle --------------------------------------------------------------

SEARCH_SECONDS = Histogram(
    "sleepmem_search_seconds",
    "Seconds one search took inside the service (ranking; its hits are written after).",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)
HITS_NOT_RECORDED = Counter(
    "sleepmem_hits_not_recorded",
    "Retrieval hits (memory ids) not written, by reason: erasure (the search may have seen "
    "an erased memory), backlog (the writer fell behind), redis (unreachable).",
    ("reason",),
)
SWEEP_RESULTS = Counter(
    "sleepmem_sweep_memories",
    "Memories the forgetting sweep acted on, by result: scanned, expired, demoted, "
    "archived, evicted, deleted.",
    ("result",),
)
MAINTENANCE_RUNS = Counter(
    "sleepmem_maintenance_runs",
    "Scheduled maintenance runs (sweep, refresh, reconcile), by job and outcome.",
    ("job", "outcome"),
)
JOBS_FINISHED = Counter(
    "sleepmem_jobs_finished",
    "Operator jobs (reconsolidate, erase) that ended, by kind and status.",
    ("kind", "status"),
)


def multiprocess_dir() -> str | None:
    return os.environ.get(MULTIPROC_ENV) or None


def render(extra: Iterable[Collector] = ()) -> bytes:
    """This process's (or, in multiprocess mode, every process's) metrics, in the
    Prometheus text format, followed by the scrape-time ``extra`` collectors."""
    if multiprocess_dir():
        from prometheus_client import multiprocess

        base = CollectorRegistry()
        multiprocess.MultiProcessCollector(base)  # type: ignore[no-untyped-call]
        body = generate_latest(base)
    else:
        body = generate_latest(REGISTRY)
    collectors = list(extra)
    if collectors:
        scraped = CollectorRegistry(auto_describe=False)
        for collector in collectors:
            scraped.register(collector)
        body += generate_latest(scraped)
    return body


def value(metric: Any, **labels: str) -> float:
    """A counter's count (a histogram's number of observations) in this process for these
    label values, summed over the labels not named: what tests compare before and after."""
    total = 0.0
    for family in metric.collect():
        wanted = {f"{family.name}_total", f"{family.name}_count", family.name}
        for sample in family.samples:
            if sample.name not in wanted:
                continue
            if all(sample.labels.get(k) == str(v) for k, v in labels.items()):
                total += sample.value
    return total
