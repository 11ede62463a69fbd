"""Leader election for schedulers: one active across replicas, a standby takes over.

The leader holds ``keys.scheduler_leader`` (SET NX PX ttl with a token) and renews it
every ttl/3 with a compare-and-expire; standbys try to take it every ttl/6, so a dead
leader is replaced within about 1.2 × ttl. A leader that cannot renew (Redis unreachable,
or the lock changed hands) steps down, and also stops calling itself leader once its
last successful renewal is older than 0.9 × ttl, before any standby can win the lock.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time

import redis as redis_lib

from sleepmem.adapters.redis.locks import RedisLock, new_token
from sleepmem.core.errors import TransientError
from sleepmem.core.logs import get_logger

log = get_logger("sleepmem.schedules.leader")

# Trust a held lock for less than its TTL: this process's clock and the lock's expiry
# in Redis start at slightly different instants.
_SAFETY = 0.9


class LeaderElector:
    def __init__(self, client: redis_lib.Redis, key: str, *, ttl_s: float = 15.0) -> None:
        self.identity = f"{socket.gethostname()}:{os.getpid()}:{new_token()[:8]}"
        self.lock = RedisLock(client, key, ttl_s=ttl_s, token=self.identity)
        self.ttl_s = ttl_s
        self._held_until = 0.0
        self._leader = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def is_leader(self) -> bool:
        return self._leader and time.monotonic() < self._held_until

    def step(self) -> bool:
        """One election round: renew if leading, else try to take the lock."""
        attempt = time.monotonic()
        # A standby also tries renew(): after a blip that made it step down, the lock may
        # still be its own, and SET NX alone would wait out the TTL for nothing.
        try:
            ok = self.lock.renew() if self._leader else self.lock.acquire() or self.lock.renew()
        except TransientError:
            ok = False
        if ok:
            self._held_until = attempt + self.ttl_s * _SAFETY
        if ok != self._leader:
            self._leader = ok
            log.info("leadership", leader=ok, identity=self.identity, ttl_s=self.ttl_s)
        return ok

    def start(self) -> LeaderElector:
        self.step()
        self._thread = threading.Thread(target=self._run, name="sleepmem-leader", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.ttl_s / 3 if self._leader else self.ttl_s / 6):
            self.step()

    def stop(self, *, release: bool = True) -> None:
        """Stop electing; ``release`` hands the lock over at once instead of at expiry."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if release and self._leader:
            # If Redis is unreachable the lock simply expires within the TTL.
            with contextlib.suppress(TransientError):
                self.lock.release()
        if self._leader:
            log.info("leadership", leader=False, identity=self.identity, ttl_s=self.ttl_s)
        self._leader = False
