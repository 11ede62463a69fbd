"""``sleepmem bench checkpoint`` and ``sleepmem bench context``: one JSON object each."""

from __future__ import annotations

from typing import Annotated

import typer

from sleepmem.cli.app import bench_app, fail
from sleepmem.cli.evals import AsJson, _print, _settings
from sleepmem.core.errors import SleepmemError


@bench_app.command("checkpoint")
def bench_checkpoint(
    n: Annotated[int, typer.Option(min=1, help="put+get pairs in-process")] = 2000,
    http_n: Annotated[int, typer.Option(min=1, help="put+get pairs over HTTP")] = 1000,
    http: Annotated[bool, typer.Option(help="also measure PUT/GET /v1/checkpoints")] = True,
    as_json: AsJson = True,
) -> None:
    """Checkpoint put/get p50/p95/p99, in-process and over HTTP, against a raw HSET."""
    from sleepmem.bench.working import run_checkpoint_bench

    try:
        report = run_checkpoint_bench(_settings(), n=n, http_n=http_n, http=http)
    except SleepmemError as exc:
        raise fail(exc) from None
    _print(report)


@bench_app.command("context")
def bench_context(
    memories: Annotated[int, typer.Option(min=1, help="memories in the tenant")] = 100_000,
    users: Annotated[int, typer.Option(min=1)] = 1000,
    turns: Annotated[int, typer.Option(min=1)] = 100,
    budget: Annotated[int, typer.Option(min=16, help="budget_tokens of every turn")] = 2000,
    as_json: AsJson = True,
) -> None:
    """A scripted conversation: prefix stability, budget, context latency at N memories."""
    from sleepmem.bench.working import run_context_bench

    try:
        report = run_context_bench(_settings(), memories=memories, users=users, turns=turns,
                                   budget=budget)
    except SleepmemError as exc:
        raise fail(exc) from None
    _print(report)
