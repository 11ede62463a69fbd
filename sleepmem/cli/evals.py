"""``sleepmem eval ...`` and ``sleepmem bench search``: each prints one JSON object.

Every command takes the data file as an argument (public benchmark data is never part of
the repository) and runs on a throwaway embedded instance, so it can be pointed at any
copy of the data without touching a real deployment's stores.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from sleepmem.cli.app import bench_app, eval_app, fail
from sleepmem.core.errors import SleepmemError, ValidationError

if TYPE_CHECKING:
    from sleepmem.core.settings import Settings
    from sleepmem.models import SearchFormat

DataFile = Annotated[
    Path,
    typer.Option("--data", exists=True, dir_okay=False, readable=True, help="benchmark file"),
]
AsJson = Annotated[bool, typer.Option("--json", help="print one JSON object (the default)")]
Budgets = Annotated[
    list[int] | None,
    typer.Option("--budget", min=1, help="a token budget to score at besides 500, 1000, "
                                         "1500 and 2000 (repeatable)"),
]
Formats = Annotated[
    list[str] | None,
    typer.Option("--format", help="a search format to score: cards, lines or mixed "
                                  "(repeatable; the first is the headline; default cards)"),
]


def _budgets(extra: list[int] | None) -> list[int]:
    # deferred: bench and eval tooling loads only for its own command
    from sleepmem.evals.baselines import DEFAULT_BUDGETS

    return sorted({*DEFAULT_BUDGETS, *(extra or [])})


def _formats(named: list[str] | None) -> list[SearchFormat]:
    """The formats named, checked, in order (each once); cards when none is."""
    # deferred: sleepmem.models loads SQLModel and every table (~0.3 s)
    from sleepmem.models import SEARCH_FORMATS

    out: list[SearchFormat] = []
    for name in named or ["cards"]:
        if name not in SEARCH_FORMATS:
            raise fail(ValidationError(
                "format", f"{name!r} is not a search format: {', '.join(SEARCH_FORMATS)}"))
        fmt = cast("SearchFormat", name)
        if fmt not in out:
            out.append(fmt)
    return out


def _settings() -> Settings:
    from sleepmem.core.logs import configure_logging
    from sleepmem.core.settings import Settings

    settings = Settings()
    # Per-conversation and per-question lines go to stderr; stdout stays one JSON object.
    configure_logging(level=settings.log_level, json=settings.log_json)
    return settings


def _print(report: dict[str, Any]) -> None:
    typer.echo(json.dumps(report, ensure_ascii=False, indent=2, default=str))


@eval_app.command("locomo")
def locomo(
    data: DataFile,
    as_json: AsJson = True,
    limit_conversations: Annotated[int | None, typer.Option(min=1)] = None,
    limit_questions: Annotated[
        int | None, typer.Option(min=1, help="questions per conversation")
    ] = None,
    budget: Budgets = None,
    format: Formats = None,
) -> None:
    """LoCoMo evidence recall at token budgets and @5/10/25 against BM25 and hybrid raw-turn
    baselines in the same tokens, the routes each hit is owed to and where each miss sat
    (no memory, no route, or its rank)."""
    # deferred: bench and eval tooling loads only for its own command
    from sleepmem.evals.locomo import run_locomo

    try:
        report = run_locomo(
            data,
            settings=_settings(),
            limit_conversations=limit_conversations,
            limit_questions=limit_questions,
            formats=_formats(format),
            budgets=_budgets(budget),
        )
    except SleepmemError as exc:
        raise fail(exc) from None
    _print(report)


@eval_app.command("extraction")
def extraction(
    data: DataFile,
    as_json: AsJson = True,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="the first N conversations")
    ] = None,
    threshold: Annotated[
        float | None, typer.Option(min=0.0, max=1.0,
                                   help="matcher score at which a pair states the same thing")
    ] = None,
    calibrate: Annotated[bool, typer.Option(
        help="also the matcher's agreement with the hand labels (--labels)")] = False,
    labels: Annotated[Path | None, typer.Option(
        exists=True, dir_okay=False, readable=True,
        help="hand labels (default: the labels shipped with sleepmem)")] = None,
    sample_pairs: Annotated[Path | None, typer.Option(
        dir_okay=False, help="write 100 pairs spanning the score range, with their texts, "
                             "to label by hand (benchmark text: keep it out of the repo)")] = None,
) -> None:
    """LoCoMo extraction: coverage of the annotators' observations by structured memories,
    the share stating the same thing (calibrated matcher), and unmatched memories."""
    # deferred: bench and eval tooling loads only for its own command
    from sleepmem.evals.extraction import DEFAULT_THRESHOLD, LABELS, run_extraction

    try:
        report = run_extraction(
            data,
            settings=_settings(),
            limit_conversations=limit,
            threshold=DEFAULT_THRESHOLD if threshold is None else threshold,
            labels=(labels or LABELS) if calibrate or labels else None,
            sample_to=sample_pairs,
        )
    except SleepmemError as exc:
        raise fail(exc) from None
    _print(report)


@eval_app.command("longmemeval")
def longmemeval(
    data: DataFile,
    as_json: AsJson = True,
    questions: Annotated[
        int | None, typer.Option("--questions", "--limit", min=1,
                                 help="N questions spread over the file")
    ] = None,
    per_question: Annotated[bool, typer.Option(help="add each question's metrics")] = False,
    budget: Budgets = None,
    format: Formats = None,
) -> None:
    """LongMemEval session recall_all / ndcg_any at token budgets against BM25 and hybrid
    raw-turn baselines in the same tokens, and @5/@10 against flat BM25 over sessions; with
    ingest time, events/s, peak memory, disk size and search p50/p95. Runs on LongMemEval_S
    or the larger haystacks of scripts/build_longmemeval_m.py."""
    # deferred: bench and eval tooling loads only for its own command
    from sleepmem.evals.longmemeval import run_longmemeval

    try:
        report = run_longmemeval(
            data, settings=_settings(), limit=questions, per_question=per_question,
            budgets=_budgets(budget), formats=_formats(format),
        )
    except SleepmemError as exc:
        raise fail(exc) from None
    _print(report)


@eval_app.command("scenarios")
def scenarios(
    directory: Annotated[
        Path, typer.Option("--dir", exists=True, file_okay=False, help="folder of *.toml stories")
    ],
    as_json: AsJson = True,
) -> None:
    """Run every scenario story; exit code 1 if any failed."""
    # deferred: bench and eval tooling loads only for its own command
    from sleepmem.evals.scenarios import run_directory

    report = run_directory(directory)
    _print(report)
    if report["failed"]:
        raise typer.Exit(code=1)


@bench_app.command("search")
def bench_search(
    memories: Annotated[int, typer.Option(min=1, help="memories in the tenant")] = 100_000,
    users: Annotated[int, typer.Option(min=1)] = 1000,
    queries: Annotated[int, typer.Option(min=1)] = 300,
    http: Annotated[bool, typer.Option(help="also measure POST /v1/search")] = True,
    as_json: AsJson = True,
) -> None:
    """Search latency (p50/p95/p99 in-process, p95 over HTTP) at N realistic memories."""
    # deferred: bench and eval tooling loads only for its own command
    from sleepmem.bench.search import run_search_bench

    try:
        report = run_search_bench(
            _settings(), memories=memories, users=users, queries=queries, http=http
        )
    except SleepmemError as exc:
        raise fail(exc) from None
    _print(report)
