"""``sleepmem search``: read memory back through the API, as an agent would."""

from __future__ import annotations

import json

import typer

from sleepmem.cli.app import app, fail
from sleepmem.core.errors import SleepmemError


@app.command()
def search(
    query: str = typer.Argument(..., help="what to look for"),
    tenant: str = typer.Option(..., help="tenant of the scope"),
    agent: str = typer.Option("", help="agent of the scope"),
    user: str = typer.Option("", help="user of the scope"),
    project: str = typer.Option("", help="project of the scope"),
    session: str = typer.Option("", help="session of the scope"),
    k: int = typer.Option(5, help="at most this many memories (1..100)"),
    types: list[str] = typer.Option([], "--type", help="keep only these memory types"),
    as_of: str | None = typer.Option(None, help="ISO time: answer as memory stood then"),
    max_tokens: int | None = typer.Option(None, help="cl100k token budget for the cards"),
    format: str = typer.Option("cards", "--format",
                               help="cards (each memory whole), lines (each as its best "
                                    "sentence) or mixed (the first half of k whole)"),
    api_url: str | None = typer.Option(None, envvar="SLEEPMEM_API_URL",
                                       help="API base URL (default: the local key file)"),
    api_key: str | None = typer.Option(None, envvar="SLEEPMEM_API_KEY", help="bearer key"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
) -> None:
    """Search a scope's memory (the API must be running: `sleepmem serve` or `api`).

    The server and key: --api-url / --api-key, SLEEPMEM_API_URL / SLEEPMEM_API_KEY, else the
    local key file of the data directory (SLEEPMEM_DATA_DIR)."""

    # deferred: the client (httpx and the models) takes ~0.3 s to import
    from sleepmem.client import Client
    from sleepmem.core.settings import Settings
    from sleepmem.models import ConflictGroup

    scope = {"tenant": tenant, "agent": agent, "user": user, "project": project,
             "session": session}
    try:
        with Client(api_url, api_key, data_dir=Settings().data_dir) as client:
            result = client.search(query, scope, k=k, types=types or None, as_of=as_of,
                                   max_tokens=max_tokens, format=format)
    except SleepmemError as exc:
        raise fail(exc) from None
    if as_json:
        typer.echo(json.dumps(result.model_dump(mode="json"), ensure_ascii=False))
        return
    typer.echo(f"{result.memories} memories as {result.format}, {result.tokens} tokens "
               f"({result.tokenizer})")
    for card in result.cards:
        if isinstance(card, ConflictGroup):
            typer.echo(f"{card.score:.3f}  CONFLICT (unresolved; both sides trusted):")
            for side in card.sides:
                typer.echo(f"         - {side.statement}  [{side.type}, {side.source}]")
        else:
            found = f", via {'+'.join(card.routes)}" if card.routes else ""
            found += ", one line" if card.line else ""
            # A passage holds several turns: its lines continue under the first one.
            text = card.statement.replace("\n", "\n       ")
            typer.echo(f"{card.score:.3f}  {text}  "
                       f"[{card.type}, {card.source}, {card.valid_from:%Y-%m-%d}{found}]")
