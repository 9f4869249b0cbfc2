"""A virtual cluster: attempts "run" for their duration without any process.

Lets the whole control plane (store, reconciler, API, accounting) run end to end
on a laptop or in CI, optionally faster than real time (`speed`). A job's work is
``Launch.duration_s`` (or `default_duration_s`) *emulated* seconds, and an attempt
runs what is left of it, ``(duration - saved) / speed`` real seconds from its start.

``saved`` is the work the job's earlier attempts saved: each attempt resumes from the
job's last checkpoint, as a real job reloads it. An attempt that reported a checkpoint
at emulated second t of its own run saved ``its resumed work + t``; one that reported
none saved nothing more than it resumed from. So a job preempted (it answers the
checkpoint request before it stops) reruns none of its work, and one that crashed or
was killed reruns what it did after its last periodic checkpoint. This is the rule
the simulator applies to an interrupted job and the queue ETAs replay
(`control.eta`): without it a preempted job ran its whole estimate again, later than
every ETA behind it said. Periodic checkpoints are counted from each attempt's start.

It keeps no files: everything follows from (launch, start time, speed, the work saved
by the job's earlier attempts), so after a server restart the reconciler calls `adopt`
with the start time the store recorded, and the attempt ends exactly when it would
have, for an attempt that resumed no saved work. The saved work is kept in memory
(the `Launch` does not carry it): after a restart, an adopted attempt that had resumed
from a checkpoint ends as if it had not, and later attempts resume only what attempts
since the restart saved. The other state that cannot be derived (signals received,
what was reported) is lost with the process, which is harmless: a restarted server
re-adopts running attempts and nothing else.

Test hooks, read from ``Launch.env``:

* ``GPUFLEET_EMULATE_EXIT_CODE=N``: the attempt ends on time with code N;
* ``GPUFLEET_EMULATE_FAIL_AFTER_S=T``: every attempt ends with code 1 after T emulated
  seconds of its own run (if that is before its end).
"""

from __future__ import annotations

import math
import signal as _signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from gpufleet.control.executors.base import (
    CHECKPOINT_SIGNAL,
    STOP_SIGNAL,
    ExecEvent,
    Launch,
    RunKey,
)
from gpufleet.control.executors.local import signal_number
from gpufleet.control.models import JobEvent

EXIT_CODE_ENV = "GPUFLEET_EMULATE_EXIT_CODE"
FAIL_AFTER_ENV = "GPUFLEET_EMULATE_FAIL_AFTER_S"
FAIL_EXIT_CODE = 1
# Signals whose default action does not end a process; the emulated job ignores them.
_HARMLESS = frozenset(
    int(s)
    for name in ("SIGCHLD", "SIGCONT", "SIGURG", "SIGWINCH", "SIGSTOP", "SIGTSTP")
    if (s := getattr(_signal, name, None)) is not None
)


@dataclass(slots=True)
class _Attempt:
    """One emulated attempt: its plan (derived from the launch) and what happened to it."""

    launch: Launch
    started_s: float
    end_s: float  # real time it ends on its own
    exit_code: int  # the code it ends with on its own
    interval_s: float | None  # real seconds between checkpoints
    resumed_s: float = 0.0  # emulated work saved by earlier attempts, done at its start
    saved_s: float = 0.0  # emulated work saved so far: resumed, then at its last checkpoint
    checkpoints_reported: int = 0  # periodic checkpoints already reported (by index)
    started_reported: bool = False
    requested: list[float] = field(default_factory=list)  # checkpoint signals not yet answered
    ended_by: tuple[float, int, str] | None = None  # (at_s, code, signal name) after a signal
    final_reported: bool = False
    log: list[str] = field(default_factory=list)


