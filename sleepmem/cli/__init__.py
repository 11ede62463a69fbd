"""CLI entry point (``sleepmem = "sleepmem.cli:main"``).

Every module in this package registers its commands on :data:`app` (or on ``bench_app`` /
``eval_app``) when imported; importing them all here is what makes them appear.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import typer

from sleepmem.cli.app import app, bench_app, eval_app
from sleepmem.core.errors import SleepmemError

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "app":
        importlib.import_module(f"{__name__}.{_module.name}")



def main() -> None:
    """``sleepmem``: an error raised on purpose is one line on stderr, not a traceback."""
    try:
        app()
    except SleepmemError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(1)


__all__ = ["app", "bench_app", "eval_app", "main"]
