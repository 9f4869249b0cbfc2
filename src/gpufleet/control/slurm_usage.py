"""The usage ledger against Slurm's accounting: does gpufleet bill what Slurm ran?

For every attempt the ledger closed and every Slurm job of this server's tag, the two
must agree on the GPUs held (the ledger's GPUs against sacct's ``gres/gpu``) and on the
end (the executor reports Slurm's ``End`` as the attempt's end). They differ by design
at the start: gpufleet holds the GPUs from the moment it allocates them, before sbatch,
while Slurm counts from its ``Start``. So the check is

    ledger GPU-s = sacct elapsed x gres/gpu + GPUs x startup,

with ``startup`` = Slurm's start - gpufleet's allocation (or Slurm's end for a job
cancelled before it started), to within sacct's one-second resolution. Anything else is
a difference worth a look: a job Slurm ran that the ledger does not bill, an attempt
billed without a Slurm job, other GPU counts, other end times.

The end states must agree too. An attempt gpufleet stopped (a preemption, a cancel, its
node marked down: the ``stopping`` event) ends CANCELLED in Slurm (the executor stops
jobs with ``scancel``), COMPLETED when it finished within its grace, or NODE_FAIL when
Slurm lost the node first; one that succeeded
ends COMPLETED; one gpufleet never stopped must not read CANCELLED (someone cancelled it
outside gpufleet) nor COMPLETED when gpufleet recorded a failure.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpufleet.control.executors.base import RunKey
from gpufleet.control.executors.slurm_text import NODE_LOSS_STATES, SlurmJob, by_name
from gpufleet.control.models import JobEvent, UsageEntry

RESOLUTION_S = 1.0  # sacct's times are whole seconds
# Slurm's end states of a job gpufleet stopped: scancel'd, preempted by Slurm itself,
# finished on its own within the grace period, or ended by the node failure it was
# stopped for
STOPPED_STATES = frozenset({"CANCELLED", "PREEMPTED", "COMPLETED", *NODE_LOSS_STATES})


@dataclass(frozen=True, slots=True)
class LedgerAttempt:
    """One attempt's closed ledger rows, summed."""

    key: RunKey
    gpus: float
    start_s: float
    end_s: float
    gpu_s: float
    stopped: bool = False  # gpufleet asked it to stop (the attempt had a `stopping` event)
    succeeded: bool = False  # gpufleet recorded it as succeeded


@dataclass(frozen=True, slots=True)
class UsageCheck:
    """One attempt on both sides; `problem` is empty when they agree."""

    key: RunKey
    slurm_job_id: str | None
    ledger_gpus: float | None
    slurm_gpus: int | None
    ledger_gpu_s: float | None
    slurm_gpu_s: float | None
    startup_s: float | None
    problem: str = ""
    slurm_state: str | None = None


def ledger_attempts(session: Session, since_s: float, until_s: float) -> list[LedgerAttempt]:
    """The ledger's attempts that ended in [since_s, until_s)."""
    rows = session.scalars(
        select(UsageEntry).where(UsageEntry.end_s >= since_s, UsageEntry.end_s < until_s)
    )
    milli: dict[RunKey, dict[float, int]] = defaultdict(lambda: defaultdict(int))
    spans: dict[RunKey, list[float]] = {}
    gpu_s: dict[RunKey, float] = defaultdict(float)
    for r in rows:
        key = RunKey(r.job_id, r.attempt)
        milli[key][r.start_s] += r.gpu_milli
        lo, hi = spans.get(key, [r.start_s, r.end_s])
        spans[key] = [min(lo, r.start_s), max(hi, r.end_s)]
        gpu_s[key] += r.gpu_milli / 1000 * (r.end_s - r.start_s)
    ends = _end_events(session, {key.job_id for key in spans})
    return [
        LedgerAttempt(
            key=key,
            gpus=max(milli[key].values()) / 1000,
            start_s=spans[key][0],
            end_s=spans[key][1],
            gpu_s=gpu_s[key],
            stopped="stopping" in ends.get(key, ()),
            succeeded="succeeded" in ends.get(key, ()),
        )
        for key in sorted(spans)
    ]


