"""The evaluations' own dependencies, the ``eval`` extra, imported when first needed.

A plain install of sleepmem does not carry them: the service never runs an evaluation.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from sleepmem.core.errors import ConfigurationError

INSTALL = "pip install 'sleepmem[eval]'"


def require(module: str) -> ModuleType:
    """Import ``module`` from the eval extra, or say how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigurationError(
            f"the evaluations need the {module!r} module of the eval extra: {INSTALL}"
        ) from exc
