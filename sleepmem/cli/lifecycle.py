"""Lifecycle commands: ``sweep``, ``refresh``, ``reconsolidate``, ``jobs``, ``forget``,
``explain``, and the ``bench sweep`` / ``bench reconsolidate`` benchmarks.

When a server of these stores is running, each asks it over the API (the server holds
the embedded index; a second process could not open it). Otherwise each runs in this
process against the configured stores, under the same leases the workers take, so running
one by hand while workers run is safe.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.table import Table

from sleepmem.cli.app import app, bench_app, fail, load_settings
from sleepmem.cli.remote import require_local_store, running_server
from sleepmem.core.errors import SleepmemError, ValidationError

if TYPE_CHECKING:
    from sleepmem.resources import Resources
    from sleepmem.services import MaintenanceJob

# The stores, pipelines, services and models are imported inside the commands that use
# them (deferred: together they take ~1 s to import, paid by every `sleepmem` command,
# `--help` included, if imported here).

console = Console()


@contextmanager
def _resources(log_level: str | None = "WARNING") -> Iterator[Resources]:
    """The process's stores, when they exist (none is created to be acted on); any
    sleepmem error becomes a message and an exit code."""
    # deferred: the stores and services take ~1 s to import (see the note at the top)
    from sleepmem.resources import build_resources

    settings = load_settings(log_level)
    try:
        require_local_store(settings)
    except SleepmemError as exc:
        raise fail(exc) from exc
    res = build_resources(settings)
    try:
        yield res
    except SleepmemError as exc:
        raise fail(exc) from exc
    finally:
        res.shutdown()


@contextmanager
def _remote(tenant: str | None = None) -> Iterator[Any]:
    """The running server's client (None when no server answers); errors become exits,
    a configured server that does not answer among them."""
    try:
        client = running_server(load_settings("WARNING"), tenant=tenant)
    except SleepmemError as exc:
        raise fail(exc) from exc
    try:
        yield client
    except SleepmemError as exc:
        raise fail(exc) from exc
    finally:
        if client is not None:
            client.close()


def _echo_json(value: Any) -> None:
    typer.echo(orjson.dumps(value, default=str).decode())


def _parse_time(text: str | None) -> datetime | None:
    from sleepmem.models.events import aware_time

    if text is None:
        return None
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValidationError("since", f"must be an ISO time like 2026-03-01T00:00Z, got {text!r}"
                              ) from None
    try:
        # The API's rule: a time UTC cannot hold (year 1 with a positive offset) is refused
        # here, not left to fail the job (it was a traceback).
        return aware_time(t)
    except ValueError as exc:
        raise ValidationError("since", str(exc)) from None


# -- sweep / refresh ---------------------------------------------------------------------


def _maintenance(name: str, job: MaintenanceJob) -> dict[str, Any]:
    """Run a scheduled job now, under the job lease the workers take: never two at once."""
    from sleepmem.adapters.redis.locks import Lease

    with _resources() as res, Lease(res.redis, res.keys.job_lease(name),
                                     ttl_s=res.settings.lease_seconds):
        return dict(job(res, "cli"))


@app.command()
def sweep(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Run the forgetting sweep now (expire, demote, archive, evict, delete)."""
    from sleepmem.services import sweep_job
    from sleepmem.tasks import names

    with _remote() as server:
        counts = server.run_maintenance("sweep") if server is not None else None
    if counts is None:
        counts = _maintenance(names.SWEEP, sweep_job)
    if as_json:
        _echo_json(counts)
        return
    table = Table(title="forgetting sweep")
    table.add_column("action")
    table.add_column("memories", justify="right")
    for name, value in counts.items():
        table.add_row(name, str(value))
    console.print(table)


