"""Every server a process starts for itself dies with it, SIGKILL of the owner included:
no redis-server is left behind by a command or a test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from sleepmem.adapters.redis.embedded import EmbeddedRedis

# The owner starts one embedded server on its main thread and one from a thread that has
# ended by the time the owner is killed (the kernel's death signal follows the forking
# thread, so a short-lived thread must not be the one that forks).
OWNER = """
import sys, threading
from pathlib import Path
from sleepmem.adapters.redis.embedded import EmbeddedRedis
base = Path(sys.argv[1])
main = EmbeddedRedis(base / "main").start()
started = []
t = threading.Thread(target=lambda: started.append(EmbeddedRedis(base / "thread").start()))
t.start(); t.join()
print(main.pid, started[0].pid, flush=True)
sys.stdin.read()
"""


def wait_until(condition: Callable[[], bool], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux")
class TestTheEmbeddedRedisDiesWithItsOwner:
    def test_a_sigkilled_owner_leaves_no_redis_server_whichever_thread_started_it(
        self, tmp_path: Path
    ) -> None:
        owner = subprocess.Popen(
            [sys.executable, "-c", OWNER, str(tmp_path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        try:
            assert owner.stdout is not None
            pids = [int(p) for p in owner.stdout.readline().split()]
            assert len(pids) == 2
            for pid in pids:
                assert psutil.Process(pid).ppid() == owner.pid
                assert "redis-server" in psutil.Process(pid).name()
            os.kill(owner.pid, signal.SIGKILL)
            owner.wait(10)
            assert wait_until(lambda: all(gone(pid) for pid in pids)), pids
        finally:
            if owner.poll() is None:
                owner.kill()
                owner.wait()

    def test_a_sigkilled_sleepmem_serve_leaves_no_redis_server(self, tmp_path: Path) -> None:
        env = {**os.environ, "SLEEPMEM_DATA_DIR": str(tmp_path / "data"),
               "SLEEPMEM_HOST": "127.0.0.1", "SLEEPMEM_PORT": "0",
               "SLEEPMEM_EMBEDDER": "hashing"}
        for name in ("SLEEPMEM_REDIS_URL", "SLEEPMEM_DATABASE_URL", "SLEEPMEM_API_URL"):
            env.pop(name, None)
        serve = subprocess.Popen([sys.executable, "-m", "sleepmem", "serve"], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            def redis_children() -> list[psutil.Process]:
                return [c for c in psutil.Process(serve.pid).children()
                        if "redis-server" in c.name()]

            assert wait_until(lambda: bool(redis_children()), timeout=90)
            pids = [c.pid for c in redis_children()]
            os.kill(serve.pid, signal.SIGKILL)
            serve.wait(10)
            assert wait_until(lambda: all(gone(pid) for pid in pids)), pids
        finally:
            if serve.poll() is None:
                serve.kill()
                serve.wait()

    def test_stop_ends_the_server_it_started_and_a_reused_one_is_left_running(
        self, tmp_path: Path
    ) -> None:
        first = EmbeddedRedis(tmp_path).start()
        second = EmbeddedRedis(tmp_path).start()
        assert first.pid is not None and second.pid is None
        pid = first.pid
        second.stop()
        assert first.running()
        first.stop()
        assert gone(pid) and not first.running()
