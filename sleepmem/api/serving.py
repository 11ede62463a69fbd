"""uvicorn for ``sleepmem api``: the start-up heap is frozen once the app is up.

A full collection walks every tracked object outside the permanent generation, and the
request path pauses while it runs: every request in flight waits for it. What start-up
builds lives as long as the process, so it is moved out of the collector's sight with
``gc.freeze()``, once start-up is over: after the app's lifespan has run (it builds the
API state and mounts MCP, whose imports were ~50,000 objects left in the youngest full
generation when the heap was frozen before ``uvicorn.run``; each full pass then took
~25 ms, measured, and one landed every few seconds under load).
"""

from __future__ import annotations

import contextlib
import gc
import socket
import sys
from typing import Any

import uvicorn

# uvicorn's exit status when the server could not start (uvicorn.server.STARTUP_FAILURE).
STARTUP_FAILURE = 3


def freeze_heap() -> None:
    """Collect once, then keep every object alive now out of later collections."""
    gc.collect()
    gc.freeze()


class FreezingServer(uvicorn.Server):
    """A uvicorn server that freezes the heap between start-up and its first request."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            freeze_heap()


def serve_api(app: Any, *, host: str, port: int) -> None:
    """Serve ``app`` until SIGINT or SIGTERM, as ``uvicorn.run`` does, access log off."""
    server = FreezingServer(
        uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False)
    )
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    if not server.started:
        sys.exit(STARTUP_FAILURE)
