"""A body run on a background thread every few seconds, until stopped: the reconciler's
cycle and the telemetry read share this scaffold; and the retry their transactions share.

A body that raises is logged and counted (`errors`) and run again next time: a bug in one
cycle, or a store that is briefly away, must not stop a server that keeps serving.

A transaction that loses a race to another writer is not a bug: a job it writes changed
since it read it (StaleDataError, `Job.version`), or PostgreSQL aborted it to break a
deadlock (SQLSTATE 40P01) or a serialization conflict (40001). It rolled back whole, so
doing it again is safe and is what the database asks for (`retrying`). Before, only the
reconciler retried, and only stale jobs: a deadlock escaped the cycle as an error, the
executor's events it had polled were dropped and the rest of the cycle skipped.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm.exc import StaleDataError

log = logging.getLogger(__name__)
T = TypeVar("T")

# tries of one transaction that loses races (`retrying`): then its caller gives up, and the
# next cycle or round reads the store again
TRIES = 3
# PostgreSQL's errors that mean "run the transaction again" (errcodes, class 40)
RACE_SQLSTATES = {"40P01": "a deadlock", "40001": "a serialization failure"}


class RaceLostError(Exception):
    """A transaction lost a race to other writers on each of its tries (`retrying`): nothing
    of it was written. Its caller gives up this time, the next cycle or round tries again."""


def lost_race(exc: BaseException) -> str | None:
    """What race `exc` says its transaction lost, or None where it is some other error."""
    if isinstance(exc, StaleDataError):
        return "a job changed under it"
    if isinstance(exc, DBAPIError):
        # psycopg 3 names it `sqlstate`, psycopg2 `pgcode`; SQLite has neither (its one
        # writer makes it wait: a busy timeout, not a deadlock)
        state = getattr(exc.orig, "sqlstate", None) or getattr(exc.orig, "pgcode", None)
        return RACE_SQLSTATES.get(str(state)) if state else None
    return None


def said(exc: BaseException) -> str:
    """What the database said of a lost race (its DETAIL names the processes and rows): the
    driver's message, without SQLAlchemy's copy of the statement and its parameters (a job's
    environment, which may hold credentials, goes through them)."""
    orig = exc.orig if isinstance(exc, DBAPIError) else exc
    return " ".join(str(orig).split())


def retrying(
    attempt: Callable[[], T],
    what: str,
    *,
    tries: int = TRIES,
    undo: Callable[[], None] | None = None,
) -> T:
    """`attempt`, one whole transaction (its commit included), done again, up to `tries` in
    all, while it fails by losing a race (`lost_race`); any other error is raised as it is.
    `undo` rolls a failed try back where `attempt` does not (a session used for several
    transactions); a `sessionmaker.begin()` block rolls itself back. Each retry is logged;
    the last failure raises RaceLostError. `what` names the transaction in the log."""
    for n in range(1, tries + 1):
        try:
            return attempt()
        except Exception as exc:
            why = lost_race(exc)
            if why is None:
                raise
            if undo is not None:
                undo()
            if n == tries:
                raise RaceLostError(
                    f"{what}: {why} on each of {tries} tries ({said(exc)})"
                ) from exc
            log.info("%s: %s (%s); rolled back, try %d of %d", what, why, said(exc), n + 1, tries)
    raise AssertionError("unreachable: the last try returns or raises")


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
            self.call()
            self._stop.wait(max(0.0, self.interval_s() - (time.monotonic() - began)))

    def call(self) -> None:
        """One `body()`, whatever it raises. Still counted, a race lost on every try (or one
        in a transaction nobody retries) is logged as a warning, without a traceback: it is
        contention to watch, not a bug to read (the next call does the work again)."""
        try:
            self.body()
        except RaceLostError as exc:
            self.errors += 1
            log.warning("%s cycle gave up, the next one does it again: %s", self.name, exc)
        except Exception as exc:  # keep serving; the next call retries from the store
            self.errors += 1
            why = lost_race(exc)  # in a transaction that does not retry (`retrying`)
            if why is None:
                log.exception("%s cycle failed", self.name)
            else:
                log.warning(
                    "%s cycle lost a race, %s (%s); the next one retries", self.name, why, said(exc)
                )

    def stop(self) -> None:
        """Stop and wait (up to 30 s) for the call in progress to end."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