class EmulatedExecutor:
    """The `Executor` of a virtual cluster (see the module doc); thread-safe."""

    name = "emulated"

    def __init__(
        self,
        speed: float = 1.0,
        clock: Callable[[], float] = time.time,
        default_duration_s: float = 60.0,
        checkpoint_signal: str = CHECKPOINT_SIGNAL,
    ) -> None:
        if not (speed > 0 and math.isfinite(speed)):
            raise ValueError(f"speed must be a positive number, got {speed}")
        if default_duration_s < 0:
            raise ValueError(f"default_duration_s must be >= 0, got {default_duration_s}")
        self.speed = speed
        self.default_duration_s = default_duration_s
        self.checkpoint_signal = checkpoint_signal
        self._checkpoint_signum = signal_number(checkpoint_signal)
        self._clock = clock
        self._attempts: dict[RunKey, _Attempt] = {}
        self._latest: dict[int, _Attempt] = {}  # job id -> its latest attempt known
        self._lock = threading.Lock()

    # -- orders ---------------------------------------------------------------------------

    def start(self, launch: Launch) -> None:
        """Start the attempt now (by `clock`) unless it is already known."""
        with self._lock:
            if launch.key not in self._attempts:
                self._add(self._plan(launch, self._clock(), reported=False))

    def adopt(
        self, launch: Launch, started_s: float, last_checkpoint_s: float | None = None
    ) -> None:
        """Take over an attempt that started at `started_s` before a restart.

        It ends at ``started_s + (duration - saved) / speed``, as if the server never
        died (``saved``: what earlier attempts this executor knows saved; none after a
        restart, see the module doc); `started` is not reported again, nor are periodic
        checkpoints at or before `last_checkpoint_s` (default: the latest one already
        due is reported, since the old server may not have seen it). A no-op if the
        attempt is known.
        """
        with self._lock:
            if launch.key in self._attempts:
                return
            attempt = self._plan(launch, started_s, reported=True)
            if last_checkpoint_s is not None and attempt.interval_s:
                attempt.checkpoints_reported = self._due(
                    attempt, min(last_checkpoint_s, attempt.end_s)
                )
            if last_checkpoint_s is not None and last_checkpoint_s >= started_s:
                # this attempt's checkpoint the old server recorded: what a restart resumes
                at_s = min(last_checkpoint_s, attempt.end_s)
                attempt.saved_s = attempt.resumed_s + self._emulated_s(attempt, at_s)
            self._add(attempt)

    def signal(self, key: RunKey, signal: str = CHECKPOINT_SIGNAL) -> None:
        """The checkpoint signal asks for a checkpoint; a terminating one ends the attempt.

        Ends with ``-signum`` (SIGTERM: -15), as a process killed by it would.
        """
        signum = signal_number(signal)
        with self._lock:
            attempt = self._attempts.get(key)
            now_s = self._clock()
            if attempt is None or self._ended(attempt, now_s):
                return
            if signum == self._checkpoint_signum:
                attempt.requested.append(now_s)
            elif signum not in _HARMLESS:
                name = _signal.Signals(signum).name
                attempt.ended_by = (now_s, -signum, name)

    def ask_to_stop(self, key: RunKey, checkpoint_signal: str | None) -> None:
        """The checkpoint request (when given), then SIGTERM: the attempt ends with -15."""
        if checkpoint_signal is not None:
            self.signal(key, checkpoint_signal)
        self.signal(key, STOP_SIGNAL)

    def stop(self, key: RunKey) -> None:
        """End the attempt now with -9, as a SIGKILL would."""
        self.signal(key, "SIGKILL")

    # -- observation -----------------------------------------------------------------------

    def poll(self, now_s: float) -> Sequence[ExecEvent]:
        """`started`, `checkpointed` and `exited` events due by `now_s`, each once."""
        with self._lock:
            events: list[ExecEvent] = []
            for key in sorted(self._attempts):
                attempt = self._attempts[key]
                if not attempt.final_reported:
                    events.extend(self._poll_one(key, attempt, now_s))
            return events

    def active(self) -> set[RunKey]:
        """Attempts whose end is not reported yet."""
        with self._lock:
            return {k for k, a in self._attempts.items() if not a.final_reported}

    def logs(self, key: RunKey, tail_bytes: int = 65536) -> str:
        """Synthetic lines: start, checkpoints and end, as reported so far."""
        with self._lock:
            attempt = self._attempts.get(key)
            if attempt is None or tail_bytes <= 0:
                return ""
            data = "".join(line + "\n" for line in attempt.log).encode()
            return data[-tail_bytes:].decode("utf-8", errors="replace")

    # -- internals -------------------------------------------------------------------------

    def _add(self, attempt: _Attempt) -> None:
        key = attempt.launch.key
        self._attempts[key] = attempt
        latest = self._latest.get(key.job_id)
        if latest is None or latest.launch.key.attempt < key.attempt:
            self._latest[key.job_id] = attempt

    def _resumed_s(self, key: RunKey) -> float:
        """Emulated work the job's earlier attempts saved (the module doc's rule): what its
        latest earlier attempt known had saved; 0 for a first attempt or none known."""
        latest = self._latest.get(key.job_id)
        if latest is None or latest.launch.key.attempt >= key.attempt:
            return 0.0
        return latest.saved_s

    def _plan(self, launch: Launch, started_s: float, reported: bool) -> _Attempt:
        work_s = self.default_duration_s if launch.duration_s is None else launch.duration_s
        resumed_s = min(self._resumed_s(launch.key), work_s)
        duration_s = work_s - resumed_s
        exit_code = 0
        raw_code = launch.env.get(EXIT_CODE_ENV)
        if raw_code is not None:
            try:
                exit_code = int(raw_code)
            except ValueError:
                raise ValueError(f"{EXIT_CODE_ENV}={raw_code!r} is not an integer") from None
        raw_fail = launch.env.get(FAIL_AFTER_ENV)
        if raw_fail is not None:
            try:
                fail_after_s = float(raw_fail)
            except ValueError:
                raise ValueError(f"{FAIL_AFTER_ENV}={raw_fail!r} is not a number") from None
            if fail_after_s < duration_s:
                duration_s, exit_code = max(0.0, fail_after_s), FAIL_EXIT_CODE
        interval = launch.checkpoint_interval_s
        attempt = _Attempt(
            launch=launch,
            started_s=started_s,
            end_s=started_s + duration_s / self.speed,
            exit_code=exit_code,
            interval_s=interval / self.speed if interval and interval > 0 else None,
            resumed_s=resumed_s,
            saved_s=resumed_s,
            started_reported=reported,
        )
        resumed = f", resumed at {resumed_s:g} s of {work_s:g} s" if resumed_s else ""
        attempt.log.append(
            f"[emulated t=0s] {'adopted' if reported else 'started'} {launch.job_name} "
            f"({launch.key.name}, world size {launch.world_size}, "
            f"{duration_s:g} s at speed {self.speed:g}{resumed})"
        )
        return attempt

    def _due(self, attempt: _Attempt, until_s: float) -> int:
        """How many periodic checkpoints fall at or before `until_s` (and before the end)."""
        if attempt.interval_s is None or until_s < attempt.started_s:
            return 0
        count = math.floor((until_s - attempt.started_s) / attempt.interval_s)
        # a checkpoint at the very end is not taken: the job is finishing instead
        last = math.ceil((attempt.end_s - attempt.started_s) / attempt.interval_s) - 1
        return max(0, min(count, last))

    def _ended(self, attempt: _Attempt, now_s: float) -> bool:
        return attempt.ended_by is not None or now_s >= attempt.end_s

    def _emulated_s(self, attempt: _Attempt, at_s: float) -> float:
        return (at_s - attempt.started_s) * self.speed

    def _poll_one(self, key: RunKey, attempt: _Attempt, now_s: float) -> list[ExecEvent]:
        events: list[ExecEvent] = []
        if not attempt.started_reported:
            attempt.started_reported = True
            events.append(ExecEvent(key, "started", attempt.started_s))
        end_s, code, why = attempt.end_s, attempt.exit_code, ""
        if attempt.ended_by is not None and attempt.ended_by[0] < end_s:
            end_s, code, why = attempt.ended_by
        horizon_s = min(now_s, end_s)
        due = self._due(attempt, horizon_s)
        checkpoint_s: float | None = None
        if due > attempt.checkpoints_reported:
            assert attempt.interval_s is not None  # due > 0 implies an interval
            attempt.checkpoints_reported = due
            checkpoint_s = attempt.started_s + due * attempt.interval_s
        if attempt.requested:
            # the job answers a checkpoint request at the next poll (or as it ends)
            checkpoint_s = max(checkpoint_s or -math.inf, horizon_s)
            attempt.requested.clear()
        if checkpoint_s is not None:
            attempt.saved_s = attempt.resumed_s + self._emulated_s(attempt, checkpoint_s)
            events.append(ExecEvent(key, "checkpointed", checkpoint_s))
            attempt.log.append(
                f"[emulated t={self._emulated_s(attempt, checkpoint_s):g}s] checkpoint saved"
            )
        if now_s >= end_s or attempt.ended_by is not None:
            attempt.final_reported = True
            detail = f"received {why}" if why else ""
            events.append(ExecEvent(key, "exited", end_s, code, detail))
            attempt.log.append(
                f"[emulated t={self._emulated_s(attempt, end_s):g}s] "
                f"{detail + ', ' if detail else ''}exited with code {code}"
            )
        return events


class EmulatedLogView:
    """The emulated executor's logs as another process sees them: its log lines live in the
    memory of the reconciler's process, so the API tells the attempt's story from the
    store's job events instead (start, checkpoints, stop requests, the end)."""

    name = "emulated"

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def logs(self, key: RunKey, tail_bytes: int = 65536) -> str:
        if tail_bytes <= 0:
            return ""

        with self._sessions() as s:
            rows = s.execute(
                select(JobEvent.at_s, JobEvent.kind, JobEvent.message)
                .where(JobEvent.job_id == key.job_id, JobEvent.attempt == key.attempt)
                .order_by(JobEvent.id)
            ).all()
        if not rows:
            return ""
        t0 = rows[0].at_s
        lines = [
            f"[emulated t={at - t0:.0f}s] {kind}{': ' + message if message else ''}\n"
            for at, kind, message in rows
        ]
        return "".join(lines).encode()[-tail_bytes:].decode("utf-8", errors="replace")
