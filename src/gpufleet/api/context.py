"""What every request handler needs: the store, the cluster, the clock, the executor."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from threading import Lock

from sqlalchemy.orm import Session, sessionmaker

from gpufleet.cluster import Cluster
from gpufleet.control.auth import PrincipalCache
from gpufleet.control.db import read_sessions
from gpufleet.control.executors.base import ExecutorView


@dataclass
class RateLimiter:
    """A token bucket per key (an API token's id, a client's address): `rate_per_s`
    sustained, `burst` at once (HTTP 429). Kept in each API worker process's memory."""

    rate_per_s: float = 50.0
    burst: float = 100.0
    clock: Callable[[], float] = time.monotonic
    max_keys: int = 100_000  # bounded: a flood of new keys cannot grow it without end
    _buckets: dict[Hashable, tuple[float, float]] = field(default_factory=dict)
    _lock: Lock = field(default_factory=Lock)

    def allow(self, key: Hashable) -> bool:
        """Take one from `key`'s bucket if it has one."""
        with self._lock:
            tokens, now = self._refilled(key)
            if tokens < 1:
                self._buckets[key] = (tokens, now)
                return False
            self._buckets[key] = (tokens - 1, now)
            return True

    def blocked(self, key: Hashable) -> bool:
        """`key`'s bucket is empty (nothing taken): for failures, which are counted only
        after they happen (`spend`)."""
        with self._lock:
            return self._refilled(key)[0] < 1

    def spend(self, key: Hashable) -> None:
        with self._lock:
            tokens, now = self._refilled(key)
            self._buckets[key] = (tokens - 1, now)

    def _refilled(self, key: Hashable) -> tuple[float, float]:
        now = self.clock()
        if key not in self._buckets and len(self._buckets) >= self.max_keys:
            self._buckets.clear()  # rather than grow: every key starts full again
        tokens, at = self._buckets.get(key, (self.burst, now))
        return min(self.burst, tokens + (now - at) * self.rate_per_s), now


def failed_auth_limiter() -> RateLimiter:
    """Failed authentications per client address: 30 at once, then one a second. Each
    failure is a store lookup (an unknown token, a stale session cookie, a wrong token on the
    portal's login page); past the limit the address gets 429 without one."""
    return RateLimiter(rate_per_s=1.0, burst=30.0)


@dataclass
class AppContext:
    sessions: sessionmaker[Session]
    cluster: Cluster
    clock: Callable[[], float] = time.time
    executor: ExecutorView | None = None  # its name and logs (the API starts nothing)
    limiter: RateLimiter = field(default_factory=RateLimiter)
    auth_failures: RateLimiter = field(default_factory=failed_auth_limiter)
    principals: PrincipalCache = field(default_factory=PrincipalCache)
    profile: str = "default"
    leader: Callable[[], bool] = lambda: False
    reconciler_running: Callable[[], bool] = lambda: True  # the server's reconciler process
    read_sessions: sessionmaker[Session] = field(init=False)  # `db.read_sessions` of the store

    def __post_init__(self) -> None:
        self.read_sessions = read_sessions(self.sessions.kw["bind"])

    def session(self) -> Iterator[Session]:
        with self.sessions() as s:
            yield s
