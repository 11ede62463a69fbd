"""Module-level app for ``celery -A sleepmem.workers.main worker``; import only from that CLI.

Importing this module reads ``SLEEPMEM_*`` and derives the broker URL (starting the
embedded Redis when none is configured). Library code uses :func:`create_celery`.
"""

from __future__ import annotations

from sleepmem.workers.app import create_celery_from_env

app = create_celery_from_env()
