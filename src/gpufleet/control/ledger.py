"""The usage ledger: closing allocations into append-only GPU-time records, and reading them.

An allocation interval becomes a ledger row in the same transaction that
releases it, so the ledger and the allocations can never disagree; intervals
still open are read from the allocations themselves (clipped to now), which is
how a chargeback report covers running jobs without writing anything.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from gpufleet.control.chargeback_report import UsageRecord
from gpufleet.control.models import Allocation, Job, JobEvent, NodeRecord, Team, UsageEntry
from gpufleet.control.telemetry_store import busy_share, open_busy_shares

# the job event of an attempt that never ran on the engine, so was not billed (`close_allocations`)
UNBILLED = "unbilled"


def close_allocations(
    session: Session, job: Job, team: str, now_s: float, *, billed: bool = True
) -> float:
    """Release the job's live allocations and append their ledger rows; GPU-seconds held.
    `billed=False` (an attempt that never ran on the engine): released, no ledger row; the
    caller records the `unbilled` event that `balance_problems` reads, and the time they
    were held shows as idle capacity, not as anyone's use."""
    rows = session.scalars(
        select(Allocation).where(Allocation.job_id == job.id, Allocation.released_s.is_(None))
    ).all()
    groups: dict[tuple[int, str, float], int] = defaultdict(int)
    for row in rows:
        row.released_s = now_s
        groups[(row.attempt, row.flavor, row.allocated_s)] += row.milli
    if not billed:
        session.flush()
        return sum(
            milli / 1000 * max(0.0, now_s - start_s) for (_, _, start_s), milli in groups.items()
        )
    total = 0.0
    for (attempt, flavor, start_s), milli in sorted(groups.items()):
        held_gpu_s = milli / 1000 * max(0.0, now_s - start_s)
        share = busy_share(session, job.id, attempt)
        session.add(
            UsageEntry(
                job_id=job.id,
                attempt=attempt,
                team=team,
                project=job.project,
                user_name=job.user_name,
                flavor=flavor,
                priority_class=job.priority_class,
                start_s=start_s,
                end_s=max(start_s, now_s),
                gpu_milli=milli,
                used_gpu_s=None if share is None else held_gpu_s * share,
            )
        )
        total += held_gpu_s
    session.flush()
    return total


def capacity_gpu_us(session: Session, start_s: float, end_s: float) -> dict[str, int]:
    """GPU-microseconds each flavor's nodes existed in [start_s, end_s): each node counted
    from when it joined (`NodeRecord.created_s`), so idle is never charged for capacity the
    cluster did not have yet. Whole microseconds per node, as the chargeback counts."""
    out: dict[str, int] = defaultdict(int)
    for node in session.scalars(select(NodeRecord)):
        since = node.created_s if node.created_s is not None else node.updated_s
        lo, hi = max(start_s, since), end_s
        if hi > lo:
            out[node.accelerator] += node.gpus * (round(hi * 1e6) - round(lo * 1e6))
    return dict(out)


def capacity_spans(session: Session, until_s: float) -> dict[str, list[tuple[float, float, int]]]:
    """Each flavor's GPUs and when they existed, up to `until_s`: one (from_s, to_s, gpus)
    per node, from when it joined the cluster (`NodeRecord.created_s`), as `chargeback`
    takes them to count capacity per stretch of a period (its rates may change inside).

    Every flavor the store has nodes of is named, with no spans where none of its nodes
    had joined by `until_s`: `chargeback` counts a flavor it is not given spans for as
    `capacity_gpus` × the whole period, so leaving it out billed a month before the
    cluster existed 17,280 idle GPU-hours, and the month before an L4 node joined its
    4 GPUs × 744 h of idle ($2,083.20 at $0.70)."""
    out: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
    for node in session.scalars(select(NodeRecord).order_by(NodeRecord.name)):
        since = node.created_s if node.created_s is not None else node.updated_s
        spans = out[node.accelerator]  # named even when the node joined after until_s
        if until_s > since:
            spans.append((since, until_s, node.gpus))
    return dict(out)


def usage_records(
    session: Session, start_s: float, end_s: float, now_s: float, team: str | None = None
) -> list[UsageRecord]:
    """Ledger rows overlapping [start_s, end_s) plus open allocations (clipped to now).
    Columns, not ORM objects: the overview reads a month of a 1,000-GPU cluster's ledger
    (thousands of rows) at every render, and loading entities cost most of the page."""
    q = select(
        UsageEntry.job_id,
        UsageEntry.attempt,
        UsageEntry.team,
        UsageEntry.project,
        UsageEntry.user_name.label("user"),
        UsageEntry.flavor,
        UsageEntry.priority_class,
        UsageEntry.start_s,
        UsageEntry.end_s,
        UsageEntry.gpu_milli,
        UsageEntry.used_gpu_s,
    ).where(UsageEntry.end_s > start_s, UsageEntry.start_s < end_s)
    if team is not None:
        q = q.where(UsageEntry.team == team)
    out = [UsageRecord(**row._asdict()) for row in session.execute(q)]  # named as its fields
    out.extend(_open(session, start_s, end_s, now_s, team))
    return out


