"""Where prefork workers keep their Prometheus values, chosen before prometheus_client loads.

prometheus_client decides at its first import whether values live in this process or in
files under ``PROMETHEUS_MULTIPROC_DIR`` (summed by the worker's metrics port across the
pool's processes). So ``sleepmem worker --metrics-port N`` prepares the directory at the
very start of the CLI, before any module that defines a metric is imported.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path


def wants_worker_metrics(argv: Sequence[str]) -> bool:
    """True for ``worker … --metrics-port N`` (or ``=N``) with N not 0."""
    if not argv or argv[0] != "worker":
        return False
    for i, arg in enumerate(argv):
        if arg == "--metrics-port" and i + 1 < len(argv):
            return argv[i + 1] not in ("0", "")
        if arg.startswith("--metrics-port="):
            return arg.split("=", 1)[1] not in ("0", "")
    return False


def prepare_multiprocess_dir() -> str:
    """The directory prefork children write their metric values to: the operator's
    ``PROMETHEUS_MULTIPROC_DIR`` (emptied: values of a previous run must not be summed in),
    or a fresh temporary one."""
    chosen = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if chosen:
        path = Path(chosen)
        if path.exists():
            for stale in path.glob("*.db"):
                stale.unlink()
        path.mkdir(parents=True, exist_ok=True)
    else:
        path = Path(tempfile.mkdtemp(prefix="sleepmem-metrics-"))
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(path)
        atexit.register(shutil.rmtree, path, True)
    return str(path)