def _end_events(session: Session, job_ids: set[int]) -> dict[RunKey, set[str]]:
    """The `stopping` and `succeeded` events of these jobs, by attempt."""
    found: dict[RunKey, set[str]] = defaultdict(set)
    ids = sorted(job_ids)
    for i in range(0, len(ids), 500):  # bounded IN lists
        rows = session.execute(
            select(JobEvent.job_id, JobEvent.attempt, JobEvent.kind).where(
                JobEvent.job_id.in_(ids[i : i + 500]),
                JobEvent.kind.in_(("stopping", "succeeded")),
            )
        )
        for job_id, attempt, kind in rows:
            found[RunKey(job_id, attempt)].add(kind)
    return found


def end_state_problem(attempt: LedgerAttempt, slurm_state: str) -> str:
    """'' when Slurm's end state says what gpufleet recorded (see the module doc)."""
    if attempt.stopped:
        if slurm_state not in STOPPED_STATES:
            return f"state: gpufleet stopped it, Slurm says {slurm_state} (expected CANCELLED)"
        return ""
    if slurm_state in ("CANCELLED", "PREEMPTED"):
        return f"state: Slurm says {slurm_state}, gpufleet never stopped it"
    if attempt.succeeded != (slurm_state == "COMPLETED"):
        said = "succeeded" if attempt.succeeded else "failed"
        return f"state: gpufleet says {said}, Slurm says {slurm_state}"
    return ""


def compare(
    ledger: Sequence[LedgerAttempt],
    slurm: Mapping[RunKey, SlurmJob],
    resolution_s: float = RESOLUTION_S,
) -> list[UsageCheck]:
    """Every attempt of either side, checked (see the module doc). Slurm jobs not yet ended
    are left out: the ledger closes an attempt only when it ends."""
    checks: list[UsageCheck] = []
    billed = {a.key: a for a in ledger}
    for key in sorted(set(billed) | {k for k, j in slurm.items() if j.terminal}):
        attempt, job = billed.get(key), slurm.get(key)
        slurm_gpu_s = (job.elapsed_s or 0.0) * (job.gpus or 0) if job else None
        if attempt is None:
            assert job is not None
            # a job Slurm never ran (BOOT_FAIL, NODE_FAIL or cancelled while pending) has no
            # ledger row by design: the reconciler bills nothing for an attempt the engine
            # never ran (`ledger.UNBILLED`); reading it as "Slurm ran it" failed the check
            problem = (
                "Slurm ran it; the ledger has no row (not yet observed, or lost)" if job.ran else ""
            )
            checks.append(
                UsageCheck(
                    key, job.job_id, None, job.gpus, None, slurm_gpu_s, None, problem, job.state
                )
            )
            continue
        if job is None:
            checks.append(
                UsageCheck(
                    key,
                    None,
                    attempt.gpus,
                    None,
                    attempt.gpu_s,
                    None,
                    None,
                    "billed, but Slurm has no job for it (never submitted?)",
                )
            )
            continue
        started_s = job.start_s if job.ran and job.start_s is not None else job.end_s
        startup_s = (started_s or attempt.start_s) - attempt.start_s
        problems = []
        if job.gpus is not None and job.gpus != round(attempt.gpus):
            problems.append(f"GPUs: ledger {attempt.gpus:g}, Slurm {job.gpus}")
        if job.end_s is None or abs(attempt.end_s - job.end_s) > resolution_s:
            problems.append(f"end: ledger {attempt.end_s:.0f}, Slurm {job.end_s}")
        if state := end_state_problem(attempt, job.state):
            problems.append(state)
        expected = (slurm_gpu_s or 0.0) + attempt.gpus * startup_s
        if abs(attempt.gpu_s - expected) > attempt.gpus * 2 * resolution_s:
            problems.append(
                f"GPU-s: ledger {attempt.gpu_s:.0f}, Slurm {slurm_gpu_s:.0f} + startup "
                f"{attempt.gpus:g} x {startup_s:.0f} s"
            )
        checks.append(
            UsageCheck(
                key,
                job.job_id,
                attempt.gpus,
                job.gpus,
                attempt.gpu_s,
                slurm_gpu_s,
                startup_s,
                "; ".join(problems),
                job.state,
            )
        )
    return checks


def reconcile(
    session: Session, jobs: Sequence[SlurmJob], tag: str, since_s: float, until_s: float
) -> list[UsageCheck]:
    """`compare` for the ledger's attempts and the Slurm jobs (`SlurmExecutor.accounted_jobs`)
    of one window."""
    return compare(ledger_attempts(session, since_s, until_s), by_name(list(jobs), tag))
