"""The worker's metrics port: every pool process's counters, summed, on one HTTP port.

Started in the worker's main process before the pool forks; the children count into
``PROMETHEUS_MULTIPROC_DIR`` and this server reads all their files on each scrape. The
shared-state gauges (stream lag, jobs, index backlog) are the API's ``/metrics``: the
main process of a prefork worker holds no clients to read them with.
"""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, start_http_server

from sleepmem.core.errors import ConfigurationError
from sleepmem.core.logs import get_logger
from sleepmem.core.metrics import MULTIPROC_ENV, multiprocess_dir

log = get_logger("sleepmem.worker.metrics")


def serve_metrics(*, port: int, host: str = "0.0.0.0") -> None:
    if multiprocess_dir() is None:
        raise ConfigurationError(
            f"{MULTIPROC_ENV} must be set before the worker starts, so that every pool "
            "process's metrics can be summed"
        )
    from prometheus_client import multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    start_http_server(port, addr=host, registry=registry)
    log.info("metrics_serving", port=port, pid=os.getpid())


def mark_process_dead(pid: int) -> None:
    """A pool process exited: drop its live-gauge files (counters stay summed)."""
    if multiprocess_dir() is not None:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
