"""The resources this process's tasks run with.

Workers install them from Celery's process hooks (:mod:`sleepmem.workers.process`); the
embedded runtime and tests install resources they built themselves. Tasks only read them.
"""

from __future__ import annotations

import threading

from sleepmem.core.errors import ConfigurationError
from sleepmem.resources import Resources

_lock = threading.Lock()
_resources: Resources | None = None


def install_resources(resources: Resources) -> None:
    """Make ``resources`` the ones this process's tasks use."""
    global _resources
    with _lock:
        _resources = resources


def uninstall_resources() -> Resources | None:
    """Forget the installed resources (without closing them) and return them."""
    global _resources
    with _lock:
        res, _resources = _resources, None
    return res


def installed_resources() -> Resources | None:
    return _resources


def current_resources() -> Resources:
    res = _resources
    if res is None:
        raise ConfigurationError(
            "no resources in this process: start tasks through `sleepmem worker`, "
            "`sleepmem serve`, or install_resources() first"
        )
    return res
