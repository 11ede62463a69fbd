"""Redis locks that only their holder can renew or release.

One pattern serves both the per-scope consolidation lease and the scheduler's leader
lock: SET NX PX with a random token, then compare-and-expire / compare-and-delete in Lua
so a holder whose lock already expired (and was taken by someone else) cannot touch the
new holder's lock.
"""

from __future__ import annotations

import secrets
import threading
from types import TracebackType

import redis

from sleepmem.core.errors import LeaseHeldError, TransientError

# KEYS[1] = lock key, ARGV[1] = token, ARGV[2] = ttl in ms
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

# KEYS[1] = lock key, ARGV[1] = token
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
"""


def new_token() -> str:
    return secrets.token_hex(16)


class RedisLock:
    """A token lock on one key. Not re-entrant; one instance per holder."""

    def __init__(self, client: redis.Redis, key: str, *, ttl_s: float, token: str | None = None):
        if ttl_s <= 0:
            raise ValueError("ttl_s must be positive")
        self.client = client
        self.key = key
        self.ttl_ms = max(1, int(ttl_s * 1000))
        self.token = token or new_token()
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)

    def acquire(self) -> bool:
        try:
            return bool(self.client.set(self.key, self.token, nx=True, px=self.ttl_ms))
        except redis.RedisError as exc:
            raise TransientError(f"lock {self.key!r}: redis unavailable ({exc})") from exc

    def renew(self) -> bool:
        """Push the expiry forward; False when the lock is no longer ours."""
        try:
            return bool(self._renew(keys=[self.key], args=[self.token, self.ttl_ms]))
        except redis.RedisError as exc:
            raise TransientError(f"lock {self.key!r}: redis unavailable ({exc})") from exc

    def release(self) -> bool:
        """Delete the lock if it is still ours; False when it expired or changed hands."""
        try:
            return bool(self._release(keys=[self.key], args=[self.token]))
        except redis.RedisError as exc:
            raise TransientError(f"lock {self.key!r}: redis unavailable ({exc})") from exc

    def held(self) -> bool:
        value = self.client.get(self.key)
        return value is not None and value.decode() == self.token


class Lease:
    """A :class:`RedisLock` held for the length of a ``with`` block, renewed while held.

    Raises :class:`LeaseHeldError` on entry when someone else holds it. A background thread
    renews every ttl/3 so a long consolidation keeps its lease; if a renewal finds the lease
    lost, ``lost`` is set so the holder can stop before committing.
    """

    def __init__(self, client: redis.Redis, key: str, *, ttl_s: float) -> None:
        self.lock = RedisLock(client, key, ttl_s=ttl_s)
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Lease:
        if not self.lock.acquire():
            raise LeaseHeldError(f"lease {self.lock.key!r} is held by another worker")
        self._thread = threading.Thread(target=self._renew_loop, name="sleepmem-lease", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.lock.release()

    def confirm(self) -> bool:
        """Renew now and say whether the lease is still ours: the last check a holder makes
        before it commits, so the commit happens inside a freshly renewed lease."""
        if self.lost.is_set():
            return False
        if self.lock.renew():
            return True
        self.lost.set()
        return False

    def _renew_loop(self) -> None:
        interval = self.lock.ttl_ms / 3000
        while not self._stop.wait(interval):
            try:
                ok = self.lock.renew()
            except TransientError:
                continue  # the lease may still be ours; the next renewal will tell
            if not ok:
                self.lost.set()
                return
