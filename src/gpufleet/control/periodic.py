"""A body run on a background thread every few seconds, until stopped: the reconciler's
cycle and the telemetry read share this scaffold.

A body that raises is logged and counted (`errors`) and run again next time: a bug in one
cycle, or a store that is briefly away, must not stop a server that keeps serving.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod

log = logging.getLogger(__name__)


class Periodic(ABC):
    """Calls `body()` every `interval_s()` seconds (measured from the start of each call)
    on a daemon thread named `name`, until `stop()`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    @abstractmethod
    def body(self) -> None:
        """One call: a cycle, a read."""

    @abstractmethod
    def interval_s(self) -> float:
        """Seconds from the start of one call to the start of the next."""

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                self.body()
            except Exception:  # keep serving; the next call retries from the store
                self.errors += 1
                log.exception("%s cycle failed", self.name)
            self._stop.wait(max(0.0, self.interval_s() - (time.monotonic() - began)))

    def stop(self) -> None:
        """Stop and wait (up to 30 s) for the call in progress to end."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
