"""Consolidation commands: the benchmark and a memory's explanation live elsewhere."""

from __future__ import annotations

import json

import typer

from sleepmem.cli.app import bench_app


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
    from sleepmem.core.logs import configure_logging

    configure_logging(level="WARNING")  # stdout carries the one JSON object alone
    result = run_consolidate_bench(events=events, users=users, llm=llm)
    typer.echo(json.dumps(result) if as_json else json.dumps(result, indent=2))


@bench_app.command("session-end")
def bench_session_end(
    first: int = typer.Option(1200, help="events of the session being consolidated"),
    second: int = typer.Option(24, help="events of the session ended during that run"),
    as_json: bool = typer.Option(True, "--json/--no-json", help="print one JSON object"),
) -> None:
    """Delay from a consolidation's end to the session ended during it consolidated too."""
    from sleepmem.bench.session_end import run_session_end_bench
    from sleepmem.core.logs import configure_logging

    configure_logging(level="WARNING")  # stdout carries the one JSON object alone
    result = run_session_end_bench(first=first, second=second)
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


@bench_app.command("chaos")
def bench_chaos(
    kills: int = typer.Option(100, min=0, help="worker kills (pool process, whole worker, ...)"),
    events: int = typer.Option(3000, min=1, help="events emitted through the SDK"),
    users: int = typer.Option(30, min=1, help="user scopes they are spread over"),
    redis_restarts: int = typer.Option(1, min=0, help="redis-server SIGKILLs, AOF restarts"),
    pg_restarts: int = typer.Option(1, min=0, help="PostgreSQL immediate stops and starts"),
    settle_timeout: float = typer.Option(900.0, help="longest wait for everything to settle"),
    seed: int = typer.Option(11, help="corpus and timing seed"),
    as_json: bool = typer.Option(True, "--json/--no-json", help="print one JSON object"),
) -> None:
    """Kill workers and restart Redis and PostgreSQL while events flow; count what was lost,
    duplicated or left stuck (servers of its own: needs redis-server, initdb, pg_ctl)."""
    from sleepmem.bench.chaos import ChaosPlan, run_chaos, services_available
    from sleepmem.core.logs import configure_logging

    missing = services_available()
    if missing is not None:
        typer.echo(f"error: {missing}", err=True)
        raise typer.Exit(1)
    configure_logging(level="WARNING")  # stdout carries the one JSON object alone
    plan = ChaosPlan(
        events=events, users=users, kills=kills, redis_restarts=redis_restarts,
        pg_restarts=pg_restarts,
        settle_timeout=settle_timeout, seed=seed,
    )
    result = run_chaos(plan)
    typer.echo(json.dumps(result) if as_json else json.dumps(result, indent=2))
    broken = (result["events_lost"] or result["events_duplicated"] or not result["settled"]
              or result["duplicate_current_memories"] or result["stuck_scopes"]
              or result["sql_index_missing"] or result["sql_index_orphans"])
    if broken:
        raise typer.Exit(1)
