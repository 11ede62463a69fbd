"""CLI entry point (``sleepmem = "sleepmem.cli:app"``).

Every module in this package registers its commands on :data:`app` (or on ``bench_app`` /
``eval_app``) when imported; importing them all here is what makes them appear.
"""

from __future__ import annotations

import importlib
import pkgutil

from sleepmem.cli.app import app, bench_app, eval_app

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "app":
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["app", "bench_app", "eval_app"]
