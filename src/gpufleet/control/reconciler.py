"""The reconciler: store -> `decide()` -> store -> executor, one numbered cycle at a time.

Each cycle:
1. **observe** — the executor's events (started, checkpointed, exited, lost) are written
   to the store: finished jobs release their GPUs into the ledger; crashed ones are
   requeued with backoff (or fail after `max_restarts`); stopped victims are requeued
   from their last checkpoint; cancelled ones end.
2. **stop** — victims whose checkpoint grace has run out are killed.
3. **start waiting** — jobs admitted onto a victim's GPUs get them once the victim is gone.
4. **decide** — the same `decide()` the simulator calls, on a `State` rebuilt from the
   live allocation rows (the store is the truth; nothing is cached between cycles).
5. **commit** — decisions in one transaction, together with the lease check: victims move
   to `stopping`, admitted jobs get allocation rows (the unique index refuses a GPU
   already held) and move to `starting` with a new attempt number, the queue snapshot
   (order, reasons) is replaced.
6. **drive** — only after the commit: start every `starting` attempt (idempotent per
   attempt, so a crash between commit and start just repeats the start), signal victims.

Because the store is written before the executor is told anything, a crash at any
point leaves either an order not yet given (given at the next cycle) or one given
twice (ignored by the executor): never a job started twice or a GPU held twice. A
transaction that finds a job changed under it (another writer committed between its read
and its write: `Job.version`, SQLAlchemy's version counter), or that PostgreSQL aborts to
break a deadlock, rolls back whole and is done again on fresh reads (`_retrying`); one that
keeps losing gives the cycle up.

Why one file (about 980 lines): a cycle is one transaction over the six steps above, and
every helper here reads or writes that transaction's rows, in that order. The store
(`models`, `lifecycle`), the queue (`jobs`), ETAs (`eta`) and the executors live elsewhere.
It shrinks when one applier replaces `_write` (design 0015, "What is left").
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import insert, select
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.orm.exc import StaleDataError

from gpufleet.cluster import Branch, Claim, Cluster, MigSlice, Share, State, Whole
from gpufleet.control import lifecycle, snapshot
from gpufleet.control.admin import teams_spec
from gpufleet.control.engine_nodes import apply_node_states
from gpufleet.control.eta_refresh import refresh_etas
from gpufleet.control.executors.base import (
    CHECKPOINT_SIGNAL,
    DataInput,
    ExecEvent,
    Executor,
    Inventory,
    Launch,
    RunKey,
    Worker,
)
from gpufleet.control.jobs import SPEC_COLUMNS, in_lead_order, spec_error, spec_of
from gpufleet.control.leader import LeaseLost, renew
from gpufleet.control.ledger import UNBILLED, close_allocations
from gpufleet.control.models import Allocation, AuditEntry, Job, NodeRecord, QueueSnapshot, Team
from gpufleet.control.periodic import TRIES, RaceLostError, retrying
from gpufleet.control.quota_room import NEVER_MARK, QuotaNever, never_under_quota
from gpufleet.sched.apply import placement_spec
from gpufleet.sched.decide import decide
from gpufleet.sched.framework import Decisions
from gpufleet.sched.framework import Placement as Placed
from gpufleet.sched.preempt import GRACE_PERIOD_S
from gpufleet.sched.quota import team_usage_milli
from gpufleet.sched.reasons import Reasons
from gpufleet.specs.jobs import JobSpec

log = logging.getLogger(__name__)
DOWN = "node-down:"
WAITING = "admitted:"  # placeholder holding an admitted job's free planned GPUs
BACKOFF_S = (10.0, 30.0, 90.0, 270.0, 600.0)
# tries of one of a cycle's transactions when it loses a race (a job it writes changed under
# it, a deadlock: `_retrying`), as every retried transaction; then the cycle gives up, and
# the next one reads the store again
STALE_TRIES = TRIES
T = TypeVar("T")


@dataclass(frozen=True)
class ReconcilerConfig:
    profile: str = "default"
    grace_s: float = GRACE_PERIOD_S  # checkpoint grace between the stop signal and the kill
    max_restarts: int = 3  # crash restarts before a job fails
    checkpoint_signal: str = CHECKPOINT_SIGNAL
    lease_s: float = 6.0
    holder: str = "local"
    eta_interval_s: float = 30.0  # how often the server re-simulates queue ETAs


@dataclass
class _Live:
    """A cycle's live jobs: pending ones, running ones (starting and stopping included, those
    two as no victims), the stopping ones' names, and admitted jobs -> (team, whole
    placement)."""

    pending: list[JobSpec] = field(default_factory=list)
    running: list[JobSpec] = field(default_factory=list)
    stopping: set[str] = field(default_factory=set)
    admitted: dict[str, tuple[str, list[Claim]]] = field(default_factory=dict)


@dataclass
class CycleReport:
    cycle: int
    at_s: float
    admitted: list[int] = field(default_factory=list)
    preempted: list[int] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)
    pending: int = 0
    running: int = 0
    decide_s: float = 0.0
    wall_s: float = 0.0
    leader: bool = True


class Reconciler:
    def __init__(
        self,
        sessions: sessionmaker[Session],
        cluster: Cluster,
        executor: Executor,
        config: ReconcilerConfig = ReconcilerConfig(),
        *,
        clock: Callable[[], float] = time.time,
        inventory: Inventory | None = None,
    ) -> None:
        self.sessions = sessions
        self.cluster = cluster
        self.executor = executor
        self.config = config
        self.clock = clock
        self.inventory = inventory or Inventory()
        self.cycles = 0
        self.leading = False
        # scheduler views of jobs by (id, version): every change to a job bumps its version
        self._specs: dict[tuple[int, int], JobSpec] = {}
        # the executor's events a cycle polled but could not record (it gave up on a job
        # changing under it): the next cycle records them first
        self._unrecorded: list[ExecEvent] = []

    # -- the cycle ------------------------------------------------------------------------

    def cycle(self) -> CycleReport:
        started = time.perf_counter()
        now = self.clock()
        self.cycles += 1
        report = CycleReport(self.cycles, now)
        was_leading = self.leading
        with self.sessions.begin() as s:
            self.leading = renew(s, "reconciler", self.config.holder, now, self.config.lease_s)
        report.leader = self.leading
        if not self.leading:
            self._unrecorded = []  # the leader's executor reports its own
            return report
        if not was_leading:
            self.adopt()
        try:
            signals = self._steps(now, report)
        except LeaseLost:
            self.leading = False
            report.leader = False
            return report
        except RaceLostError as exc:
            log.warning(
                "cycle %d gave up (%s); nothing of it was written, the next cycle reads the "
                "store again",
                self.cycles,
                exc,
            )
            return report
        for key, checkpoints in signals:
            self._ask_to_stop(key, checkpoints)
        with self.sessions() as s:
            launches = self._launches(s)
        for launch in launches:
            self.executor.start(launch)
        report.wall_s = time.perf_counter() - started
        return report

    def _steps(self, now: float, report: CycleReport) -> list[tuple[RunKey, bool]]:
        """Steps 1 to 5 (the drive step's stop signals are returned). Each transaction is done
        again on a fresh read when a job it writes changed under it (`_retrying`)."""
        self._engine_node_states(now)  # before the poll: see the method
        known = self.executor.active()  # before the poll: what ends during it is in its events
        events, self._unrecorded = [*self._unrecorded, *self.executor.poll(now)], []
        try:
            asked, kills = self._retrying(
                "observe", lambda s: self._observe_step(s, known, events, now, report)
            )
        except RaceLostError:
            self._unrecorded = events
            raise
        for key, checkpoints in asked:
            self._ask_to_stop(key, checkpoints)
        for key in kills:
            self.executor.stop(key)
        self._retrying("start waiting", lambda s: self._start_waiting(s, now))
        return self._retrying("decide", lambda s: self._decide_step(s, now, report))

    def _retrying(self, step: str, work: Callable[[Session], T]) -> T:
        """`work` in a transaction of its own, done again (up to `STALE_TRIES` in all) on a
        fresh read where it lost a race (`periodic.lost_race`): a job it writes changed since
        it read it (another writer committed in between: StaleDataError, which PostgreSQL's
        READ COMMITTED allows in any of the cycle's transactions), or PostgreSQL aborted it
        to break a deadlock or a serialization conflict with another writer. A try that
        failed wrote nothing: its transaction rolled back whole. Raises RaceLostError when
        the last try fails too."""

        def once() -> T:
            with self.sessions.begin() as s:
                return work(s)

        return retrying(once, f"cycle {self.cycles}, {step}", tries=STALE_TRIES)

    def _observe_step(
        self,
        s: Session,
        known: set[RunKey],
        events: list[ExecEvent],
        now: float,
        report: CycleReport,
    ) -> tuple[list[tuple[RunKey, bool]], list[RunKey]]:
        """Steps 1 and 2 in one transaction: the events, node failures, stops."""
        report.finished.clear()  # a try that failed recorded nothing
        self._observe(s, [*events, *self._missing(s, known, events, now)], now, report)
        self._node_failures(s, now)
        return self._stops(s, now)

    def _decide_step(
        self, s: Session, now: float, report: CycleReport
    ) -> list[tuple[RunKey, bool]]:
        """Steps 4 and 5 in one transaction, between two lease renewals."""
        report.admitted.clear()  # a try that failed wrote nothing
        report.preempted.clear()
        # a write first: on SQLite the transaction (and its one-writer lock) then covers the
        # reads the decisions rest on, so a cancel cannot commit between them and the commit;
        # on PostgreSQL one can, and `_commit` finds it by the jobs' versions. The renewal at
        # the end checks the lease again.
        if not renew(s, "reconciler", self.config.holder, now, self.config.lease_s):
            raise LeaseLost("lease lost before the cycle")
        d = self._decide(s, now, report)
        signals = [] if d is None else self._commit(s, d, now, report)
        if not renew(s, "reconciler", self.config.holder, now, self.config.lease_s):
            raise LeaseLost("lease lost during the cycle")
        return signals

    def adopt(self) -> int:
        """On becoming leader (at start, or taking over from a dead server): hand the attempts
        the store says are live to an executor that keeps no files of its own (the emulated
        one, via `adopt`); the local executor finds its own in its run directories."""
        adopt = getattr(self.executor, "adopt", None)
        if adopt is None:
            return 0
        with self.sessions() as s:
            names = {t.id: t.name for t in s.scalars(select(Team))}
            live = ("running", "stopping", "starting")
            jobs = s.scalars(select(Job).where(Job.state.in_(live))).all()
            n = 0
            for job in jobs:
                if job.started_s is None:
                    continue  # never seen running: the drive step starts it (idempotently)
                adopt(self.launch(job, names[job.team_id]), job.started_s, job.last_checkpoint_s)
                n += 1
        return n

    def _ask_to_stop(self, key: RunKey, checkpoints: bool) -> None:
        """A job that checkpoints gets the checkpoint signal first (save now), then the stop
        signal; the kill follows when the grace period is over."""
        self.executor.ask_to_stop(key, self.config.checkpoint_signal if checkpoints else None)

    # -- 1. observe -----------------------------------------------------------------------

    def _observe(
        self, s: Session, events: Sequence[ExecEvent], now: float, report: CycleReport
    ) -> None:
        for ev in events:
            job = s.get(Job, ev.key.job_id)
            if job is None or job.attempt != ev.key.attempt or job.state in lifecycle.FINAL:
                continue  # stale: an earlier attempt, or already settled
            if ev.kind == "started":
                if job.started_s is None and job.state in ("starting", "stopping"):
                    job.started_s = ev.at_s  # a job stopped while starting may start anyway
                if job.state == "starting":
                    lifecycle.move(s, job, "running", ev.at_s)
            elif ev.kind == "staged":
                lifecycle.record(
                    s, job, "staged", ev.at_s, f"data staged in {ev.seconds or 0:.1f} s"
                )
            elif ev.kind == "checkpointed":
                job.last_checkpoint_s = ev.at_s  # its version rises: the scheduler's view reads it
                lifecycle.record(s, job, "checkpointed", ev.at_s)
            elif ev.kind in ("exited", "lost"):
                self._ended(s, job, ev, now)
                report.finished.append(job.id)

    def _missing(
        self, s: Session, known: set[RunKey], events: Sequence[ExecEvent], now: float
    ) -> list[ExecEvent]:
        """Ends the executor reported to a server that died before recording them.

        A live attempt (by the store) that the executor neither runs nor reported ending in
        this poll ended unrecorded: its saved final event is replayed where the executor
        keeps one (`final_event`), else a started attempt counts as lost. A `starting`
        attempt with no record is left alone: the drive step (re)starts it idempotently."""
        ended = {e.key for e in events if e.kind in ("exited", "lost")}
        final = getattr(self.executor, "final_event", None)
        out: list[ExecEvent] = []
        live = select(Job.id, Job.attempt, Job.state).where(Job.state.in_(lifecycle.HOLDING))
        for job_id, attempt, state in s.execute(live):
            key = RunKey(job_id, attempt)
            if key in known or key in ended:
                continue
            event = final(key) if final is not None else None
            if event is not None:
                out.append(event)
            elif state in ("running", "stopping"):
                out.append(ExecEvent(key, "lost", now, detail="the executor no longer runs it"))
        return out

    def _ended(self, s: Session, job: Job, ev: ExecEvent, observed: float) -> None:
        """The attempt is over: its GPUs were free from when it ended, not from when we
        noticed, so the ledger bills exactly the time held. An attempt the engine never ran
        (never reported started, and gone without an exit code: stopped while starting,
        so preempted, cancelled or its node lost) is billed nothing: the engine has no job
        to account for it (`admin slurm reconcile`). An exit code means it ran, even where a
        server killed at the wrong moment missed its start."""
        now = min(observed, ev.at_s) if ev.at_s > 0 else observed
        team = self._team_name(s, job.team_id)
        ran = job.started_s is not None or ev.kind == "exited"
        held_gpu_s = close_allocations(s, job, team, now, billed=ran)
        if ran:
            job.attained_gpu_s += held_gpu_s
        else:
            lifecycle.record(
                s,
                job,
                UNBILLED,
                now,
                f"attempt {job.attempt} never ran on the engine: the {held_gpu_s:,.0f} GPU-s "
                "its GPUs were held while it started are not billed",
            )
            held_gpu_s = 0.0
        lost = _lost_gpu_s(job, held_gpu_s, now)
        job.placement = []
        job.stop_deadline_s = None
        code = ev.exit_code
        what = (
            f"exit code {code}"
            if ev.kind == "exited"
            else f"lost ({ev.detail or 'no exit record'})"
        )
        if job.state == "stopping":
            reason, job.stop_for = job.stop_for, None
            if reason in ("cancel", "idle"):  # idle: reclaimed by the team's idle policy
                job.finished_s = now
                job.exit_code = code
                cause = "a cancel" if reason == "cancel" else "its GPUs sat idle (team policy)"
                lifecycle.move(s, job, "cancelled", now, f"stopped after {cause} ({what})")
            else:
                job.lost_gpu_s += lost
                self._requeue(
                    s,
                    job,
                    now,
                    f"stopped after {reason or 'preemption'} ({what}); "
                    f"{lost / 3600:.2f} GPU-hours since its last checkpoint lost",
                )
            return
        if ev.kind == "exited" and code == 0:
            job.finished_s = now
            job.exit_code = 0
            lifecycle.move(s, job, "succeeded", now)
            return
        job.crashes += 1
        job.lost_gpu_s += lost
        if job.crashes > self.config.max_restarts:
            job.finished_s = now
            job.exit_code = code
            lifecycle.move(s, job, "failed", now, f"{what}; {job.crashes - 1} restarts used")
            return
        wait = BACKOFF_S[min(job.crashes - 1, len(BACKOFF_S) - 1)]
        job.not_before_s = now + wait
        self._requeue(
            s,
            job,
            now,
            f"{what}; restart {job.crashes} of {self.config.max_restarts} in {wait:.0f} s",
        )

    def _requeue(self, s: Session, job: Job, now: float, message: str) -> None:
        job.queued_s = now
        job.queue_order_s = None  # it rejoins by queue time: a lead's earlier move is over
        job.started_s = None
        lifecycle.move(s, job, "pending", now, message)

    def _team_name(self, s: Session, team_id: int) -> str:
        team = s.get(Team, team_id)
        assert team is not None
        return team.name

    # -- 2. stop --------------------------------------------------------------------------

    def _engine_node_states(self, now: float) -> None:
        """Node states the engine reports (Slurm's DOWN/DRAIN), for an executor that has an
        optional `node_states()`: recorded as an admin's `PUT /admin/nodes/{node}` would be
        (`engine_nodes.apply_node_states`), and the jobs of a node now down moved to
        `stopping` at once. That runs before this cycle's poll on purpose: Slurm ends a down
        node's jobs itself (NODE_FAIL), and an end observed while the job is still `running`
        would count as a crash (a restart used, a backoff) instead of a node failure."""
        node_states = getattr(self.executor, "node_states", None)
        if node_states is None:
            return
        reported = node_states()
        if not reported:
            return

        def record(s: Session) -> None:
            if apply_node_states(s, reported, self.executor.name, now):
                self._node_failures(s, now)

        self._retrying("node states", record)

    def _node_failures(self, s: Session, now: float) -> None:
        """Jobs on a node marked down are stopped at once (no grace: the node is gone) and
        requeued when their end is observed; a drained node keeps its jobs running."""
        down = select(NodeRecord.name).where(NodeRecord.state == "down")
        hit = (
            select(Allocation.job_id)
            .where(Allocation.released_s.is_(None), Allocation.node.in_(down))
            .distinct()
        )
        jobs = s.scalars(
            select(Job).where(Job.id.in_(hit), Job.state.in_(("starting", "running")))
        ).all()
        for job in jobs:
            job.stop_for = "node failure"
            job.stop_deadline_s = now
            lifecycle.move(s, job, "stopping", now, "its node is down: requeued elsewhere")

    def _stops(self, s: Session, now: float) -> tuple[list[tuple[RunKey, bool]], list[RunKey]]:
        """Stopping jobs: those new to it (a cancel through the API) get the stop signal and
        their grace period; those past it are killed (their exit is observed next cycle)."""
        asked: list[tuple[RunKey, bool]] = []
        kills: list[RunKey] = []
        for j in s.scalars(select(Job).where(Job.state == "stopping")):
            key = RunKey(j.id, j.attempt)
            if j.stop_deadline_s is None:
                j.stop_deadline_s = now + self.config.grace_s
                asked.append((key, j.checkpoint_interval_s is not None))
            elif j.stop_deadline_s <= now:
                kills.append(key)
        return asked, kills

    # -- 3. admitted jobs waiting for their victims ---------------------------------------

    def _start_waiting(self, s: Session, now: float) -> None:
        waiting = s.scalars(select(Job).where(Job.state == "admitted").order_by(Job.id)).all()
        if not waiting:
            return
        held = self._held_devices(s)
        down = set(s.scalars(select(NodeRecord.name).where(NodeRecord.state != "up")))
        for job in waiting:
            if {p["node"] for p in job.placement} & down:
                job.placement = []
                lifecycle.move(s, job, "pending", now, "a node of its placement went down")
                continue
            devices = {d for _, d, _ in _rows(self.cluster, job.placement)}
            if devices & held:
                continue  # a victim still holds some of them
            self._allocate(s, job, job.placement, job.flavor or "", now)
            s.flush()  # the unique index refuses a device already held
            lifecycle.move(s, job, "starting", now)

    def _held_devices(self, s: Session) -> set[str]:
        return set(
            s.scalars(
                select(Allocation.device).where(
                    Allocation.released_s.is_(None), Allocation.kind != "share"
                )
            )
        )

    # -- 4. decide ------------------------------------------------------------------------

    def _decide(self, s: Session, now: float, report: CycleReport) -> Decisions | None:
        teams = teams_spec(s)
        if teams is None:
            return None
        state = self._state(s)
        live = self._live(s, state, now)
        running, pending = live.running, in_lead_order(live.pending)  # leads' moves
        report.pending, report.running = len(pending), len(running)
        if not pending:
            self._snapshot(s, now, [], {})
            return None
        t0 = time.perf_counter()
        d = decide(
            self.cluster,
            state,
            running,
            pending,
            teams,
            profile=self.config.profile,
            now_s=now,
            cycle=self.cycles,
            usage=committed_usage(state, running, live.stopping, live.admitted),
        )
        report.decide_s = time.perf_counter() - t0
        # the order the cycle looked at them (priority within a team, fair share across
        # teams, ...), not submission order: a lead raising a job moves it up
        team_of = {j.name: j.team for j in pending}
        looked = set(d.considered)
        ranked = [*d.considered, *(n for n in team_of if n not in looked)]
        order = [(int(n), team_of[n]) for n in ranked if n not in d.admitted]
        waiting = [j for j in pending if j.name not in d.admitted]
        never = never_under_quota(waiting, teams, self.cluster)
        self._snapshot(s, now, order, _with_never(d.pending_reasons, never))
        self._tell_never(s, never, now)
        return d

    def _tell_never(self, s: Session, never: Mapping[str, QuotaNever], now: float) -> None:
        """Keep each waiting job's stored reason and timeline in step with `never`: a job
        its team's quotas no longer let start gets the sentence as its reason and a `quota`
        event, once (when the sentence changes); one they let start again gets an event
        saying so. Not cancelled: a quota can grow back, and the team decides. Read here,
        not where quotas change, so every way of changing them (API, portal, CLI, a teams
        file, a cohort's lending) is covered; one query a cycle, of the jobs so marked."""
        marked = dict(
            s.execute(
                select(Job.id, Job.reason).where(
                    Job.state == "pending", Job.reason.startswith(NEVER_MARK, autoescape=True)
                )
            ).all()
        )
        now_never = {int(n): w.text() for n, w in never.items()}
        changed = [i for i, text in now_never.items() if marked.get(i) != text]
        again = [i for i in marked if i not in now_never]
        if not changed and not again:
            return
        for job in s.scalars(select(Job).where(Job.id.in_(changed + again))):
            if job.state != "pending":
                continue
            if job.id in now_never:
                job.reason = now_never[job.id]
                lifecycle.record(s, job, "quota", now, job.reason)
            else:
                job.reason = "queued"
                lifecycle.record(
                    s, job, "quota", now, "its team's quotas let it start again: it waits as before"
                )

    def _live(self, s: Session, state: State, now: float) -> _Live:
        """The live jobs as the cycle sees them; admitted jobs' free planned GPUs are held in
        `state` (a `WAITING` placeholder) so nothing else is placed on them."""
        names = {t.id: t.name for t in s.scalars(select(Team))}
        heads = s.execute(
            select(Job.id, Job.version, Job.state, Job.queued_s, Job.not_before_s).where(
                Job.state.in_(("pending", *lifecycle.ACTIVE))
            )
        ).all()
        # full rows (JSON decoded, validated) only for jobs new or changed since last cycle
        missing = [h.id for h in heads if (h.id, h.version) not in self._specs]
        fresh: dict[tuple[int, int], Any] = {}
        for chunk in range(0, len(missing), 5000):
            ids = missing[chunk : chunk + 5000]
            for row in s.execute(select(*SPEC_COLUMNS).where(Job.id.in_(ids))):
                fresh[(row.id, row.version)] = row
        live = _Live()
        specs: dict[tuple[int, int], JobSpec] = {}
        for head in sorted(heads, key=lambda r: (r.queued_s, r.id)):
            key = (head.id, head.version)
            if head.state == "admitted":  # never cached, so always freshly read
                full = fresh.get(key)
                if full is None:
                    continue
                claims = _claims(self.cluster, full.placement)
                planned = [c for c in claims if _free(state, c)]
                if planned:
                    state.allocate(WAITING + str(head.id), *planned)
                live.admitted[str(head.id)] = (names[full.team_id], claims)
                continue
            if (
                head.state == "pending"
                and head.not_before_s is not None
                and head.not_before_s > now
            ):
                continue  # restart backoff
            spec = self._specs.get(key) or _fresh_spec(s, fresh.get(key), names, now)
            if spec is None:
                continue
            specs[key] = spec
            if head.state == "pending":
                live.pending.append(spec)
            elif head.state == "stopping":
                live.running.append(spec.model_copy(update={"preemptible": False}))  # going
                live.stopping.add(spec.name)
            elif head.state == "starting":  # never a victim before the engine runs it
                live.running.append(spec.model_copy(update={"preemptible": False}))
            else:
                live.running.append(spec)
        self._specs = specs  # jobs that left the queue drop out of the cache
        return live

    # -- queue ETAs (off the cycle: the server runs them on their own thread) --------------

    def estimate_etas(self) -> int:
        """Re-simulate the queue forward and store every pending job's estimated start
        (`eta_refresh.refresh_etas`; the server runs it in its own process, tests call it here)."""
        return refresh_etas(
            self.sessions,
            self.cluster,
            self.config.profile,
            self.clock(),
            grace_s=self.config.grace_s,
        )

    def _state(self, s: Session) -> State:
        """The allocation state rebuilt from the live allocation rows (and down nodes)."""
        state = State(self.cluster)
        whole: dict[tuple[int, str], list[int]] = defaultdict(list)
        other: dict[int, list[Claim]] = defaultdict(list)
        live = select(
            Allocation.job_id,
            Allocation.kind,
            Allocation.node,
            Allocation.gpu,
            Allocation.slice_id,
            Allocation.milli,
        ).where(Allocation.released_s.is_(None))
        for job_id, kind, node, gpu, slice_id, milli in s.execute(live):
            if kind == "whole" and gpu is not None:
                whole[(job_id, node)].append(gpu)
            elif kind == "slice" and slice_id is not None:
                other[job_id].append(MigSlice(slice_id))
            elif gpu is not None:
                other[job_id].append(Share(node, gpu, milli))
        claims: dict[int, list[Claim]] = defaultdict(list)
        for (job_id, node), gpus in whole.items():
            claims[job_id].append(Whole(node, tuple(sorted(gpus))))
        for job_id, extra in other.items():
            claims[job_id].extend(extra)
        for job_id, held in sorted(claims.items()):
            state.allocate(str(job_id), *held)  # raises if the store double-books
        nodes = self._node_names()
        for node in s.scalars(select(NodeRecord.name).where(NodeRecord.state != "up")):
            if node in nodes:
                free = state.free_gpu_ids(node)
                if free:
                    state.allocate(DOWN + node, Whole(node, free))
        return state

    def _node_names(self) -> set[str]:
        return {n.name for n in self.cluster.nodes}

    def _snapshot(
        self, s: Session, now: float, order: list[tuple[int, str]], reasons: Mapping[str, str]
    ) -> None:
        """The queue as the API reads it (`control.snapshot`): (job id, team) in queue order
        and each waiting job's reason (keyed by job name)."""
        row = s.get(QueueSnapshot, "main")
        if row is None:
            row = QueueSnapshot(name="main", etas={}, eta_at_s=None)
            s.add(row)
        row.cycle = self.cycles
        row.at_s = now
        row.order, row.reasons = snapshot.encode(order, reasons)

    # -- 5. commit ------------------------------------------------------------------------

    def _commit(
        self, s: Session, d: Decisions, now: float, report: CycleReport
    ) -> list[tuple[RunKey, bool]]:
        """Write the decisions: one query loads the jobs, one flush writes everything (the
        unique index on live devices checks every new allocation at that flush)."""
        ids = [int(n) for n in (*d.preempted, *d.admitted)]
        jobs = {j.id: j for j in s.scalars(select(Job).where(Job.id.in_(ids)))} if ids else {}
        for job in jobs.values():  # `_specs`: the (id, version) pairs the decisions rest on
            if (job.id, job.version) not in self._specs:  # PostgreSQL: another writer's
                raise StaleDataError(f"job {job.id} changed after the cycle read it")
        with s.no_autoflush:
            signals = self._write(s, d, jobs, now, report)
        s.flush()
        return signals

    def _write(
        self, s: Session, d: Decisions, jobs: dict[int, Job], now: float, report: CycleReport
    ) -> list[tuple[RunKey, bool]]:
        signals: list[tuple[RunKey, bool]] = []
        for name, why in d.preempted.items():
            victim = jobs[int(name)]
            if victim.state not in ("starting", "running"):
                continue
            victim.stop_for = "preempt"
            victim.stop_deadline_s = now + self.config.grace_s
            # the core states its default grace; this service's is its own setting
            reason = why.text(grace_s=self.config.grace_s)
            by = jobs.get(int(why.preemptor))  # the control plane's job names are ids
            # the victim's team reads its events: another team's job and team stay out of
            # them (and of logs and the CLI); the full sentence is the admins' (audit log)
            same_team = by is not None and by.team_id == victim.team_id
            shown = reason if same_team else why.public_text(grace_s=self.config.grace_s)
            lifecycle.move(s, victim, "stopping", now, shown)
            s.add(
                AuditEntry(
                    at_s=now,
                    actor="scheduler",
                    role="system",
                    action=lifecycle.PREEMPTED_AUDIT,
                    target=f"job/{victim.id}",
                    detail={
                        "attempt": victim.attempt,
                        "message": reason,
                        "preemptor": None if by is None else by.id,
                        "preemptor_team": None if by is None else self._team_name(s, by.team_id),
                    },
                )
            )
            signals.append(
                (RunKey(victim.id, victim.attempt), victim.checkpoint_interval_s is not None)
            )
            report.preempted.append(victim.id)
        held = self._held_devices(s)
        for name, placed in d.admitted.items():
            job = jobs[int(name)]
            placement = [placement_spec(p).model_dump(exclude_defaults=True) for p in placed]
            flavor = d.flavors.get(name, "")
            job.flavor = flavor
            job.placement = placement
            job.reason = ""
            if {dev for _, dev, _ in _rows(self.cluster, placement)} & held:
                lifecycle.move(
                    s, job, "admitted", now, "placed; waiting for preempted jobs to stop"
                )
            else:
                self._allocate(s, job, placement, flavor, now)
                lifecycle.move(s, job, "starting", now, f"placed on {_where(placed)}")
            report.admitted.append(job.id)
        return signals

    def _allocate(
        self, s: Session, job: Job, placement: list[Any], flavor: str, now: float
    ) -> None:
        """A new attempt and its allocation rows (one bulk insert, not one object per GPU)."""
        job.attempt += 1
        job.not_before_s = None
        rows = [
            {
                "job_id": job.id,
                "attempt": job.attempt,
                "worker": row["worker"],
                "kind": kind,
                "node": row["node"],
                "gpu": row.get("gpu"),
                "slice_id": row.get("slice_id"),
                "device": device,
                "milli": row["milli"],
                "flavor": flavor or self.cluster.node(row["node"]).accelerator,
                "allocated_s": now,
                "released_s": None,
            }
            for kind, device, row in _rows(self.cluster, placement)
        ]
        s.execute(insert(Allocation), rows)

    # -- 6. drive -------------------------------------------------------------------------

    def _launches(self, s: Session) -> list[Launch]:
        jobs = s.scalars(select(Job).where(Job.state == "starting").order_by(Job.id)).all()
        names = {t.id: t.name for t in s.scalars(select(Team))}
        return [self.launch(j, names[j.team_id]) for j in jobs]

    def launch(self, job: Job, team: str) -> Launch:
        workers = []
        per_node: dict[str, int] = defaultdict(int)
        for rank, p in enumerate(job.placement):
            node = p["node"]
            gpus = tuple(p.get("gpus", ()))
            slices = tuple(p.get("mig_slices", ()))
            uuids = self.inventory.gpu_uuids.get(node, ())
            if slices:
                devices = tuple(self.inventory.mig_uuids.get(sid, sid) for sid in slices)
            else:
                devices = tuple(uuids[g] if g < len(uuids) else str(g) for g in gpus)
            workers.append(
                Worker(
                    rank=rank,
                    node=node,
                    local_rank=per_node[node],
                    gpus=gpus,
                    devices=devices,
                    gpu_fraction=p.get("fraction"),
                )
            )
            per_node[node] += 1
        duration = job.runtime_estimate_s
        return Launch(
            key=RunKey(job.id, job.attempt),
            job_name=job.name,
            team=team,
            command=tuple(job.command),
            env={str(k): str(v) for k, v in job.env.items()},
            workers=tuple(workers),
            duration_s=duration,
            checkpoint_interval_s=job.checkpoint_interval_s,
            data=tuple(DataInput(d["source"], d["target"]) for d in job.data),
            master_port=0,  # the executor picks a port free where rank 0 runs
        )


def _with_never(reasons: Mapping[str, str], never: Mapping[str, QuotaNever]) -> Mapping[str, str]:
    """The cycle's reasons with each job in `never` given that reason alone (what else it
    waits for does not matter while it can never start)."""
    if not never:
        return reasons
    if isinstance(reasons, Reasons):
        for name, why in never.items():
            reasons.note(name, [why], 0)
        return reasons
    return {**reasons, **{name: why.text() for name, why in never.items()}}


def _fresh_spec(s: Session, row: Any, names: dict[int, str], now_s: float) -> JobSpec | None:
    """The scheduler's view of a job row read this cycle; None for a row that changed
    between the two reads (the next cycle has it) or cannot become a spec (quarantined)."""
    if row is None:
        return None
    try:
        spec = spec_of(row, names[row.team_id])
    except ValueError as exc:  # pydantic's ValidationError is one
        _quarantine(s, row.id, exc, now_s)
        return None
    gone_s = _stop_deadline_runtime_s(row)
    return spec if gone_s is None else spec.model_copy(update={"runtime_estimate_s": gone_s})


def _stop_deadline_runtime_s(row: Any) -> float | None:
    """A signalled stopping job's runtime as the scheduler should expect it: to its stop
    deadline, when its GPUs are free whatever it does (the grace period ends in a kill),
    if that is sooner than its estimate. Backfill reads a running job's end from its
    runtime estimate: during a cancel's 30 s grace period the job waiting for those GPUs
    was reserved others "from ~50 min" and its page said so."""
    if row.state != "stopping" or row.stop_deadline_s is None or row.started_s is None:
        return None
    left_s = max(row.stop_deadline_s - row.started_s, 1e-3)
    estimate = row.runtime_estimate_s
    return left_s if estimate is None or left_s < estimate else None


def _quarantine(s: Session, job_id: int, exc: ValueError, now_s: float) -> None:
    """Set aside a job whose stored row does not make a valid `JobSpec` (a hand edit, or a
    value an older server let in): it is left out of the cycle, with an event and a reason on
    the job, instead of failing the cycle for every team. Its GPUs, if it holds any, stay
    held (the state is rebuilt from the allocation rows), so nothing is double-booked. The
    event is written once: the reason it sets is compared first."""
    reason = (
        f"quarantined: its stored row is not a valid job ({spec_error(exc)}); "
        "an admin must correct the row or cancel the job"
    )
    job = s.get(Job, job_id)
    if job is None or job.reason == reason:
        return
    job.reason = reason
    lifecycle.record(s, job, "quarantined", now_s, reason)
    log.warning("job %d quarantined: %s", job_id, reason)


def _lost_gpu_s(job: Job, held_gpu_s: float, end_s: float) -> float:
    """GPU-seconds of this attempt after its last acknowledged checkpoint: the work a restart
    repeats (all of the attempt when it never checkpointed)."""
    if job.started_s is None or end_s <= job.started_s:
        return 0.0
    ran_s = end_s - job.started_s
    since = job.last_checkpoint_s
    unsaved_s = ran_s if since is None or since < job.started_s else max(0.0, end_s - since)
    return held_gpu_s * min(1.0, unsaved_s / ran_s)


# -- placements <-> allocation rows ---------------------------------------------------------


def _rows(cluster: Cluster, placement: list[Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(kind, device key, row fields) for every GPU, slice or share of a stored placement."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    for worker, p in enumerate(placement):
        node = p["node"]
        fraction = p.get("fraction")
        if fraction:
            gpu = p["gpus"][0]
            milli = round(fraction * 1000)
            out.append(
                (
                    "share",
                    f"{node}/gpu{gpu}",
                    {"worker": worker, "node": node, "gpu": gpu, "milli": milli},
                )
            )
            continue
        for gpu in p.get("gpus", ()):
            out.append(
                (
                    "whole",
                    f"{node}/gpu{gpu}",
                    {"worker": worker, "node": node, "gpu": gpu, "milli": 1000},
                )
            )
        for sid in p.get("mig_slices", ()):
            # exact, by where the slice lies on its GPU: a fully sliced GPU's rows add up to
            # 1000, so allocation never shows more than the GPU and the ledger bills no extra
            milli = cluster.slice_info(sid).milli
            out.append(
                ("slice", sid, {"worker": worker, "node": node, "slice_id": sid, "milli": milli})
            )
    return out


def committed_usage(
    state: State,
    running: Sequence[JobSpec],
    stopping: set[str],
    admitted: Mapping[str, tuple[str, Sequence[Claim]]],
) -> dict[tuple[str, str], int]:
    """(team, accelerator) -> milli-GPUs the team is committed to, for `decide()`'s quota
    checks: its running and starting jobs, and its admitted jobs at their whole placement,
    but not its stopping jobs. Between a preemption and its victim's exit (the grace period,
    often several cycles) the victim's GPUs are promised to its preemptor: counted for the
    victim's team, or for neither, the preemptor's team looked as far below its guarantee as
    before and reclaimed again in the next cycle (issue 24's thrash). Each GPU is counted
    once: the victims are released and the admitted jobs placed whole on a what-if branch of
    `state`, which is rolled back."""
    team_of = {j.name: j.team for j in running if j.name not in stopping}
    b = state.branch()
    try:
        for name in stopping:
            if b.holds(name):
                b.release_job(name)
        for name, (team, claims) in admitted.items():
            if b.holds(WAITING + name):
                b.release_job(WAITING + name)
            free = [c for c in claims if _free(b, c)]  # a GPU gone down since stays out
            if free:
                b.allocate(name, *free)
            team_of[name] = team
        return team_usage_milli(b, team_of)
    finally:
        b.rollback()


def _claims(cluster: Cluster, placement: list[Any]) -> list[Claim]:
    claims: list[Claim] = []
    for kind, device, row in _rows(cluster, placement):
        if kind == "whole":
            claims.append(Whole(row["node"], (row["gpu"],)))
        elif kind == "slice":
            claims.append(MigSlice(device))
        else:
            claims.append(Share(row["node"], row["gpu"], row["milli"]))
    return claims


def _free(state: State | Branch, claim: Claim) -> bool:
    if isinstance(claim, Whole):
        return all(g in state.free_gpu_ids(claim.node) for g in claim.gpus)
    if isinstance(claim, MigSlice):
        node = claim.id.split("/", 1)[0]
        return claim.id in state.free_slices_on(node)
    return state.free_milli(claim.node, claim.gpu) >= claim.milli


def _where(placed: tuple[Placed, ...]) -> str:
    parts = []
    for p in placed:
        what = ",".join(map(str, p.gpus)) or ",".join(s.rsplit("/", 1)[-1] for s in p.mig_slices)
        parts.append(f"{p.node}:{what}" if what else p.node)
    return "; ".join(parts)