@app.command()
def refresh(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Apply recorded retrieval hits and the importance rules now."""
    from sleepmem.services import refresh_job
    from sleepmem.tasks import names

    with _remote() as server:
        counts = server.run_maintenance("refresh") if server is not None else None
    if counts is None:
        counts = _maintenance(names.REFRESH, refresh_job)
    if as_json:
        _echo_json(counts)
    else:
        typer.echo("  ".join(f"{k}={v}" for k, v in counts.items()))


# -- reconsolidate / jobs ----------------------------------------------------------------


@app.command()
def reconsolidate(
    scope: Annotated[str, typer.Option(help="Consolidation scope key, t=…/a=…/u=…/p=…/s=")],
    since: Annotated[str | None, typer.Option(help="Replay events from this ISO time.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Diff only (default).")] = False,
    apply: Annotated[bool, typer.Option("--apply", help="Swap in the new set.")] = False,
    job: Annotated[str | None, typer.Option(help="Re-run or resume this job id.")] = None,
    resume: Annotated[bool, typer.Option(help="Resume a cancelled job.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the job as JSON.")] = False,
) -> None:
    """Replay a scope's raw events through the current pipeline and show the diff."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from sleepmem.models import Scope
    from sleepmem.pipelines.lifecycle import reconsolidate as recon
    from sleepmem.services import run_reconsolidation

    if dry_run and apply:
        typer.echo("error: --dry-run and --apply exclude each other", err=True)
        raise typer.Exit(2)
    try:
        Scope.parse_key(scope, field="scope", canonical=False)
        since_time = _parse_time(since)
    except SleepmemError as exc:
        raise fail(exc) from exc
    with _remote(_tenant_of(scope)) as server:
        if server is not None:
            if resume:
                raise ValidationError("resume", "resuming a job needs the stores of this "
                                      "process: stop `sleepmem serve` first")
            done = _remote_reconsolidate(server, scope, since_time, apply, as_json)
    if server is not None:
        if as_json:
            _echo_json(done.model_dump(mode="json"))
        else:
            _print_diff(done)
        return
    with _resources() as res:
        row = recon.create_job(engine=res.engine, scope_key=scope, now=datetime.now(UTC),
                               since=since_time, apply=apply, job_id=job)
        with Progress(
            TextColumn("[bold]replay[/]"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[rate]:>8.0f} events/s"), TimeElapsedColumn(),
            TimeRemainingColumn(), console=Console(stderr=True), disable=as_json,
        ) as bar:
            task = bar.add_task("replay", total=None, rate=0.0)

            def progress(j: Any) -> None:
                bar.update(task, total=j.total, completed=j.done, rate=j.rate)

            done = run_reconsolidation(res, row.id, on_progress=progress, resume=resume,
                                       worker="cli")
    if as_json:
        _echo_json(_job_json(done))
        return
    _print_diff(done)


def _tenant_of(scope: str) -> str | None:
    from sleepmem.models import Scope

    try:
        return Scope.parse_key(scope, canonical=False).tenant
    except SleepmemError:
        return None


REMOTE_JOB_POLL_S = 0.2


def _remote_reconsolidate(
    server: Any, scope: str, since: datetime | None, apply: bool, quiet: bool
) -> Any:
    """Queue the job on the server's workers and follow it to its end."""
    import time

    job = server.reconsolidate(scope, since=since, apply=apply)
    if not quiet:
        typer.echo(f"job {job.id} queued on the running server", err=True)
    while job.status in ("queued", "running"):
        time.sleep(REMOTE_JOB_POLL_S)
        job = server.job(job.id)
    return job


def _print_diff(job: Any) -> None:
    result = job.result or {}
    counts = result.get("counts") or {}
    applied = "applied" if result.get("applied") else "dry run: nothing changed"
    console.print(f"job [bold]{job.id}[/] {job.status} — {job.done}/{job.total} events, "
                  f"{job.rate:.0f} events/s — {applied}")
    if job.status != "done":
        return
    console.print("  ".join(f"{k}={counts.get(k, 0)}" for k in
                            ("added", "removed", "changed", "unchanged", "held")))
    diff = result.get("diff") or {}
    for item in diff.get("added", []):
        console.print(f"[green]+ {item['statement']}[/]  [dim]({item['reason']})[/]")
    for item in diff.get("removed", []):
        console.print(f"[red]- {item['statement']}[/]  [dim]({item['reason']})[/]")
    for item in diff.get("changed", []):
        console.print(f"[yellow]~ {item['old_statement']}[/] → {item['statement']}  "
                      f"[dim]({item['reason']})[/]")
    if result.get("truncated"):
        console.print("[dim](diff truncated; counts are complete)[/]")


def _job_json(job: Any) -> dict[str, Any]:
    from sleepmem.pipelines.lifecycle.jobs import eta_seconds

    return {**job.model_dump(mode="json"), "eta_s": eta_seconds(job)}


@app.command()
def jobs(
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's jobs.")] = None,
    limit: Annotated[int, typer.Option(help="Most recent first.")] = 20,
    cancel: Annotated[str | None, typer.Option(help="Ask this job to stop.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
) -> None:
    """List re-consolidation and erasure jobs with their progress (or cancel one)."""
    from sleepmem.pipelines.lifecycle.jobs import eta_seconds, list_jobs
    from sleepmem.services import cancel_job

    with _remote(tenant) as server:
        if server is not None and cancel is not None:
            job = server.cancel_job(cancel)
            typer.echo(f"job {cancel}: {job.status}")
            return
        remote_rows = server.jobs(limit=limit) if server is not None else None
    if remote_rows is not None:
        rows: list[Any] = remote_rows
    else:
        with _resources() as res:
            if cancel is not None:
                job_row = cancel_job(res, cancel)
                typer.echo(f"job {cancel}: {job_row.status}")
                return
            rows = list_jobs(engine=res.engine, tenant=tenant, limit=limit)
    if as_json:
        for j in rows:
            _echo_json(_job_json(j) if remote_rows is None else j.model_dump(mode="json"))
        return
    table = Table(title="jobs")
    for name in ("id", "kind", "status", "scope", "progress", "rate/s", "eta", "created"):
        table.add_column(name)
    for j in rows:
        eta = eta_seconds(j) if remote_rows is None else j.eta_s
        table.add_row(j.id, j.kind, j.status, j.scope_key, f"{j.done}/{j.total}",
                      f"{j.rate:.0f}", "" if eta is None else f"{eta:.0f}s",
                      j.created_at.strftime("%Y-%m-%d %H:%M"))
    console.print(table)


# -- forget / explain --------------------------------------------------------------------


@app.command()
def forget(
    scope: Annotated[str | None, typer.Option(help="Erase this scope and all under it.")] = None,
    memory: Annotated[str | None, typer.Option(help="Erase this one memory.")] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
) -> None:
    """Physically erase a scope (or one memory) from every store; prints the receipt."""
    from sleepmem.models import Scope
    from sleepmem.pipelines.lifecycle.explain import explain as explain_memory
    from sleepmem.services import create_erase_job, run_erasure

    if (scope is None) == (memory is None):
        typer.echo("error: give exactly one of --scope or --memory", err=True)
        raise typer.Exit(2)
    # Everything that can be checked is checked before the question: a typo must not be
    # confirmed first and refused after.
    try:
        tenant = Scope.parse_key(scope, field="scope").tenant if scope is not None else None
        if memory is not None and not memory.strip():
            raise ValidationError("memory", "give a memory id, not an empty string")
    except SleepmemError as exc:
        raise fail(exc) from exc
    target = f"scope {scope}" if scope else f"memory {memory}"
    with _remote(tenant) as server:
        if server is None:
            _require_store()
        _confirm(f"Erase {target} from every store? This cannot be undone", yes)
        if server is not None:
            receipt = server.forget(memory, scope=scope)
            _echo_json(receipt.model_dump(mode="json"))
            return
    with _resources() as res:
        if tenant is None:
            tenant = explain_memory(engine=res.engine, memory_id=str(memory),
                                    settings=res.settings, now=datetime.now(UTC)).tenant
        row = create_erase_job(res, tenant=tenant, scope_key=scope, memory_id=memory)
        done = run_erasure(res, row.id, worker="cli")
    if done.status != "done":
        typer.echo(f"error: {done.error}", err=True)
        raise typer.Exit(1)
    _echo_json(done.result)


def _require_store() -> None:
    try:
        require_local_store(load_settings("WARNING"))
    except SleepmemError as exc:
        raise fail(exc) from exc


def _confirm(question: str, yes: bool) -> None:
    if not yes and not typer.confirm(question):
        raise typer.Exit(1)


@app.command()
def explain(
    memory_id: Annotated[str, typer.Argument(help="The memory's id.")],
    query: Annotated[str | None, typer.Option(
        help="Also show how a search for this text (from the memory's scope) finds it: "
             "the routes that found it, its rank and score in each, the rerank's terms.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Where a memory came from, every version of it, and why it is (not) current."""
    from sleepmem.pipelines.lifecycle.explain import explain as explain_memory
    from sleepmem.pipelines.read.found import found_lines
    from sleepmem.reader import explain_query

    if query is not None and not query.strip():
        typer.echo("error: query: give some text to search for, not only whitespace", err=True)
        raise typer.Exit(2)
    with _remote() as server:
        ex = server.explain(memory_id, query=query) if server is not None else None
    if ex is None:
        with _resources() as res:
            ex = explain_memory(engine=res.engine, memory_id=memory_id, settings=res.settings,
                                now=datetime.now(UTC))
            if query is not None:
                ex.query = explain_query(res, memory_id=memory_id, query=query)
    if as_json:
        typer.echo(ex.model_dump_json())
        return
    console.print(f"[bold]{ex.memory_id}[/]  {ex.scope_key}")
    console.print(f"[bold]why:[/] {ex.why}")
    if ex.query is not None:
        for line in found_lines(ex.query):
            console.print(line, markup=False, highlight=False)
    table = Table(title="versions")
    for name in ("v", "id", "status", "statement", "valid", "recorded"):
        table.add_column(name)
    for v in ex.versions:
        valid = f"{v.valid_from:%Y-%m-%d} → {v.valid_to:%Y-%m-%d}" if v.valid_to else (
            f"{v.valid_from:%Y-%m-%d} →")
        table.add_row(str(v.version), v.id, v.status, v.statement, valid,
                      f"{v.recorded_at:%Y-%m-%d %H:%M}")
    console.print(table)
    console.print("[bold]raw events[/]")
    for e in ex.events:
        console.print(f"  {e.at:%Y-%m-%d %H:%M} {e.role:>9}: {e.content}")
    console.print("[bold]audit[/]")
    for a in ex.audits:
        console.print(f"  {a.at:%Y-%m-%d %H:%M} {a.op:<13} {a.reason}")


# -- benchmarks ----------------------------------------------------------------------------


@bench_app.command("sweep")
def bench_sweep(
    memories: Annotated[int, typer.Option(help="Synthetic memories to sweep.")] = 1_000_000,
    database_url: Annotated[str | None, typer.Option(
        help="A PostgreSQL server URL: the bench uses a scratch database on it.")] = None,
    indexed: Annotated[int, typer.Option(help="How many of them have index points.")] = 100_000,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Fill N memories (not timed), then time one full sweep in a fresh process."""
    # deferred: bench and eval tooling loads only for its own command
    from sleepmem.bench.lifecycle import bench_sweep as run_bench
    from sleepmem.core.logs import configure_logging

    configure_logging(level="WARNING")
    result = run_bench(memories=memories, database_url=database_url, indexed=indexed)
    if as_json:
        _echo_json(result)
    else:
        for key, value in result.items():
            typer.echo(f"{key:>20}  {value}")


@bench_app.command("reconsolidate")
def bench_reconsolidate(
    events: Annotated[int, typer.Option(help="Events in the scope.")] = 10_000,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Consolidate one scope of N events, then time a dry run and an apply re-consolidation."""
    # deferred: bench and eval tooling loads only for its own command
    from sleepmem.bench.lifecycle import bench_reconsolidate as run_bench

    result = run_bench(events=events, settings=load_settings("WARNING"))
    if as_json:
        _echo_json(result)
    else:
        for key, value in result.items():
            typer.echo(f"{key:>12}  {value}")
