"""``sleepmem migrate``: bring the database to this release's schema, and say what it did."""

from __future__ import annotations

from typing import Annotated

import orjson
import typer

from sleepmem.cli.app import app, load_settings


@app.command()
def migrate(
    revision: Annotated[str, typer.Option(help="Target revision; default the newest.")] = "head",
) -> None:
    """Upgrade the SQL schema (a database from before migrations is adopted first)."""
    from sleepmem.adapters.migrate import upgrade
    from sleepmem.adapters.sql import plain_engine

    settings = load_settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    engine = plain_engine(settings.sql_url)
    try:
        before, after = upgrade(engine, revision=revision)
    finally:
        engine.dispose()
    typer.echo(orjson.dumps({"before": before, "after": after}).decode())
