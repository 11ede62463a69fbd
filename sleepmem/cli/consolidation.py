"""Consolidation commands: the benchmark and a memory's explanation live elsewhere."""

from __future__ import annotations

import json

import typer

from sleepmem.cli.app import bench_app
from sleepmem.core.logs import configure_logging


@bench_app.command("consolidate")
def bench_consolidate(
    events: int = typer.Option(5000, help="events to emit and consolidate"),
    users: int = typer.Option(50, help="user scopes they are spread over"),
    llm: bool = typer.Option(False, "--llm", help="LLM extractor against a counting server"),
    as_json: bool = typer.Option(True, "--json/--no-json", help="print one JSON object"),
) -> None:
    """Events/s from the first emit to every memory indexed (embedded, one worker)."""
    # deferred: bench and eval tooling loads only for its own command
    from sleepmem.bench.consolidate import run_consolidate_bench

    configure_logging(level="WARNING")  # stdout carries the one JSON object alone
    result = run_consolidate_bench(events=events, users=users, llm=llm)
    typer.echo(json.dumps(result) if as_json else json.dumps(result, indent=2))


@bench_app.command("extract")
def bench_extract(
    events: int = typer.Option(3000, help="chat turns to extract from"),
    as_json: bool = typer.Option(True, "--json/--no-json", help="print one JSON object"),
) -> None:
    """Rules-extractor events/s on typical chat turns, against tokenising the same turns."""
    from sleepmem.bench.extract import run_extract_bench
    from sleepmem.core.logs import configure_logging

    configure_logging(level="WARNING")  # stdout carries the one JSON object alone
    result = run_extract_bench(events=events)
    typer.echo(json.dumps(result) if as_json else json.dumps(result, indent=2))
