"""What every request handler needs: the store, the cluster, the clock, the executor."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from threading import Lock

from sqlalchemy.orm import Session, sessionmaker

from gpufleet.cluster import Cluster
from gpufleet.control.auth import PrincipalCache
from gpufleet.control.db import read_sessions
from gpufleet.control.executors.base import ExecutorView


@dataclass
class RateLimiter:
    """A token bucket per API token: `rate_per_s` sustained, `burst` at once (HTTP 429)."""

    rate_per_s: float = 50.0
    burst: float = 100.0
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[int, tuple[float, float]] = field(default_factory=dict)
    _lock: Lock = field(default_factory=Lock)

    def allow(self, key: int) -> bool:
        now = self.clock()
        with self._lock:
            tokens, at = self._buckets.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - at) * self.rate_per_s)
            if tokens < 1:
                self._buckets[key] = (tokens, now)
                return False
            self._buckets[key] = (tokens - 1, now)
            return True


@dataclass
class AppContext:
    sessions: sessionmaker[Session]
    cluster: Cluster
    clock: Callable[[], float] = time.time
    executor: ExecutorView | None = None  # its name and logs (the API starts nothing)
    limiter: RateLimiter = field(default_factory=RateLimiter)
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
