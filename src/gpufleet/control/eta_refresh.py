"""The ETA child's work: read the live queue, estimate each pending job's start with
`eta.estimate_starts`, write the queue snapshot's ETA columns.

Apart from `eta` (pure: a queue in, start times out) because it reads the store through
`jobs.live_queue`, and `jobs` imports `eta`'s running-job form: one direction each way.

What the store says beyond `live_queue` and the replay must know, or its ETAs are wrong
for as long as that state lasts (each was seen hours off):
- nodes down or drained take no new job (`eta.estimate_starts(unavailable=)`);
- a stopping job ends by its stop deadline, not at its runtime estimate: a cancelled one
  is gone then, a preempted one (or one whose node went down) is requeued;
- an admitted job (placed, waiting for its victims to stop) holds its planned GPUs from
  now and runs its runtime from when they are free.

The snapshot's `etas` maps a pending job's id to its expected start (None: none within
the horizon); a job that can never start as things are also has the key
`NEVER_PREFIX + id`, so a page can say "never" rather than "no estimate" (`eta_kind`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from gpufleet.cluster import Cluster
from gpufleet.control.eta import RunningJob, estimate_starts, queue_cycle_s
from gpufleet.control.jobs import SPEC_COLUMNS, LiveQueue, live_queue, spec_of
from gpufleet.control.models import Job, NodeRecord, QueueSnapshot, Team
from gpufleet.sched.preempt import GRACE_PERIOD_S
from gpufleet.specs.jobs import JobSpec, Placement

NEVER_PREFIX = "never:"
ENDS = ("cancel", "idle")  # a job stopped for these ends; for anything else it is requeued
EtaKind = Literal["unknown", "never", "beyond", "at"]


@dataclass(frozen=True)
class ReplayQueue:
    """The live queue in the form the replay must see it (the module's docstring says why):
    running jobs with stopping ones cut at their deadline and admitted ones on their
    planned GPUs, pending jobs with the preempted ones requeued, and the nodes that take no
    new job. The leader's ETAs and the portal's what-if read it alike, so a what-if's
    baseline is the ETA a job's page shows."""

    queue: LiveQueue
    unavailable: frozenset[str]


def replay_queue(
    s: Session, cluster: Cluster, now_s: float, grace_s: float = GRACE_PERIOD_S
) -> ReplayQueue:
    """Read the live queue for a replay from `now_s`. `grace_s`: a stopping job not yet
    signalled is assumed gone that long from now (the reconciler's grace period)."""
    queue = live_queue(s, cluster, now_s)
    unavailable = frozenset(s.scalars(select(NodeRecord.name).where(NodeRecord.state != "up")))
    stopping = {
        str(i): (why, deadline)
        for i, why, deadline in s.execute(
            select(Job.id, Job.stop_for, Job.stop_deadline_s).where(Job.state == "stopping")
        )
    }
    names: dict[int, str] = dict(s.execute(select(Team.id, Team.name)).all())
    admitted = s.execute(
        select(*SPEC_COLUMNS).where(Job.state == "admitted").order_by(Job.id)
    ).all()
    if queue.teams is None:
        return ReplayQueue(queue, unavailable)
    running, requeued, freed = _stopping_form(queue.running, stopping, now_s, grace_s)
    running += [_admitted(cluster, row, names[row.team_id], freed, now_s) for row in admitted]
    replayed = LiveQueue(queue.teams, tuple(running), (*queue.pending, *requeued))
    return ReplayQueue(replayed, unavailable)


def refresh_etas(
    sessions: sessionmaker[Session],
    cluster: Cluster,
    profile: str,
    now_s: float,
    *,
    grace_s: float = GRACE_PERIOD_S,
) -> int:
    """Re-simulate the live queue forward and store every pending job's estimated start in
    the queue snapshot (only its ETA columns, so the reconciler's order and reasons stay).

    Reads the store in its own session, so it can run in another thread or process than
    the reconciler; coarser simulated cycles for long queues keep it cheap, at the price
    of ETAs accurate to about one such cycle. `grace_s`: as `replay_queue`'s. Returns how
    many pending jobs got an ETA."""
    with sessions() as s:
        replay = replay_queue(s, cluster, now_s, grace_s)
    queue = replay.queue
    if queue.teams is None:
        return 0
    etas: dict[str, float | None] = {}
    if queue.pending:
        result = estimate_starts(
            cluster,
            queue.teams,
            queue.running,
            queue.pending,
            now_s=now_s,
            profile=profile,
            cycle_interval_s=queue_cycle_s(len(queue.pending)),
            unavailable=replay.unavailable,
        )
        etas = dict(result.start_s)
        etas.update({NEVER_PREFIX + name: None for name in result.never})
    with sessions.begin() as s:
        s.execute(
            update(QueueSnapshot)
            .where(QueueSnapshot.name == "main")
            .values(etas=etas, eta_at_s=now_s)
        )
    return len(queue.pending)


def eta_kind(etas: Mapping[str, float | None], job_id: int) -> EtaKind:
    """What the last refresh said of a pending job: "at" a time, "never" as things are,
    "beyond" the horizon, or "unknown" (it was not pending at the last refresh)."""
    key = str(job_id)
    if key not in etas:
        return "unknown"
    if NEVER_PREFIX + key in etas:
        return "never"
    return "beyond" if etas[key] is None else "at"


def _stopping_form(
    running: tuple[RunningJob, ...],
    stopping: Mapping[str, tuple[str | None, float | None]],
    now_s: float,
    grace_s: float,
) -> tuple[list[RunningJob], list[JobSpec], dict[str, float]]:
    """The running jobs as the replay should see them: a cancelled (or idle-reclaimed)
    stopping job runs to its stop deadline; any other stopping job gives its GPUs up now
    (to the job admitted on them: the replay simulates no grace) and waits again, queued
    from now, as the reconciler requeues it. Also returns, per node, when the last of
    those requeued jobs is gone from it (when a job admitted there starts)."""
    out: list[RunningJob] = []
    requeued: list[JobSpec] = []
    freed: dict[str, float] = {}
    for r in running:
        name = r.spec.name
        if name not in stopping:
            out.append(r)
            continue
        why, deadline = stopping[name]
        end_s = max(now_s, now_s + grace_s if deadline is None else deadline)
        if why in ENDS:
            out.append(RunningJob(r.spec, r.flavor, r.started_s, end_s))
            continue
        update_: dict[str, Any] = {"state": "pending", "placement": [], "started_s": None}
        update_.update(order_key_s=None, submitted_s=now_s)  # queued again from now
        requeued.append(r.spec.model_copy(update=update_))
        for p in r.spec.placement:
            freed[p.node] = max(freed.get(p.node, now_s), end_s)
    return out, requeued, freed


def _admitted(
    cluster: Cluster,
    row: Any,
    team: str,
    freed: Mapping[str, float],
    now_s: float,
) -> RunningJob:
    """An admitted job as running on its planned placement from now (no victim may take
    it), expected to end its runtime after the victims on its nodes are gone (`freed`;
    unknown runtime: the replay's default from now)."""
    spec = spec_of(row, team)
    placement = [Placement.model_validate(p) for p in row.placement]
    start_s = max([now_s, *(freed.get(p.node, now_s) for p in placement)])
    end_s = None
    if spec.runtime_estimate_s is not None:
        runtime_s = spec.runtime_estimate_s
        if spec.max_runtime_s is not None:
            runtime_s = min(runtime_s, spec.max_runtime_s)
        end_s = start_s + runtime_s
    update_ = {"state": "running", "placement": placement, "started_s": now_s}
    spec = spec.model_copy(update={**update_, "preemptible": False})
    flavor = cluster.node(placement[0].node).accelerator
    return RunningJob(spec=spec, flavor=flavor, started_s=now_s, expected_end_s=end_s)
