"""Throwaway Redis and PostgreSQL servers that a bench or a test may kill and restart.

Stopping the machine's shared servers would break every other run on it, so the crash
bench (and the tests that stop a database mid-batch) start servers of their own: each on a
free port, its files in a directory of its own, removed afterwards.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis as redis_lib


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def postgres_binaries() -> Path | None:
    """The directory of ``initdb`` and ``pg_ctl``, or None when the server is not installed."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def redis_binary() -> str | None:
    return shutil.which("redis-server")


class ScratchPostgres:
    """A throwaway PostgreSQL cluster: ``stop`` is a crash (immediate), ``start`` recovers."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir
        self.port = free_port()
        # Not under a caller's tmp dir: the server runs as the postgres user when we are
        # root (it refuses to run as root), and must be able to reach its directory.
        self.home = Path(tempfile.mkdtemp(prefix="sleepmem-pg-"))
        self.data = self.home / "data"
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            shutil.chown(self.home, user="postgres")
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "-A",
            "trust",
            "--no-sync",
            "-E",
            "UTF8",
        )

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.home} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c full_page_writes=off"
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.home / "server.log"),
            "-w",
            "start",
        )

    def stop(self) -> None:
        # immediate: the server goes away as in a crash, connections dropped mid-flight.
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def remove(self) -> None:
        subprocess.run(
            self._argv("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop"),
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(self.home, ignore_errors=True)

    def _argv(self, tool: str, *args: str) -> list[str]:
        argv = [str(self.bin / tool), *args]
        return ["runuser", "-u", "postgres", "--", *argv] if self._as_postgres else argv

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run(self._argv(tool, *args), capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed: {done.stdout}{done.stderr}")


class ScratchRedis:
    """A throwaway redis-server with the AOF on: ``kill`` is SIGKILL, ``start`` replays the AOF.

    Same durability settings as the compose file's Redis (appendonly, fsync before each
    reply), so a write Redis acknowledged survives the process being killed.
    """

    def __init__(self, home: Path, binary: str) -> None:
        self.binary = binary
        self.port = free_port()
        self.home = home
        self.home.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 30.0) -> None:
        log = (self.home / "server.log").open("ab")
        self.proc = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.home),
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
                "--protected-mode",
                "no",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        client = redis_lib.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=1)
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    # LOADING while it replays the AOF: not up yet.
                    if client.ping():
                        return
                except (redis_lib.ConnectionError, redis_lib.BusyLoadingError):
                    pass
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"redis-server did not start on port {self.port}")
                time.sleep(0.05)
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL, as a crashed host: no shutdown save, no final AOF flush."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)
        self.proc = None

    def remove(self) -> None:
        self.kill()
        shutil.rmtree(self.home, ignore_errors=True)
