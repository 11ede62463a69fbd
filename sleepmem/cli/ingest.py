"""``sleepmem emit`` (events from a shell), ``sleepmem bench ingest`` and ``bench secrets``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from sleepmem.cli.app import app, bench_app, fail, load_settings
from sleepmem.cli.remote import running_server
from sleepmem.core.errors import SleepmemError, ValidationError


def _read_jsonl(source: str) -> list[dict[str, Any]]:
    text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    events: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            events.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            raise ValidationError(f"line {number}", "is not a JSON object") from None
    return events


@app.command()
def emit(
    content: Annotated[str, typer.Argument(help="The event's text.")] = "",
    tenant: Annotated[str | None, typer.Option(envvar="SLEEPMEM_TENANT")] = None,
    agent: Annotated[str | None, typer.Option(envvar="SLEEPMEM_AGENT")] = None,
    user: Annotated[str | None, typer.Option(envvar="SLEEPMEM_USER")] = None,
    project: Annotated[str | None, typer.Option()] = None,
    session: Annotated[str | None, typer.Option()] = None,
    kind: Annotated[str, typer.Option(help="message, tool_result, observation, ...")] = "message",
    role: Annotated[str, typer.Option(help="user, assistant, tool or system")] = "user",
    meta: Annotated[str | None, typer.Option(help="A small JSON object.")] = None,
    event_id: Annotated[str | None, typer.Option(help="Idempotency key (default: new).")] = None,
    jsonl: Annotated[
        str | None, typer.Option(help="Emit one event per line of this file ('-': stdin).")
    ] = None,
) -> None:
    """Append events to the log, as an agent would; prints one event id per line.

    Next to a running server (of this data directory, or SLEEPMEM_API_URL) the events go
    through its API, as the other commands do; otherwise straight onto the Redis stream."""
    settings = load_settings(log_level="WARNING")
    levels = {
        "tenant": tenant,
        "agent": agent,
        "user": user,
        "project": project,
        "session": session,
    }
    try:
        if jsonl is not None:
            events = _read_jsonl(jsonl)
        else:
            fields: dict[str, Any] = {"content": content, "kind": kind, "role": role}
            if meta is not None:
                try:
                    fields["meta"] = orjson.loads(meta)
                except orjson.JSONDecodeError:
                    raise ValidationError("meta", "must be a JSON object") from None
            if event_id is not None:
                fields["event_id"] = event_id
            events = [fields]
        server = running_server(settings, tenant=tenant)
        if server is not None:
            with server:
                given = {k: v for k, v in levels.items() if v}
                ids = server.emit_many([{**given, **e} for e in events])
        else:
            # deferred: the SDK (redis and the models) is slow to import; only this path uses it
            from sleepmem.sdk import MemoryClient

            with MemoryClient(
                settings, tenant=tenant, agent=agent, user=user, project=project, session=session
            ) as client:
                ids = client.emit_many(events)
    except SleepmemError as exc:
        raise fail(exc) from exc
    for i in ids:
        typer.echo(i)


@bench_app.command("ingest")
def bench_ingest(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    n: Annotated[int, typer.Option(min=1, help="Single emits timed (and raw XADDs).")] = 5000,
    batch_n: Annotated[int, typer.Option(min=1, help="Events through emit_many.")] = 50_000,
    http_n: Annotated[int, typer.Option(min=1, help="Single-event HTTP requests.")] = 4000,
    http_batch_n: Annotated[int, typer.Option(min=1, help="Events through HTTP batches.")] = 40_000,
    http_clients: Annotated[int, typer.Option(min=1, help="Concurrent HTTP clients.")] = 16,
    drain_n: Annotated[int, typer.Option(min=1, help="Events emitted then drained.")] = 100_000,
    pg_url: Annotated[
        str | None,
        typer.Option(
            envvar="SLEEPMEM_BENCH_PG_URL",
            help="A PostgreSQL server URL: also drain into a scratch database on it.",
        ),
    ] = None,
) -> None:
    """Request path against raw redis-py, HTTP ingest, and drain throughput."""
    # deferred: bench and eval tooling loads only for its own command
    from sleepmem.bench.ingest import run_ingest_bench

    if http_n <= http_clients:
        # Each client's first request opens its connection and is not timed.
        raise typer.BadParameter(
            f"must be more than --http-clients ({http_clients})", param_hint="--http-n"
        )
    settings = load_settings(log_level="WARNING")
    if pg_url is None and (settings.database_url or "").startswith("postgresql"):
        pg_url = settings.database_url
    result = run_ingest_bench(
        settings,
        n=n,
        batch_n=batch_n,
        http_n=http_n,
        http_batch_n=http_batch_n,
        http_clients=http_clients,
        drain_n=drain_n,
        pg_url=pg_url,
    )
    if as_json:
        typer.echo(orjson.dumps(result).decode())
    else:
        for key, value in result.items():
            typer.echo(f"{key:>28}  {value}")


@bench_app.command("secrets")
def bench_secrets(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    per_kind: Annotated[int, typer.Option(min=1, help="Made-up secrets of every kind.")] = 50,
    seed: Annotated[int, typer.Option(help="Corpus seed (same seed, same corpus).")] = 11,
    locomo: Annotated[
        Path | None, typer.Option(help="A LoCoMo JSON file: its turns are the benign text.")
    ] = None,
    external: Annotated[
        Path | None,
        typer.Option(
            help="JSON lines from scripts/gitleaks_corpus.py: secrets this project did not "
            "write, scored per split and family."
        ),
    ] = None,
    pii: Annotated[
        Path | None,
        typer.Option(
            help="JSON lines from scripts/pii_corpus.py (Presidio's recognizer tests): "
            "id numbers missed and benign strings changed, per kind."
        ),
    ] = None,
) -> None:
    """Redaction: secrets left per kind in a generated corpus, false positives on LoCoMo."""
    from sleepmem.bench.secrets import run_secret_bench

    result = run_secret_bench(per_kind=per_kind, seed=seed, locomo=locomo)
    if external is not None:
        from sleepmem.bench import external_secrets

        result["external"] = external_secrets.score(external_secrets.load(external))
    if pii is not None:
        from sleepmem.bench import pii as pii_bench

        result["pii"] = pii_bench.score(pii_bench.load(pii))
    if as_json:
        typer.echo(orjson.dumps(result).decode())
    else:
        for key, value in result.items():
            typer.echo(f"{key:>24}  {value}")