def _open(
    session: Session, start_s: float, end_s: float, now_s: float, team: str | None
) -> list[UsageRecord]:
    """Open allocations as records up to now, one per attempt, flavor and start; the busy
    shares of all of them read at once (`open_busy_shares`)."""
    if not now_s > start_s:
        return []
    q = (
        select(
            Allocation.job_id,
            Allocation.attempt,
            Allocation.flavor,
            Allocation.allocated_s,
            Allocation.milli,
            Team.name,
            Job.project,
            Job.user_name,
            Job.priority_class,
        )
        .join(Job, Job.id == Allocation.job_id)
        .join(Team, Team.id == Job.team_id)
        .where(Allocation.released_s.is_(None), Allocation.allocated_s < end_s)
    )
    if team is not None:
        q = q.where(Team.name == team)
    milli: dict[tuple[int, int, str, float], int] = defaultdict(int)
    about: dict[int, tuple[str, str | None, str, str]] = {}
    for job_id, attempt, flavor, alloc_s, held, team_name, project, user, pc in session.execute(q):
        milli[(job_id, attempt, flavor, alloc_s)] += held
        about[job_id] = (team_name, project, user, pc)
    shares = open_busy_shares(session) if milli else {}
    out = []
    for (job_id, attempt, flavor, alloc_s), held in sorted(milli.items()):
        team_name, project, user, pc = about[job_id]
        share = shares.get((job_id, attempt))
        held_gpu_s = held / 1000 * max(0.0, now_s - alloc_s)
        out.append(
            UsageRecord(
                job_id=job_id,
                attempt=attempt,
                team=team_name,
                project=project,
                user=user,
                flavor=flavor,
                priority_class=pc,
                start_s=alloc_s,
                end_s=max(alloc_s, now_s),
                gpu_milli=held,
                used_gpu_s=None if share is None else held_gpu_s * share,
            )
        )
    return out


def month_start_s(now_s: float) -> float:
    now = datetime.fromtimestamp(now_s, UTC)
    return datetime(now.year, now.month, 1, tzinfo=UTC).timestamp()


def month_gpu_hours(session: Session, team: str, now_s: float) -> float:
    """GPU-hours a team has held this calendar month (UTC), running jobs included."""
    start = month_start_s(now_s)
    hours = 0.0
    for r in usage_records(session, start, now_s, now_s, team):
        overlap = min(r.end_s, now_s) - max(r.start_s, start)
        hours += r.gpu_milli / 1000 * max(0.0, overlap) / 3600
    return hours


def balance_problems(session: Session) -> list[str]:
    """Invariant check (tests, `gpufleet db check`): every released allocation is in the
    ledger with the same GPU-seconds, and no ledger row lacks its allocations. An attempt
    with an `unbilled` event (it never ran on the engine) has no ledger rows at all."""
    unbilled = set(
        session.execute(
            select(JobEvent.job_id, JobEvent.attempt).where(JobEvent.kind == UNBILLED)
        ).tuples()
    )
    released: dict[tuple[int, int], float] = defaultdict(float)
    for a in session.scalars(select(Allocation).where(Allocation.released_s.is_not(None))):
        assert a.released_s is not None
        if (a.job_id, a.attempt) not in unbilled:
            released[(a.job_id, a.attempt)] += a.milli / 1000 * (a.released_s - a.allocated_s)
    ledger: dict[tuple[int, int], float] = defaultdict(float)
    for u in session.scalars(select(UsageEntry)):
        ledger[(u.job_id, u.attempt)] += u.gpu_milli / 1000 * (u.end_s - u.start_s)
    problems = []
    for key in sorted(set(released) | set(ledger)):
        if abs(released.get(key, 0.0) - ledger.get(key, 0.0)) > 1e-6:
            problems.append(
                f"job {key[0]} attempt {key[1]}: allocations {released.get(key, 0.0):.3f} "
                f"GPU-s, ledger {ledger.get(key, 0.0):.3f} GPU-s"
            )
    return problems


def double_allocations(session: Session) -> Sequence[str]:
    """Devices held by more than one live allocation (the unique index should make it empty)."""
    q = (
        select(Allocation.device)
        .where(Allocation.released_s.is_(None), or_(Allocation.kind != "share"))
        .group_by(Allocation.device)
        .having(func.count() > 1)
    )
    return session.scalars(q).all()
