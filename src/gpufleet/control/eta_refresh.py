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
  now and runs its runtime from when they are free;
- work a job's earlier attempts saved is not done again (`saved_work`: up to each
  attempt's last checkpoint, or, for a checkpointing job being stopped with a grace
  period, up to the stop request, when it is asked to save), as the emulated executor
  and a real job resuming from its checkpoint run only the rest;
- a job in its restart backoff arrives when the backoff ends (`Job.not_before_s`), since
  the reconciler leaves it out of every cycle until then.

The snapshot's `etas` maps a pending job's id to its expected start (None: none within
the horizon); a job that can never start as things are also has the key
`NEVER_PREFIX + id`, so a page can say "never" rather than "no estimate" (`eta_kind`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from gpufleet.cluster import Cluster
from gpufleet.control.eta import RunningJob, estimate_starts, queue_cycle_s
from gpufleet.control.jobs import SPEC_COLUMNS, LiveQueue, live_queue, spec_of
from gpufleet.control.models import Job, JobEvent, NodeRecord, QueueSnapshot, Team
from gpufleet.sched.preempt import GRACE_PERIOD_S
from gpufleet.specs.jobs import JobSpec, Placement

NEVER_PREFIX = "never:"
ENDS = ("cancel", "idle")  # a job stopped for these ends; for anything else it is requeued
UNSIGNALLED = ("node failure",)  # killed without the checkpoint request (no grace period)
CHUNK = 5000  # ids per IN (...) list: well within every database's limit on parameters
EtaKind = Literal["unknown", "never", "beyond", "at"]


class Stopping(NamedTuple):
    """A stopping job as the store has it: why it stops and its stop deadline (None: not
    signalled yet)."""

    why: str | None
    deadline: float | None


@dataclass(frozen=True)
class ReplayQueue:
    """The live queue in the form the replay must see it (the module's docstring says why):
    running jobs with stopping ones cut at their deadline and admitted ones on their
    planned GPUs, pending jobs with the preempted ones requeued, and the nodes that take no
    new job; `done_s` (job -> work its earlier attempts saved, `saved_work`) and
    `not_before` (pending job -> end of its restart backoff), for `estimate_starts`. The
    leader's ETAs and the portal's what-if read it alike, so a what-if's baseline is the
    ETA a job's page shows."""

    queue: LiveQueue
    unavailable: frozenset[str]
    done_s: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    not_before: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))


