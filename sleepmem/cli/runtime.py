"""Process commands: ``serve`` (embedded, all in one) or ``api`` / ``worker`` / ``scheduler``
(distributed, one role per process), plus ``consolidate`` and the quick-start ``demo``."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import orjson
import typer

from sleepmem.cli.app import app, fail, load_settings
from sleepmem.cli.remote import require_local_store, running_server
from sleepmem.core.errors import SleepmemError
from sleepmem.core.tracing import configure_from_env as configure_tracing_from_env
from sleepmem.tasks import names

if TYPE_CHECKING:
    from sleepmem.core.settings import Settings


@app.command()
def serve() -> None:
    """Embedded mode: API, worker, drain and scheduler in this process until Ctrl-C."""
    # deferred: FastAPI, uvicorn and Celery load only for the commands that serve
    from sleepmem.core.indexowner import own_index
    from sleepmem.runtime import serve as run

    settings = load_settings()
    try:
        owner = own_index(settings, "serve")
        run(settings, announce=typer.echo)
    except SleepmemError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if owner is not None:
        owner.release()


def _distributed(role: str) -> Settings:
    return load_settings(role=role)


@app.command()
def api() -> None:
    """The HTTP ingest and search API alone (distributed mode)."""
    # deferred: FastAPI, uvicorn and Celery load only for the commands that serve
    from sleepmem.api.app import create_app
    from sleepmem.api.serving import serve_api
    from sleepmem.core.indexowner import own_index
    from sleepmem.core.localkey import prepare_auth, publish_local_key, server_url
    from sleepmem.resources import build_resources

    try:
        setup = prepare_auth(_distributed("api"))
        # Held for the process's life: a second api on the same embedded index is refused.
        owner = own_index(setup.settings, "api")
    except SleepmemError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    settings = setup.settings
    configure_tracing_from_env("sleepmem-api")
    key = publish_local_key(setup, server_url(settings))
    if key is not None and setup.created:
        typer.echo(f"generated an API key for tenant {key.tenant!r} in {key.path}: {key.key}")
    resources = build_resources(settings)
    app = create_app(resources=resources)
    try:
        # Freezes the start-up heap once the app's lifespan has run (see api.serving).
        serve_api(app, host=settings.host, port=settings.port)
    finally:
        resources.shutdown()
        if owner is not None:
            owner.release()


@app.command()
def worker(
    queues: Annotated[str, typer.Option(help="Comma-separated queues to consume.")] = ",".join(
        names.QUEUES
    ),
    concurrency: Annotated[int, typer.Option(help="Pool size; 0 = one per core.")] = 0,
    pool: Annotated[str, typer.Option(help="prefork (default), threads or solo.")] = "prefork",
    metrics_port: Annotated[
        int, typer.Option(help="Serve this worker's Prometheus metrics on this port; 0 = off.")
    ] = 0,
) -> None:
    """A Celery worker (distributed mode); clients are built in each pool process."""
    # deferred: FastAPI, uvicorn and Celery load only for the commands that serve
    # The metrics directory was prepared at start-up (sleepmem.cli), before prometheus_client
    # was first imported: it picks where values live at that moment.
    from sleepmem.core.indexowner import refuse_worker
    from sleepmem.workers.app import create_celery_from_env

    settings = _distributed("worker")
    unknown = set(queues.split(",")) - set(names.QUEUES)
    if unknown:
        raise typer.BadParameter(f"unknown queues {sorted(unknown)}; known: {names.QUEUES}")
    try:
        refuse_worker(settings, names.INDEX_QUEUES.intersection(queues.split(",")))
    except SleepmemError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    argv = [
        "--quiet",  # no ASCII banner: the process's output stays one JSON object per line
        "worker",
        f"--pool={pool}",
        f"--queues={queues}",
        f"--loglevel={settings.log_level}",
        "--without-gossip",
        "--without-mingle",
    ]
    if concurrency > 0:
        argv.append(f"--concurrency={concurrency}")
    celery = create_celery_from_env()
    if metrics_port:
        from sleepmem.workers.metrics import serve_metrics

        serve_metrics(port=metrics_port, host=settings.host)
    celery.worker_main(argv)




@app.command()
def scheduler() -> None:
    """The scheduler (distributed mode): run several; one leads, the others stand by."""
    # deferred: FastAPI, uvicorn and Celery load only for the commands that serve
    from sleepmem.resources import build_resources
    from sleepmem.runtime import shutdown_requested, wait_for
    from sleepmem.schedules.leader import LeaderElector
    from sleepmem.schedules.scheduler import Scheduler, celery_sender
    from sleepmem.workers.app import create_celery

    settings = _distributed("scheduler")
    configure_tracing_from_env("sleepmem-scheduler")
    resources = build_resources(settings)
    celery = create_celery(settings, broker_url=resources.broker_url)
    # Jobs a dead process left queued or running: re-queued (idempotent, leased) or failed
    # with how to resume them, so none sits in 'queued' for ever.
    from sleepmem.services import recover_jobs

    send = celery_sender(celery)
    recover_jobs(resources, lambda job_id: send(names.RECONSOLIDATE, args=(job_id,)))
    elector = LeaderElector(
        resources.redis, resources.keys.scheduler_leader, ttl_s=settings.leader_ttl_seconds
    )
    running = Scheduler(
        resources=resources,
        send=celery_sender(celery),
        elector=elector,
        available=set(celery.tasks),
    )
    with shutdown_requested() as requested:
        running.start()
        try:
            wait_for(requested)
        finally:
            running.stop()
            resources.shutdown()


@app.command()
def consolidate(
    scope: Annotated[str, typer.Option(help="Canonical scope key, e.g. t=acme/a=bot/u=ann/p=/s=")],
) -> None:
    """Consolidate one scope now, in this process, under the same lease as the workers."""
    # deferred: the models, stores and pipeline take ~1 s to import
    from sleepmem.models import Scope
    from sleepmem.pipelines.write.consolidate import consolidate_scope
    from sleepmem.resources import build_resources
    from sleepmem.services import run_consolidation

    try:
        parsed = Scope.parse_key(scope, field="scope")  # before any store is opened or started
    except SleepmemError as exc:
        raise fail(exc) from exc
    settings = load_settings()
    try:
        server = running_server(settings, tenant=parsed.tenant)
        if server is None:
            require_local_store(settings)
    except SleepmemError as exc:
        raise fail(exc) from exc
    if server is not None:
        # The running server holds the stores: it consolidates, under the same lease.
        try:
            with server:
                typer.echo(orjson.dumps(server.consolidate(scope)).decode())
        except SleepmemError as exc:
            raise fail(exc) from exc
        return
    resources = build_resources(settings)
    try:
        report = run_consolidation(
            resources, scope_key=scope, pipeline=consolidate_scope, worker="cli"
        )
    except SleepmemError as exc:
        raise fail(exc) from exc
    finally:
        resources.shutdown()
    typer.echo(
        orjson.dumps(
            {"events": report.events, "ops": report.ops, "stage_seconds": report.stage_seconds}
        ).decode()
    )


@app.command()
def demo(
    timeout: Annotated[float, typer.Option(help="Seconds to wait for each step.")] = 120.0,
) -> None:
    """The quick-start demo: embedded runtime in a temp directory, one conversation.

    Plays a short conversation through the SDK, shows the drain and the sleep-time
    consolidation, and stops everything.
    """
    # deferred: FastAPI, uvicorn and Celery load only for the commands that serve
    from sleepmem.core.logs import configure_logging
    from sleepmem.demo import demo_settings, render, run_demo

    with tempfile.TemporaryDirectory(prefix="sleepmem-demo-") as tmp:
        settings = demo_settings(Path(tmp) / "data")
        configure_logging(level=settings.log_level, json=settings.log_json)
        report = run_demo(settings, timeout=timeout)
    for line in render(report):
        typer.echo(line)
    if report.drain_s is None or report.consolidated_s is None or report.secret_in_raw_log:
        raise typer.Exit(1)
