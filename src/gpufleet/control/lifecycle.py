"""Job lifecycle: the states, the legal moves between them (one comment per edge), and events.

Every move goes through `move()`, which refuses an illegal one and appends a
`JobEvent`, so a job's history is complete by construction.
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy import update
from sqlalchemy.orm import Session

from gpufleet.control.models import Job, JobEvent

JobState = Literal[
    "pending", "admitted", "starting", "running", "stopping", "succeeded", "failed", "cancelled"
]
ACTIVE: frozenset[str] = frozenset({"admitted", "starting", "running", "stopping"})
HOLDING: frozenset[str] = frozenset({"starting", "running", "stopping"})  # allocation rows live
FINAL: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})
# the audit action that keeps a preemption's full sentence (the preemptor's id and team) for
# admins; the victim's own event says only what its team may read (`reconciler._write`)
PREEMPTED_AUDIT = "job.preempted"

TRANSITIONS: dict[str, dict[str, str]] = {
    "pending": {
        "admitted": "placed on GPUs that preempted jobs still hold; starts when they stop",
        "starting": "placed on free GPUs: allocation written, executor asked to start",
        "cancelled": "cancelled while queued",
    },
    "admitted": {
        "starting": "the victims stopped: the planned placement is allocated",
        "pending": "the planned placement lapsed: a node of it went down or was drained",
        "cancelled": "cancelled before it started",
    },
    "starting": {
        "running": "the executor reports the processes started",
        "stopping": "preempted, cancelled or its node failed before it was seen running",
        "succeeded": "finished before the start was even observed (a very short job)",
        "failed": "could not be started (command not found, staging failed)",
        "pending": "the executor lost it before it ran: requeued",
    },
    "running": {
        "stopping": "preemption, cancel or node failure: the checkpoint grace period runs",
        "succeeded": "exited 0",
        "failed": "exited non-zero with no restarts left",
        "pending": "crashed or lost (node down): requeued from its last checkpoint",
    },
    "stopping": {
        # whatever the exit code: a job told to stop cannot be told from one that finished
        "pending": "stopped after preemption or failure: requeued from its last checkpoint",
        "cancelled": "stopped after a cancel, or reclaimed by the team's idle-GPU policy",
    },
    "succeeded": {},
    "failed": {},
    "cancelled": {},
}


class IllegalTransitionError(RuntimeError):
    """A bug: code tried a move the table does not allow."""


def move(session: Session, job: Job, to: JobState, at_s: float, message: str = "") -> JobEvent:
    """Move `job` to `to` and record the event in `session`."""
    allowed = TRANSITIONS[job.state]
    if to not in allowed:
        raise IllegalTransitionError(f"job {job.id}: {job.state} -> {to} is not a legal move")
    job.state = to
    job.version += 1
    return record(session, job, to, at_s, message or allowed[to])


def record(session: Session, job: Job, kind: str, at_s: float, message: str = "") -> JobEvent:
    """An event that is not a state change (submitted, checkpointed, staged, signalled).

    Added to the session directly rather than through `job.events`, which would load the
    job's whole history to append one row."""
    if job.id is None:
        session.flush()
    # Never before the job entered the queue: a cycle's clock is read when the cycle begins,
    # and a job submitted (or requeued) while it ran is still seen by it; its `admitted` must
    # not read as earlier than its `submitted` (issue 24). Times within a cycle keep order.
    at_s = max(at_s, job.queued_s or 0.0, job.submitted_s or 0.0)
    event = JobEvent(job_id=job.id, at_s=at_s, kind=kind, attempt=job.attempt, message=message)
    session.add(event)
    return event


def locked(session: Session, job: Job) -> Job:
    """`job` as the store has it now, held against other writers until the commit.

    A state read before the write transaction may be stale: SQLite's driver begins the
    transaction only at the first write, and PostgreSQL reads committed rows. A cancel read
    a job as pending while the scheduler placed it, then wrote "cancelled" over "starting":
    the job's GPUs stayed allocated to a cancelled job and the gangs behind it waited for
    ever (the kill -9 test caught it). A no-op write first takes the row's lock (the
    database's write lock on SQLite) before the job is read again: a change decided on that
    read is written at the version it read (`Job.version`), which no one else can move before
    the commit."""
    session.execute(
        update(Job).where(Job.id == job.id).values(version=Job.version),
        execution_options={"synchronize_session": False},
    )
    session.refresh(job)
    return job
