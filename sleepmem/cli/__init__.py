"""CLI entry point (``sleepmem = "sleepmem.cli:main"``).

Every module in this package registers its commands on :data:`app` (or on ``bench_app`` /
``eval_app``) when imported; importing them all here is what makes them appear.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import typer

from sleepmem.core.metricsdir import prepare_multiprocess_dir, wants_worker_metrics

if wants_worker_metrics(sys.argv[1:]):
    prepare_multiprocess_dir()

from sleepmem.cli.app import app, bench_app, config_error_line, eval_app, exit_code
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
        sys.exit(exit_code(exc))
    except Exception as exc:
        # deferred: pydantic-settings takes ~0.15 s to import; an error of its kinds means it
        # is loaded already
        from pydantic import ValidationError as PydanticValidationError
        from pydantic_settings import SettingsError

        # Settings read outside load_settings (a command's own Settings()): still one line.
        if not isinstance(exc, (SettingsError, PydanticValidationError)):
            raise
        if isinstance(exc, PydanticValidationError) and exc.title != "Settings":
            raise
        typer.echo(f"error: {config_error_line(exc)}", err=True)
        sys.exit(2)


__all__ = ["app", "bench_app", "eval_app", "main"]
