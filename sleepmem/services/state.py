"""Shared state as gauges, read when /metrics is scraped."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import redis as redis_lib
import sqlalchemy as sa
from prometheus_client.core import GaugeMetricFamily, Metric
from sqlmodel import Session, col

from sleepmem.core.keys import DRAIN_GROUP
from sleepmem.models import (
    IndexState,
    Job,
    Memory,
    ScopeState,
)
from sleepmem.resources import Resources


class StateCollector:
    """Gauges of shared state, read from Redis and SQL when /metrics is scraped.

    One value for the whole service whichever process answers: the stream's length, the
    drain group's lag (entries not yet delivered) and pending entries (delivered, not yet
    acknowledged), jobs by kind and status, and the memories the index reconciler has yet
    to push. A store that does not answer is reported by ``sleepmem_state_up`` = 0 rather
    than failing the scrape.
    """

    def __init__(self, resources: Resources) -> None:
        self.resources = resources

    def collect(self) -> Iterator[Metric]:
        res = self.resources
        up = GaugeMetricFamily(
            "sleepmem_state_up", "Whether a store answered this scrape.", labels=["store"]
        )
        try:
            yield from self._stream(res)
            up.add_metric(["redis"], 1)
        except Exception:
            up.add_metric(["redis"], 0)
        try:
            yield from self._sql(res)
            up.add_metric(["sql"], 1)
        except Exception:
            up.add_metric(["sql"], 0)
        yield up

    @staticmethod
    def _stream(res: Resources) -> Iterator[Metric]:
        length = int(res.redis.xlen(res.keys.events))
        lag = pending = 0
        try:
            groups = res.redis.xinfo_groups(res.keys.events)
        except redis_lib.ResponseError:  # no stream yet: nothing is behind
            groups = []
        for group in groups:
            if str_of(group.get("name")) == DRAIN_GROUP:
                pending = int(group.get("pending") or 0)
                # None when Redis cannot tell (entries deleted mid-range): count the stream.
                raw_lag = group.get("lag")
                lag = int(raw_lag) if raw_lag is not None else length
        yield GaugeMetricFamily(
            "sleepmem_stream_length", "Entries in the event stream.", value=length
        )
        yield GaugeMetricFamily(
            "sleepmem_stream_lag", "Stream entries the drain group has not read yet.", value=lag
        )
        yield GaugeMetricFamily(
            "sleepmem_stream_pending",
            "Stream entries delivered to a drain consumer and not yet acknowledged.",
            value=pending,
        )

    @staticmethod
    def _sql(res: Resources) -> Iterator[Metric]:
        jobs = GaugeMetricFamily(
            "sleepmem_jobs", "Operator jobs by kind and status.", labels=["kind", "status"]
        )
        with Session(res.engine) as session:
            rows = session.execute(
                sa.select(col(Job.kind), col(Job.status), sa.func.count()).group_by(
                    col(Job.kind), col(Job.status)
                )
            ).all()
            backlog = session.execute(
                sa.select(sa.func.count())
                .select_from(Memory)
                .where(col(Memory.index_state) == IndexState.pending.value)
            ).scalar_one()
            dirty = session.execute(
                sa.select(sa.func.count())
                .select_from(ScopeState)
                .where(col(ScopeState.pending_count) > 0)
            ).scalar_one()
        for kind, status, n in rows:
            jobs.add_metric([str(kind), str(status)], int(n))
        yield jobs
        yield GaugeMetricFamily(
            "sleepmem_index_backlog",
            "Memories written to SQL and not yet in the vector index (reconciler backlog).",
            value=int(backlog),
        )
        yield GaugeMetricFamily(
            "sleepmem_scopes_pending",
            "Scopes with drained events waiting for consolidation.",
            value=int(dirty),
        )


def str_of(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
