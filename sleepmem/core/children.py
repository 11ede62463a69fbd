"""Child processes that die with their owner, SIGKILL of the owner included.

A server this process starts for itself (the embedded redis-server, a bench's API) must not
outlive it: an orphan holds the data directory's socket and files, and the next start
reuses a server nobody stops. ``atexit`` and ``finally`` cover a clean exit only, so on
Linux the child also asks the kernel for a signal when its parent dies
(``PR_SET_PDEATHSIG``). Elsewhere the clean-exit paths are all there is.

The kernel sends that signal when the *thread* that forked the child ends, not the
process. So children are forked from a thread that lives as long as the process: the main
thread when the caller is on it, else one daemon thread kept for the purpose.
"""

from __future__ import annotations

import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

_PR_SET_PDEATHSIG = 1


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return fn


def _die_with(parent: int, sig: int, prctl: Callable[..., int] | None) -> Callable[[], None]:
    """The child's first step after fork: the death signal, then a check that the parent
    has not already died between the fork and this call (the signal would never come)."""

    def preexec() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, sig)
            if os.getppid() != parent:
                os._exit(1)

    return preexec


class _Spawner:
    """The long-lived daemon thread that forks children for callers on other threads."""

    def __init__(self) -> None:
        self.requests: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = (
            queue.SimpleQueue()
        )
        self.thread = threading.Thread(target=self._run, name="sleepmem-spawner", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            call, done = self.requests.get()
            try:
                done.set_result(call())
            except BaseException as exc:
                done.set_exception(exc)

    def run(self, call: Callable[[], Any]) -> Any:
        done: Future[Any] = Future()
        self.requests.put((call, done))
        return done.result()


_spawner: _Spawner | None = None
_spawner_lock = threading.Lock()


def _on_lasting_thread(call: Callable[[], Any]) -> Any:
    global _spawner
    if threading.current_thread() is threading.main_thread():
        return call()
    with _spawner_lock:
        if _spawner is None:
            _spawner = _Spawner()
    return _spawner.run(call)


def spawn_owned(
    args: Sequence[str], *, death_signal: int = signal.SIGTERM, **popen: Any
) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(args, **popen)`` for a child that gets ``death_signal`` when this
    process dies (SIGTERM: a server saves and exits cleanly)."""
    preexec = _die_with(os.getpid(), death_signal, _prctl())

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(list(args), preexec_fn=preexec, **popen)

    child: subprocess.Popen[bytes] = _on_lasting_thread(start)
    return child


def stop_child(child: subprocess.Popen[bytes], *, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout``; reaped either way."""
    if child.poll() is not None:
        return
    child.terminate()
    try:
        child.wait(timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