def replay_queue(
    s: Session, cluster: Cluster, now_s: float, grace_s: float = GRACE_PERIOD_S
) -> ReplayQueue:
    """Read the live queue for a replay from `now_s`. `grace_s`: a stopping job not yet
    signalled is assumed gone that long from now (the reconciler's grace period)."""
    queue = live_queue(s, cluster, now_s)
    unavailable = frozenset(s.scalars(select(NodeRecord.name).where(NodeRecord.state != "up")))
    stopping = {
        str(i): Stopping(why, deadline)
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
    done = saved_work(s, stopping)
    backoff = select(Job.id, Job.not_before_s).where(
        Job.state == "pending", Job.not_before_s > now_s
    )
    not_before = {str(i): float(at) for i, at in s.execute(backoff) if at is not None}
    running, requeued, freed = _stopping_form(queue.running, stopping, now_s, grace_s)
    running += [
        _admitted(cluster, row, names[row.team_id], freed, now_s, done_s=done.get(str(row.id), 0.0))
        for row in admitted
    ]
    replayed = LiveQueue(queue.teams, tuple(running), (*queue.pending, *requeued))
    return ReplayQueue(replayed, unavailable, MappingProxyType(done), MappingProxyType(not_before))


def saved_work(s: Session, stopping: Mapping[str, Stopping]) -> dict[str, float]:
    """Seconds of each live job's work that its earlier attempts saved, from the store's
    events: per attempt, its last `checkpointed` less its `running` (its start), summed,
    the emulated executor's rule (`executors.emulated`) at speed 1, as the replay runs.

    "Earlier" is every attempt of a pending or admitted job, the attempts before the
    current one of a starting or running job, and all of a stopping job's, which the
    replay requeues (`stopping`, read by `replay_queue`): a stopping job that checkpoints,
    asked to stop with a grace period, is taken to save its work up to the stop request
    (the emulated job answers it at once; a real one within its grace). An attempt
    stopped while it was starting has no `running` event and counts for nothing. Jobs that
    never checkpointed are not read."""
    live = ("pending", "admitted", "starting", "running", "stopping")
    jobs = s.execute(
        select(Job.id, Job.attempt, Job.state, Job.checkpoint_interval_s).where(
            Job.state.in_(live),
            Job.last_checkpoint_s.is_not(None)
            | ((Job.state == "stopping") & Job.checkpoint_interval_s.is_not(None)),
        )
    ).all()
    by_id = {row.id: row for row in jobs}
    ids = sorted(by_id)
    # (job, attempt) -> kind -> (first, last) time of that kind
    seen: dict[tuple[int, int], dict[str, tuple[float, float]]] = {}
    kinds = ("running", "checkpointed", "stopping")
    for at in range(0, len(ids), CHUNK):
        rows = s.execute(
            select(
                JobEvent.job_id,
                JobEvent.attempt,
                JobEvent.kind,
                func.min(JobEvent.at_s),
                func.max(JobEvent.at_s),
            )
            .where(JobEvent.job_id.in_(ids[at : at + CHUNK]), JobEvent.kind.in_(kinds))
            .group_by(JobEvent.job_id, JobEvent.attempt, JobEvent.kind)
        )
        for job_id, attempt, kind, first, last in rows:
            seen.setdefault((job_id, attempt), {})[kind] = (first, last)
    done: dict[str, float] = {}
    for (job_id, attempt), times in seen.items():
        job = by_id[job_id]
        current = attempt == job.attempt
        if current and job.state in ("starting", "running"):
            continue  # the attempt running now: the replay runs it from its time left
        start = times.get("running")
        if start is None:
            continue
        saved_at = [times["checkpointed"][1]] if "checkpointed" in times else []
        why = stopping[str(job_id)].why if str(job_id) in stopping else None
        signalled = why not in UNSIGNALLED and job.checkpoint_interval_s is not None
        if current and job.state == "stopping" and signalled and "stopping" in times:
            saved_at.append(times["stopping"][0])
        if saved_at:
            name = str(job_id)
            done[name] = done.get(name, 0.0) + max(0.0, max(saved_at) - start[0])
    return done


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
            done_s=replay.done_s,
            not_before=replay.not_before,
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
    stopping: Mapping[str, Stopping],
    now_s: float,
    grace_s: float,
) -> tuple[list[RunningJob], list[JobSpec], dict[str, float]]:
    """The running jobs as the replay should see them: a cancelled (or idle-reclaimed)
    stopping job runs to its stop deadline; any other stopping job gives its GPUs up now
    (to the job admitted on them: the replay simulates no grace) and waits again, queued
    from now, as the reconciler requeues it, with its own runtime estimate (the
    reconciler's view of a stopping job ends at its stop deadline, `_fresh_spec`; this
    spec is the store's, `live_queue`'s). Also returns, per node, when the last of those
    requeued jobs is gone from it (when a job admitted there starts)."""
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
    *,
    done_s: float,
) -> RunningJob:
    """An admitted job as running on its planned placement from now (no victim may take
    it), expected to end its runtime, less the work its earlier attempts saved (`done_s`),
    after the victims on its nodes are gone (`freed`; unknown runtime: the replay's
    default from now)."""
    spec = spec_of(row, team)
    placement = [Placement.model_validate(p) for p in row.placement]
    start_s = max([now_s, *(freed.get(p.node, now_s) for p in placement)])
    end_s = None
    if spec.runtime_estimate_s is not None:
        runtime_s = spec.runtime_estimate_s
        if spec.max_runtime_s is not None:
            runtime_s = min(runtime_s, spec.max_runtime_s)
        end_s = start_s + max(0.0, runtime_s - done_s)
    update_ = {"state": "running", "placement": placement, "started_s": now_s}
    spec = spec.model_copy(update={**update_, "preemptible": False})
    flavor = cluster.node(placement[0].node).accelerator
    return RunningJob(spec=spec, flavor=flavor, started_s=now_s, expected_end_s=end_s)
