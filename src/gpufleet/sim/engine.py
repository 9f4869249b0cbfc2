"""The discrete-event simulator: a workload replayed on a cluster through `sched.decide()`.

Deterministic by construction: one heap keyed by (time, event priority, sequence
number), an injected `numpy.random.Generator` (failures, spot reclaims), no
global state and no wall clock, so the same inputs and seed give byte-identical
results.

Events, in the order they are handled at one instant: finish, failure, spot
reclaim, repair, MIG re-layout, arrival, a least-attained-service move (under
LAS preemption: a running job's service crossing a queue threshold, a waiting
job's starvation promotion; `sim.las_clock`), then one scheduling cycle. A cycle
runs at most every `cycle_interval_s` (events in between are batched, as Kueue
and Slurm batch), and only when something happened that could change a decision.

What a job does when it runs:

- **training / batch / interactive** — it needs `duration_s` of useful work. A
  restarted attempt first pays `restart_overhead_s` (reload, warm-up). When its
  node fails, work since its last checkpoint is lost (it checkpoints every
  `checkpoint_interval_s` of useful work; without an interval everything since
  the attempt started is lost). When it is preempted, a job that checkpoints at
  all saves its work in the grace period the scheduler gives a victim (as on a
  spot notice); one without an interval loses the attempt. Either way it rejoins
  the queue with its original submission time. With a speed table
  (`SimConfig.speeds`, `sim.speed`) its work is kept in the reference accelerator's
  seconds and each attempt runs it at the pace of the slowest GPU type it holds.
- **inference** — a service replica wanted for the window [arrival, arrival +
  duration]: however late it starts, it ends at the window's end, and served
  time / wanted time is its SLO attainment (capacity, not latency: the latency
  model is the inference estimator's job).

Failures: each GPU fails with rate 1/`gpu_mtbf_h`; a failure takes its node down
(its jobs are killed as by preemption) for an exponential repair time. Spot: each
spot node is reclaimed at `reclaim_per_node_per_day`; its jobs get `notice_s`
(a job with a checkpoint interval saves its work in the notice; others lose it)
and the node returns after an exponential time.

MIG re-layout: a GPU the scheduler proposes to re-cut takes no new jobs (its free
slices are held); once the jobs on it have ended (at once for an idle GPU) it is
re-cut after `relayout_s`, and the cluster is rebuilt with the new layout.

Simplifications, on purpose: the preemption grace period is not simulated (GPUs
change hands at once); checkpoint writes cost no time.

Starting from a live cluster (the control plane's queue ETAs, `control.eta`): the
clock may begin at `start_s` (epoch seconds, say) rather than 0, with `initial` jobs
already running there on known placements for a known remaining time, and `specs`
may hand the scheduler each job's own `JobSpec` instead of `TraceJob.to_job_spec()`
(a live job carries what a trace cannot: topology constraints, spot preference, a
maximum runtime, an inference load). Without them a run is exactly as before.

Conservation: besides the recorder's integrals, each job keeps its own GPU-seconds
held, and the result carries both (`SimResult.ledger`); with GPUFLEET_DEBUG_CHECKS set
(the test suite sets it) every run is checked by `sim.conservation` and raises
`ConservationError` when they disagree, rather than report a broken metric.

Why one file (about 1,170 lines): the event loop, its handlers and the engine's views of the
running jobs share the heap, the clock and the per-job `Run` records (`sim.run`). Handlers
in other modules would pass that state around on every event of the hot loop (design
0014); metrics, results and the conservation checks are already modules of their own.
"""

from __future__ import annotations

import gc
import heapq
import math
import time
from bisect import bisect_left, insort
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, cast

import numpy as np

from gpufleet.cluster import MILLI, AllocationError, Cluster, MigSlice, State, Whole
from gpufleet.errors import UnknownNameError
from gpufleet.sched import census
from gpufleet.sched.backfill import expected_runtime_s
from gpufleet.sched.census import Census, RunningCensus, evictable_value
from gpufleet.sched.decide import QUIET_STOP_AT, decide
from gpufleet.sched.fairshare import DecayedUsage
from gpufleet.sched.framework import Decisions, InvalidPlacementError, OrderContext, Placement
from gpufleet.sched.held_as_asked import check_running_placement
from gpufleet.sched.kept import Kept, KeptLasQueue, KeptLevels, KeptQueue, keeps, keeps_levels
from gpufleet.sched.las import RUN_STARTS_AT_GPU_S, LasQueues
from gpufleet.sched.lean import LeanQueue, qualifies, uncount, worker_gpus
from gpufleet.sched.orders import Tiresias
from gpufleet.sched.preempt import LasPreemption
from gpufleet.sched.quota import placements_milli, usage_milli
from gpufleet.sched.registry import Resolved, resolve
from gpufleet.sched.team_index import team_index
from gpufleet.sim import conservation, las_clock
from gpufleet.sim.ledger import JobHeld
from gpufleet.sim.metrics import MetricsRecorder, waiting_shape
from gpufleet.sim.result import SimResult
from gpufleet.sim.run import Run, beyond_request
from gpufleet.sim.speed import SpeedTable
from gpufleet.sim.workload import TraceJob, Workload
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.teams import TeamsSpec

# event priorities at one instant: resources come back before they are handed out
# (LAS: a least-attained-service crossing or promotion is due, `sim.las_clock`)
FINISH, FAILURE, RECLAIM, REPAIR, RELAYOUT, ARRIVAL, LAS, CYCLE, SAMPLE = range(9)
DOWN = "\x00down:"  # holder of a failed or reclaimed node's GPUs
DRAIN = "\x00drain:"  # holder of a draining MIG GPU's free slices


@dataclass(frozen=True)
class FailureModel:
    gpu_mtbf_h: float | None = None  # mean time between failures per GPU; None: no failures
    repair_mean_h: float = 4.0


@dataclass(frozen=True)
class SpotModel:
    reclaim_per_node_per_day: float = 0.0
    notice_s: float = 120.0
    return_mean_h: float = 2.0


@dataclass(frozen=True)
class SimConfig:
    profile: str = "default"
    seed: int = 0
    cycle_interval_s: float = 10.0
    restart_overhead_s: float = 300.0
    failures: FailureModel = field(default_factory=FailureModel)
    spot: SpotModel = field(default_factory=SpotModel)
    horizon_s: float | None = None  # stop here; None: when every job is done (or can never run)
    sample_interval_s: float = 600.0
    fair_share_half_life_s: float = 7 * 86_400.0
    # MIG re-layouts the scheduler proposes for idle GPUs are applied after this long
    # (reconfiguring MIG needs the GPU idle; None: proposals are only counted)
    relayout_s: float | None = 120.0
    # a window the user names, as offsets from the first arrival: the metrics add the
    # allocation over it (`SimMetrics.gpu_allocation_in_window`)
    metrics_window_s: tuple[float, float] | None = None
    # speed per accelerator: a job's duration scales by the GPUs it lands on (sim.speed);
    # None: the same everywhere
    speeds: SpeedTable | None = None
    # lean cycles (sched.lean) where the profile allows them: the same admissions, without
    # looking at jobs that cannot start; and for every profile quiet ones (`decide(quiet=)`:
    # a reservation sought only when a later job could start). The decisions then carry no
    # pending reasons. False: full cycles, as the control plane runs them
    lean_cycles: bool = True


def _kept_queues(
    plugins: Resolved, teams: TeamsSpec, config: SimConfig
) -> tuple[LeanQueue | None, KeptQueue | KeptLasQueue | None]:
    """What the engine keeps of the queue between cycles: in FIFO order for lean cycles
    (`sched.lean`), or for quiet cycles of the orders that allow it each team's in
    priority order or each least-attained-service queue (`sched.kept`); neither for full
    cycles (`lean_cycles=False`)."""
    profile = plugins.profile
    if not config.lean_cycles:
        return None, None
    if qualifies(profile):
        return LeanQueue(best_effort=profile.head_of_line == "best-effort"), None
    if keeps(profile):
        return None, KeptQueue(team_index(teams))
    if keeps_levels(profile):
        return None, KeptLasQueue(team_index(teams), cast(Tiresias, plugins.queue_order).queues)
    return None, None


def _las_queues(plugins: Resolved) -> LasQueues | None:
    """The queues of the profile's least-attained-service preemption (None: it has none)."""
    return next((p.queues for p in plugins.preemptions if isinstance(p, LasPreemption)), None)


def _censuses(
    plugins: Resolved,
    teams: TeamsSpec,
    config: SimConfig,
    sizes: dict[int, int],
    runtimes: dict[int, list[float]],
) -> tuple[RunningCensus | None, Census | None]:
    """What quiet cycles read instead of scanning the queue and the running jobs
    (`sched.census`), for profiles that reserve or evict; lean cycles read their own
    queue's, and their profiles do neither. Kept only while the queue is long
    (`Simulation._census_now`): an uncongested stream would pay for it at every start and
    stop and never read it."""
    if not config.lean_cycles or qualifies(plugins.profile):
        return None, None
    running = RunningCensus(teams, _las_queues(plugins))
    return running, Census(sizes, runtimes, running.ends, running.evictable, running.las)


class _Specs:
    """`TraceJob.to_job_spec()`, validated once per shape of job rather than once per job.

    Jobs of one workload differ mostly in their name, arrival and runtime estimate;
    everything else (team, request, kind, class, ...) repeats. The first job of a shape
    is validated in full; later ones copy its spec with their own name, arrival and
    estimate, after the same checks validation makes on those three (a plain name, a
    finite float >= 0, a finite float > 0); anything else is validated in full. The copy
    equals what validation would give, field by field and in `model_fields_set`.
    """

    __slots__ = ("_by_shape",)

    def __init__(self) -> None:
        self._by_shape: dict[tuple[object, ...], JobSpec] = {}

    def __call__(self, t: TraceJob) -> JobSpec:
        estimate = t.runtime_estimate_s
        key = (
            t.team,
            t.kind,
            t.workers,
            type(t.workers),
            t.preemptible,
            t.gpus,
            type(t.gpus),
            t.gpu_fraction,
            type(t.gpu_fraction),
            t.mig_profile,
            t.priority_class,
            t.user,
            t.project,
            t.checkpoint_interval_s,
            type(t.checkpoint_interval_s),
            t.accelerators,
            estimate is None,
        )
        template = self._by_shape.get(key)
        name, submit = t.name, t.submit_s
        if (
            template is None
            or type(name) is not str
            or not name
            or name != name.strip()
            or type(submit) is not float
            or not 0.0 <= submit < math.inf
            or not (estimate is None or (type(estimate) is float and 0.0 < estimate < math.inf))
        ):
            spec = t.to_job_spec()
            self._by_shape.setdefault(key, spec)
            return spec
        update: dict[str, object] = {"name": name, "submitted_s": submit}
        if estimate is not None:
            update["runtime_estimate_s"] = estimate
        if t.accelerators:
            update["accelerators"] = list(t.accelerators)
        return template.replaced(update)


class _RunningViews(Collection[JobSpec]):
    """The running units as `decide()` sees them, each view built when first read.

    A view is the unit's pending spec marked running since its start. `decide()` reads
    running jobs only to preempt, to reserve (backfill) and to propose MIG re-layouts,
    so under a profile that does none of these no view is ever built; once built, a
    view is kept until the unit stops. Iteration follows the order units started, as a
    dict of views would. decide(usage=...) never reads a running job's placement (the
    state holds it), so a view carries none; views are internal and never validated.
    """

    __slots__ = ("_started", "_views", "census")

    def __init__(self) -> None:
        # unit -> (pending spec, start, milli-GPUs held)
        self._started: dict[str, tuple[JobSpec, float, int]] = {}
        self._views: dict[str, JobSpec] = {}
        # kept in step while the simulator keeps its census (`Simulation._census_now`)
        self.census: RunningCensus | None = None

    def add(self, unit: str, spec: JobSpec, started_s: float, held_milli: int) -> None:
        self._started[unit] = (spec, started_s, held_milli)
        if self.census is not None:
            self.census.add(spec, started_s, held_milli)

    def remove(self, unit: str) -> None:
        spec, _, _ = self._started.pop(unit)
        self._views.pop(unit, None)
        if self.census is not None:
            self.census.remove(spec.name)

    def has(self, unit: str) -> bool:
        return unit in self._started

    def run_of(self, unit: str) -> tuple[float, int] | None:
        """(start, milli-GPUs held) of a running unit; None when it is not running."""
        found = self._started.get(unit)
        return None if found is None else found[1:]

    def specs(self) -> Iterator[tuple[JobSpec, float, int]]:
        """(pending spec, start, milli-GPUs held) of each running unit, in the order they
        started."""
        return iter(self._started.values())

    def __len__(self) -> int:
        return len(self._started)

    def __contains__(self, job: object) -> bool:
        return isinstance(job, JobSpec) and any(view == job for view in self)

    def __iter__(self) -> Iterator[JobSpec]:
        views = self._views
        for unit, (spec, started_s, _) in self._started.items():
            view = views.get(unit)
            if view is None:
                view = views[unit] = spec.replaced({"state": "running", "started_s": started_s})
            yield view


@dataclass(frozen=True)
class InitialRun:
    """A job already running when the simulation starts (a live cluster's state).

    It holds `placements` (charged to its team's quota under `flavor`) from the clock's
    start, and its scheduler view says it started at `started_s` (which may be earlier:
    the minimum runtime before priority preemption and backfill's expected ends read it).
    Training, batch and interactive jobs end after `remaining_s` more seconds unless
    interrupted; an inference replica ends at its window's end
    (`trace.submit_s + trace.duration_s`), as every replica does. When interrupted, the
    work it lost is counted from the clock's start, not from `started_s` (one that keeps
    no checkpoints then restarts its whole `trace.duration_s`: its work before the clock
    is lost too, as a live job's would be), and with a
    profile that binds pods one by one (`gang` false) it still holds and requeues as
    one unit.
    """

    trace: TraceJob
    placements: tuple[Placement, ...]
    flavor: str
    started_s: float
    remaining_s: float


class Simulation:
    """One run: build with a cluster, teams, workload and config; `run()` once."""

    def __init__(
        self,
        cluster: Cluster,
        teams: TeamsSpec,
        workload: Workload,
        config: SimConfig,
        *,
        initial: Sequence[InitialRun] = (),
        start_s: float = 0.0,
        specs: Mapping[str, JobSpec] | None = None,
        history: DecayedUsage | None = None,
        keep_changes: bool = False,
    ) -> None:
        """`initial`, `start_s`, `specs` and `history` start the run from a live cluster
        (see the module docstring): jobs running at `start_s`, the clock's start, every
        arrival at or after it; the scheduler's view of some jobs; the teams' decayed past
        use as of `history.at_s` <= `start_s`. Invalid placements (one that holds other
        than its job's request as the profile places it: `sched.held_as_asked`) raise
        `InvalidPlacementError`, inconsistent inputs `ValueError`. `keep_changes`: the
        ledger keeps every change of a team's held GPUs (usage over time; debug checks
        keep it anyway, to check it)."""
        self.cluster, self.teams, self.workload, self.config = cluster, teams, workload, config
        self.rng = np.random.default_rng(config.seed)
        self.state = State(cluster)
        self.start_s = start_s
        self.now_s = start_s
        self._heap: list[tuple[float, int, int, Any]] = []
        self._seq = 0
        # job -> its life so far: running at the start (`initial`) or arrived since
        self.runs: dict[str, Run] = {}
        self.pending: dict[str, JobSpec] = {}
        # pending jobs per (accelerators, GPUs per worker): what a sample reads of the queue
        # (a dict: Counter's del is Python code)
        self._waiting: dict[tuple[tuple[str, ...], int], int] = {}
        # pending jobs per whole GPUs per worker (`lean.worker_gpus`; 0: a slice, a fraction):
        # a quiet cycle's stop rule reads the smallest
        self._sizes: dict[int, int] = {}
        # per whole GPUs per worker, the ascending expected runtimes of the pending jobs that
        # have one: the stop rule asks whether any could use a reservation's GPUs
        self._runtimes: dict[int, list[float]] = {}
        plugins = resolve(config.profile)
        # what quiet cycles read instead of scanning the queue and the running jobs (lean
        # cycles read their own queue's, and their profiles neither reserve nor evict)
        self._running_census, self._census = _censuses(
            plugins, teams, config, self._sizes, self._runtimes
        )
        # least-attained-service preemption: its queues, and who it may evict (a job of an
        # evictable class that checkpoints), for the clock's events (`sim.las_clock`)
        self._las, self._evictable_value = _las_queues(plugins), evictable_value(teams)
        self.running = _RunningViews()
        self.usage: dict[tuple[str, str], int] = {}
        # usage / MILLI, kept in step for the decayed usage (only when the order reads it)
        self._held_gpus: dict[tuple[str, str], float] = {}
        if history is None:
            history = DecayedUsage(half_life_s=config.fair_share_half_life_s, at_s=start_s)
        self.history = history
        self._history_at = history.at_s
        self._cycle_due: float | None = None
        self._last_cycle_s = -math.inf
        self.cycles = self.events = 0
        self.decide_s = 0.0
        self.down: set[str] = set()
        self._arrivals_left = len(workload.jobs)
        self.owner: dict[str, str] = {}  # scheduler unit (job or pod) -> job
        self._started = 0  # jobs whose clock runs (partial gangs holding GPUs do not count)
        self._relayouts: dict[str, tuple[tuple[str, int], ...]] = {}  # "node|gpu" -> layout
        self._draining: set[str] = set()  # "node|gpu" waiting for its jobs to end
        self._serves: dict[str, set[str]] = {}  # "node|gpu" -> pending jobs its re-cut is for
        # `_whole_only`: slices and fractions run on one whole GPU (k8s-default): what a
        # running job may hold at a live start, and the part of its GPU its work is not on
        self.gang, self._whole_only = plugins.profile.gang, plugins.profile.whole_gpus_only
        self._lean, self._kept = _kept_queues(plugins, teams, config)
        self._order, self._keeps_history = plugins.queue_order, plugins.queue_order.uses_share
        self.specs: Mapping[str, JobSpec] = specs or {}
        self._speeds = config.speeds
        self._spec_of = _Specs()
        if initial or start_s or specs or history.at_s:
            self._check_live_inputs(initial)
        self.runs.update(_initial_runs(initial))
        self._jobs = len(workload.jobs) + len(initial)
        if initial:
            # the recorder's span and entitled teams include the running jobs, from the start
            started = tuple(replace(r.trace, submit_s=start_s) for r in initial)
            workload = Workload((*workload.jobs, *started), workload.report, workload.nodes)
        self._checks = conservation.enabled()
        self.metrics = MetricsRecorder(
            cluster,
            teams,
            workload,
            keep_changes=keep_changes or self._checks,
            window_s=config.metrics_window_s,
        )
        for r in initial:
            self._place_initial(r)

    def _check_live_inputs(self, initial: Sequence[InitialRun]) -> None:
        """Refuse inputs that would run the clock backwards or disagree with each other,
        and running jobs whose placement holds other than their request
        (`InvalidPlacementError`, before anything is allocated)."""
        if self._history_at > self.start_s:
            raise ValueError(f"history is as of {self._history_at}, after the start {self.start_s}")
        early = [j.name for j in self.workload.jobs if j.submit_s < self.start_s]
        if early:
            raise ValueError(f"jobs arrive before the start {self.start_s}: {', '.join(early[:5])}")
        traces = {j.name: j for j in self.workload.jobs}
        for r in initial:
            if r.trace.name in traces:
                raise ValueError(f"initial run {r.trace.name} repeats a job name")
            if r.remaining_s < 0:
                raise ValueError(f"initial run {r.trace.name}: remaining_s {r.remaining_s} < 0")
            check_running_placement(
                r.trace,
                r.placements,
                self.cluster,
                profile=self.config.profile,
                whole_only=self._whole_only,
            )
            traces[r.trace.name] = r.trace
        for name, spec in self.specs.items():
            t = traces.get(name)
            if t is None:
                raise ValueError(f"a spec is given for {name}, which is no job of the run")
            if (spec.name, spec.team, spec.workers, spec.kind) != (name, t.team, t.workers, t.kind):
                raise ValueError(
                    f"the spec of {name} disagrees with its trace job (name, team, workers, kind)"
                )
            if spec.state != "pending" or spec.placement:
                raise ValueError(f"the spec of {name} must be in its pending form (no placement)")

    def _place_initial(self, r: InitialRun) -> None:
        """Allocate a running job at the clock's start and start it as an admitted one, so
        quota usage, metrics and its finish event are kept exactly as for any job."""
        name = r.trace.name
        run = self.runs[name]
        spec = self.specs[name] if name in self.specs else self._spec_of(r.trace)
        run.units = {name: spec}
        self.owner[name] = name
        self._enqueue(name, spec)
        self.metrics.arrived(r.trace)
        try:
            self.state.allocate(name, *[c for p in r.placements for c in p.claims()])
        except (AllocationError, UnknownNameError, ValueError) as e:
            raise InvalidPlacementError(f"initial run {name}: {e}") from e
        self._start(name, r.placements, r.flavor, started_s=r.started_s)

    # -- the event queue ---------------------------------------------------------------

    def _push(self, t: float, kind: int, payload: object) -> None:
        """Queue an event; the sequence number breaks ties, so payloads are never compared."""
        self._seq += 1
        heapq.heappush(self._heap, (t, kind, self._seq, payload))

    def _want_cycle(self) -> None:
        t = max(self.now_s, self._last_cycle_s + self.config.cycle_interval_s)
        if self._cycle_due is None or t < self._cycle_due:
            self._cycle_due = t
            self._push(t, CYCLE, "")

    def run(self) -> SimResult:
        # Arrivals are not pushed on the heap: they are already a sorted stream, merged
        # with the heap at each step (arrival first when its (time, ARRIVAL) is smaller;
        # among themselves, in workload order), so the heap holds only the events the run
        # makes (about one per running job) and each pop is cheaper.
        arrivals = self.workload.jobs  # sorted by arrival, then name
        self._schedule_failures()
        self._push(self.start_s, SAMPLE, "")
        handlers: dict[int, Callable[[Any], None]] = {
            FINISH: self._finish,
            FAILURE: self._failure,
            RECLAIM: self._reclaim,
            REPAIR: self._repair,
            RELAYOUT: self._relayout,
            LAS: self._las_due,
            CYCLE: self._cycle,
            SAMPLE: self._sample,
        }
        horizon = math.inf if self.config.horizon_s is None else self.config.horizon_s
        heap = self._heap
        pop = heapq.heappop
        arrive = self._arrive
        upcoming = iter(arrivals)
        job = next(upcoming, None)
        next_s = math.inf if job is None else job.submit_s
        with _collector_paused():
            while True:
                top = heap[0] if heap else None
                if top is not None and (top[0] < next_s or (top[0] == next_s and top[1] < ARRIVAL)):
                    t, kind, _, payload = pop(heap)
                    if t > horizon:
                        break
                    if kind in (SAMPLE, FAILURE, RECLAIM, REPAIR, LAS) and not self._has_work():
                        continue  # nothing can change any more: these stop, and so does the run
                    self.now_s = t
                    self.events += 1
                    handlers[kind](payload)
                elif job is not None:
                    if next_s > horizon:
                        break
                    self.now_s = next_s
                    self.events += 1
                    arrive(job)
                    job = next(upcoming, None)
                    next_s = math.inf if job is None else job.submit_s
                else:
                    break
        end = self.now_s if self.config.horizon_s is None else self.config.horizon_s
        in_progress_gpu_s = self._settle(max(end, self.start_s))
        self.metrics.close(
            end,
            self._jobs,
            in_progress_gpu_s=in_progress_gpu_s,
            gang_wait_gpu_s=math.fsum(r.gang_wait_gpu_s for r in self.runs.values()),
            idle_gpu_s=math.fsum(r.idle_gpu_s for r in self.runs.values()),
        )
        first = {n: r.first_start_s for n, r in self.runs.items() if r.first_start_s is not None}
        result = SimResult(
            self.metrics.result(),
            self.cycles,
            self.events,
            self.decide_s,
            first_start_s=MappingProxyType(first),
            ledger=self.metrics.ledger(self.config.profile, self._held(self.metrics.end_s)),
        )
        if self._checks:
            conservation.enforce(result)
        return result

    def _held_until(self, run: Run, end_s: float) -> float:
        return run.held_gpu_s + run.held_milli / MILLI * (end_s - run.held_since_s)

    def _settle(self, end_s: float) -> float:
        """The accounts of the jobs unfinished at `end_s`: the restart overhead a running
        attempt has paid is lost (a finished one pays it at its end), what a partial gang's
        pods hold is gang wait, what a running attempt holds beyond its request is idle, and
        the rest of what each held is work toward its completion (saved by checkpoints, or
        in the attempt a horizon cuts). Returns that work, in GPU-seconds."""
        in_progress = 0.0
        for run in self.runs.values():
            if run.completed:
                continue
            held = self._held_until(run, end_s)
            if run.started and run.beyond_gpus:
                run.idle_gpu_s += run.beyond_gpus * (end_s - run.start_s)
            if run.started and run.trace.kind != "inference":
                self._lose(run, run.work_gpus * min(end_s - run.start_s, run.overhead_s))
            elif not run.started and run.held:
                run.gang_wait_gpu_s += held - run.attempt_held_from
            in_progress += held - run.lost_gpu_s - run.gang_wait_gpu_s - run.idle_gpu_s
        return in_progress

    def _held(self, end_s: float) -> Mapping[str, JobHeld]:
        """Each job's GPU-seconds held, from its own account, up to `end_s`, and where
        they went."""
        out = {}
        for name, r in self.runs.items():
            held = self._held_until(r, end_s)
            useful = (
                r.useful_gpu_s()
                if r.completed
                else held - r.lost_gpu_s - r.gang_wait_gpu_s - r.idle_gpu_s
            )
            out[name] = JobHeld(
                r.trace,
                held,
                r.gpus,
                r.flavor,
                useful,
                r.lost_gpu_s,
                r.gang_wait_gpu_s,
                r.completed,
                r.idle_gpu_s,
            )
        return MappingProxyType(out)

    def _has_work(self) -> bool:
        """Whether anything can still happen: arrivals to come, jobs running, or nodes to
        return while jobs wait for them. Pending jobs (and partial gangs holding GPUs for pods
        that will never bind) cannot change anything alone, so such a queue ends the run; a
        node still down when the last job has ended does not keep an empty run going until
        its repair (that idle tail would dilute the run's allocation and rates)."""
        return (
            self._arrivals_left > 0 or self._started > 0 or (bool(self.down) and bool(self.pending))
        )

    # -- arrivals, finishes --------------------------------------------------------------

    def _arrive(self, job: TraceJob) -> None:
        self._arrivals_left -= 1
        name = job.name
        run = self.runs[name] = Run(job, job.duration_s)
        specs = self.specs
        spec = specs[name] if specs and name in specs else self._spec_of(job)
        if self.gang or job.workers == 1:
            run.units = {name: spec}
            self.owner[name] = name
            self._enqueue(name, spec)
        else:  # kube-scheduler without a gang plugin: each worker is a pod of its own
            pods = [f"{name}/w{i}" for i in range(job.workers)]
            run.units = {p: spec.replaced({"name": p, "workers": 1}) for p in pods}
            for unit, unit_spec in run.units.items():
                self.owner[unit] = name
                self._enqueue(unit, unit_spec)
        self.metrics.arrived(job)
        self._want_cycle()

    def _finish(self, payload: tuple[Run, int]) -> None:
        run, attempt = payload
        if not run.started or run.attempt != attempt:
            return  # stale: preempted or failed since
        gpus = run.work_gpus
        self._stop(run)
        if run.trace.kind == "inference":
            run.served_s += self.now_s - run.start_s
        else:
            self._lose(run, gpus * run.overhead_s)  # the restart it paid did no work
            if self._speeds is not None:
                run.useful_s = (run.useful_s or 0.0) + run.remaining_s * run.time_factor
        run.remaining_s = 0.0
        self.metrics.completed(run, self.now_s)
        run.spend()
        self._want_cycle()

    def _lose(self, run: Run, gpu_s: float) -> None:
        """GPU-seconds of `run`'s holding that did no useful work (the recorder's total and
        the run's own account, which the conservation checks compare per job)."""
        self.metrics.lost(gpu_s)
        run.lost_gpu_s += gpu_s

    def _stop(self, run: Run, *, released: frozenset[str] = frozenset()) -> None:
        """Release every unit of a job (except those the cycle already released)."""
        held = run.held
        partial = bool(held) and not run.started  # pods of a gang that never completed
        for unit in sorted(held):
            self.running.remove(unit)
            if unit not in released:
                self.state.release_all(unit)
        held.clear()
        if self._draining:
            self._check_drains()
        milli = run.milli
        team = run.trace.team
        for flavor, m in milli.items():
            self._account(team, flavor, -m)
        now = self.now_s
        run.held_gpu_s += run.held_milli / MILLI * (now - run.held_since_s)
        if partial:
            run.gang_wait_gpu_s += run.held_gpu_s - run.attempt_held_from
        run.held_milli = 0
        run.held_since_s = now
        self.metrics.released(now, run, sum(milli.values()) / MILLI)
        if run.started:
            self._started -= 1
            run.attained_gpu_s += run.gpus * (now - run.start_s)
            if run.beyond_gpus:  # held, not asked for: neither its work nor lost work
                run.idle_gpu_s += run.beyond_gpus * (now - run.start_s)
            run.started = False
        milli.clear()

    def _account(self, team: str, flavor: str, milli: int) -> None:
        """The team's usage of one flavor changes by `milli` (the quota book's input)."""
        keeps = self._keeps_history
        if keeps:
            self._advance_history()
        usage = self.usage
        key = (team, flavor)
        value = usage.get(key, 0) + milli
        if value:
            usage[key] = value
            if keeps:
                self._held_gpus[key] = value / MILLI
        else:
            usage.pop(key, None)  # zero entries removed (as `_bump` does)
            self._held_gpus.pop(key, None)

    def _advance_history(self) -> None:
        if self._keeps_history and self.now_s > self._history_at:
            self.history = self.history.advance(self.now_s, self._held_gpus)
            self._history_at = self.now_s

    # -- scheduling ----------------------------------------------------------------------

    def _enqueue(self, unit: str, spec: JobSpec) -> None:
        if unit in self.pending:  # a pod still waiting when its job was stopped: replaced
            self._dequeue(unit)
        self.pending[unit] = spec
        shape = waiting_shape(spec)
        self._waiting[shape] = self._waiting.get(shape, 0) + 1
        size = worker_gpus(spec)
        self._sizes[size] = self._sizes.get(size, 0) + 1
        if self.running.census is not None:
            self._count_runtime(spec, size)
        if self._lean is not None:
            self._lean.add(spec)
        elif self._kept is not None and self._kept.kept:
            self._kept.add(spec)

    def _dequeue(self, unit: str) -> JobSpec:
        """`unit` leaves the queue (it starts, or its spec is replaced): out of the pending
        map, the censuses and the kept queue; returns the spec it waited with."""
        spec = self.pending.pop(unit)
        uncount(self._waiting, waiting_shape(spec))
        size = worker_gpus(spec)
        uncount(self._sizes, size)
        runtime = None if self.running.census is None else expected_runtime_s(spec)
        if runtime is not None:
            runtimes = self._runtimes[size]
            del runtimes[bisect_left(runtimes, runtime)]
        if self._lean is not None and self._lean.kept:
            self._lean.remove(spec)
        elif self._kept is not None and self._kept.kept:
            self._kept.remove(spec)
        return spec

    def _cycle(self, _: str) -> None:
        if self._cycle_due is None or self.now_s < self._cycle_due:
            return  # superseded by an earlier cycle
        self._cycle_due = None
        self._last_cycle_s = self.now_s
        if not self.pending:
            return
        self.cycles += 1
        self._advance_history()
        kept = self._census_now()
        if self._checks and kept is not None:
            wrong = census.differences(
                kept,
                census.recount(
                    self.pending.values(),
                    self.running,
                    self.teams,
                    las=None if kept.running_las is None else kept.running_las.queues,
                    held_milli=self._held_milli,
                ),
            )
            if wrong:
                raise AssertionError(f"the simulator's census at {self.now_s} s: {wrong}")
        t0 = time.perf_counter()
        queue = self._lean
        lean = None
        if queue is not None and (queue.kept or len(self.pending) >= queue.active_at):
            lean = queue.lean(self.state.free_epoch, self.pending.values())
        d = decide(
            self.cluster,
            self.state,
            self.running,
            list(self.pending.values()) if queue is None or lean is None else queue.jobs,
            self.teams,
            profile=self.config.profile,
            now_s=self.now_s,
            history=self.history,
            cycle=self.cycles,
            usage=self.usage,
            keep=True,  # the state is left as applying the decisions would leave it
            lean=lean,
            quiet=self.config.lean_cycles,  # read: what starts and stops, never why
            census=kept,
            kept=self._kept_view(),
        )
        self.decide_s += time.perf_counter() - t0
        self._apply(d)
        if queue is not None:
            queue.cycled(self.state.free_epoch)

    def _held_milli(self, unit: str) -> int:
        """Milli-GPUs a running unit holds in the state (the census recount's reading)."""
        return sum(usage_milli(self.state.usage(unit)).values())

    def _kept_view(self) -> Kept | KeptLevels | None:
        """This cycle's kept queue (None: the cycle sorts the queue). Under
        GPUFLEET_DEBUG_CHECKS kept levels are compared with the order they keep."""
        queue = self._kept
        if queue is None:
            return None
        if isinstance(queue, KeptQueue):
            return queue.view(self.pending.values())
        view = queue.view(self.pending.values(), self.now_s)
        if self._checks and view is not None:
            kept = [job.name for jobs in view.levels for job in jobs]
            order = self._order
            ctx = OrderContext(view.priority, self.now_s)
            sorted_ = [job.name for job in order.order(list(self.pending.values()), ctx)]
            if kept != sorted_:
                raise AssertionError(f"the simulator's kept LAS queues at {self.now_s} s")
        return view

    def _count_runtime(self, spec: JobSpec, size: int) -> None:
        """A waiting job into the census of runtimes (`Census.waiting_runtimes`)."""
        runtime = expected_runtime_s(spec)
        if runtime is not None:
            insort(self._runtimes.setdefault(size, []), runtime)

    def _census_now(self) -> Census | None:
        """The census for this cycle: kept from `QUIET_STOP_AT` waiting jobs on (rebuilt
        then from the queue and the running jobs), dropped below half of that (as the kept
        queues); None while the queue is short, and the cycle then scans."""
        running = self._running_census
        if running is None:
            return None
        waiting = len(self.pending)
        if self.running.census is None:
            if waiting < QUIET_STOP_AT:
                return None
            running.rebuild(self.running.specs())
            self._runtimes.clear()
            for spec in self.pending.values():
                self._count_runtime(spec, worker_gpus(spec))
            self.running.census = running
        elif waiting < QUIET_STOP_AT // 2:
            self.running.census = None
            return None
        return self._census

    def _apply(self, d: Decisions) -> None:
        if d.preempted:
            self._evict(d.preempted)
        flavors = d.flavors
        for unit, placements in d.admitted.items():
            self._start(unit, placements, flavors[unit])
        if d.relayouts:
            self._recut(d)

    def _evict(self, victims: Collection[str]) -> None:
        interrupted: dict[str, set[str]] = {}  # job -> its units the cycle released
        for victim in victims:
            interrupted.setdefault(self.owner[victim], set()).add(victim)
        for job, units in interrupted.items():
            self.metrics.preempted()
            # a victim gets a grace period to checkpoint and exit (sched.preempt): a job that
            # checkpoints at all saves its work in it, as on a spot notice
            self._interrupt(job, notice_saves=True, released=frozenset(units))

    def _recut(self, d: Decisions) -> None:
        """MIG re-layouts the cycle proposed: counted, and applied when the config says so."""
        self.metrics.relayouts += len(d.relayouts)
        if self.config.relayout_s is not None:
            for r in d.relayouts:
                key = f"{r.node}|{r.gpu}"
                covered = set().union(*self._serves.values()) if self._serves else set()
                if key in self._relayouts or set(r.serves) <= covered:
                    continue  # already re-cutting, or its jobs wait for another re-cut
                self._relayouts[key] = r.proposed
                self._serves[key] = set(r.serves)
                # no new job may land on the GPU while it drains: its free slices are held
                free = [sid for sid in self.state.free_slices_on(r.node) if _on_gpu(sid, key)]
                if free:
                    self.state.allocate(DRAIN + key, *[MigSlice(sid) for sid in free])
                if r.drain:
                    self._draining.add(key)  # re-cut when its jobs end (`_check_drains`)
                else:
                    self._push(self.now_s + self.config.relayout_s, RELAYOUT, key)

    def _gpu_users(self, key: str) -> list[str]:
        """Jobs (not the drain placeholder) holding slices of one GPU."""
        node = key.rsplit("|", 1)[0]
        return [
            unit
            for unit in self.state.jobs_on(node)
            if unit != DRAIN + key
            and any(_on_gpu(sid, key) for sid in self.state.holdings(unit).slices)
        ]

    def _check_drains(self) -> None:
        """A draining GPU whose last job ended is re-cut after the reconfiguration time;
        its freed slices join the drain placeholder so nothing new lands meanwhile."""
        for key in sorted(self._draining):
            if self._gpu_users(key):
                continue
            self._draining.discard(key)
            free = [
                sid for sid in self.state.free_slices_on(key.rsplit("|", 1)[0]) if _on_gpu(sid, key)
            ]
            if free:
                self.state.allocate(DRAIN + key, *[MigSlice(sid) for sid in free])
            assert self.config.relayout_s is not None
            self._push(self.now_s + self.config.relayout_s, RELAYOUT, key)

    def _relayout(self, key: str) -> None:
        """Re-cut one drained MIG GPU: a new cluster with that GPU's new layout, and the state
        rebuilt on it with every job's holdings (the GPU itself holds nothing)."""
        layout = self._relayouts.pop(key)
        self._serves.pop(key, None)
        node_name, gpu_text = key.rsplit("|", 1)
        gpu = int(gpu_text)
        if self.state.holds(DRAIN + key):
            self.state.release_all(DRAIN + key)
        if self._gpu_users(key):
            return  # taken since it was proposed: the proposal lapses
        old = self.cluster
        nodes = tuple(
            replace(n, mig=tuple(layout if i == gpu else g for i, g in enumerate(n.mig)))
            if n.name == node_name
            else n
            for n in old.nodes
        )
        cluster = Cluster(old.levels, nodes, name=old.name)
        state = State(cluster)
        for unit in self.state.jobs():
            state.allocate(unit, *self.state.holdings(unit).claims())
        self.cluster, self.state = cluster, state
        self.metrics.relayouts_applied += 1
        self._want_cycle()

    def _start(
        self,
        unit: str,
        placements: tuple[Placement, ...],
        flavor: str,
        *,
        started_s: float | None = None,
    ) -> None:
        """A unit was admitted (decide(keep=True) allocated it); the job starts once all
        its units hold their GPUs — at once for a gang, pod by pod otherwise. `started_s`:
        when an initial run really started (before the clock's start); default now."""
        now = self.now_s
        run = self.runs[self.owner[unit]]
        spec = self._dequeue(unit)
        milli = placements_milli(self.cluster, placements)
        held = run.milli
        held[flavor] = held.get(flavor, 0) + milli
        trace = run.trace
        self._account(trace.team, flavor, milli)
        run.held_gpu_s += run.held_milli / MILLI * (now - run.held_since_s)
        if not run.held:  # the first of its units to bind in this attempt
            run.attempt_held_from = run.held_gpu_s
        run.held_milli += milli
        run.held_since_s = now
        self.metrics.allocated(now, run, milli / MILLI)
        run.held.add(unit)
        began_s = now if started_s is None else started_s
        self.running.add(unit, spec, began_s, milli)
        if self._las is not None and spec.checkpoints and self._evictable_value(spec) is not None:
            for at_s in las_clock.crossings_s(self._las, RUN_STARTS_AT_GPU_S, began_s, milli):
                if at_s > now:  # a cycle when it becomes a victim
                    self._push(at_s, LAS, (unit, (began_s, milli)))
        if len(run.held) < len(run.units):
            return  # a partial gang holds GPUs and waits for the rest of its pods
        if len(run.units) > 1:  # what its earlier pods held while they waited for this one
            run.gang_wait_gpu_s += run.held_gpu_s - run.attempt_held_from
        run.started = True
        self._started += 1
        run.gpus = sum(held.values()) / MILLI
        run.flavor = flavor
        if not trace.gpus:  # a fraction's eighths, a slice or fraction on a whole GPU: idle
            run.beyond_gpus = beyond_request(trace, run.gpus, flavor, self._whole_only)
        run.start_s = now
        if run.attempt:  # a restart (the class default is no overhead)
            run.overhead_s = self.config.restart_overhead_s
        if run.first_start_s is None:
            run.first_start_s = began_s
        if trace.kind == "inference":
            end = max(now, trace.submit_s + trace.duration_s)
        else:
            if self._speeds is not None:  # remaining work is in reference seconds
                run.time_factor = self._speeds.time_factor(held)
            end = now + run.overhead_s + run.remaining_s * run.time_factor
        self._push(end, FINISH, (run, run.attempt))

    def _las_due(self, due: tuple[str, tuple[float, int] | JobSpec]) -> None:
        """A running unit's service crossed a threshold, or a waiting one is promoted: a
        cycle, unless the unit has stopped or started since (the event is stale)."""
        unit, was = due
        if was == self.running.run_of(unit) or was is self.pending.get(unit):
            self._want_cycle()

    def _interrupt(
        self, name: str, *, notice_saves: bool, released: frozenset[str] = frozenset()
    ) -> None:
        """Stop a job (preemption, failure, spot reclaim) and put all its units back in the queue.
        A partial gang that never started loses nothing but the GPUs it held idle."""
        run = self.runs[name]
        progress = self.now_s - run.start_s if run.started else 0.0
        gpus = run.work_gpus if run.started else 0.0  # lost work is counted on its request
        started = run.started
        self._stop(run, released=released)
        saved = lost = 0.0
        if run.trace.kind == "inference":
            run.served_s += progress
        elif started:
            useful = max(0.0, progress - run.overhead_s)
            every = run.trace.checkpoint_interval_s
            if notice_saves and every is not None:
                saved = useful
            elif every is not None:
                saved = every * (useful // every)
            lost = useful - saved + min(progress, run.overhead_s)
            # wall seconds on this attempt's accelerator back to reference seconds
            run.remaining_s = max(0.0, run.remaining_s - saved / run.time_factor)
            if self._speeds is not None:
                run.useful_s = (run.useful_s or 0.0) + saved
            if every is None and run.done_before_s > 0:
                # already running at the clock's start and keeping nothing: it restarts its
                # whole runtime, as the live job does (its work before the clock is lost, and
                # none of this run's accounts: it is no longer done before)
                run.remaining_s = run.trace.duration_s
                run.done_before_s = 0.0
        self._lose(run, gpus * lost)
        if started:
            run.attempt += 1
        window_over = (
            run.trace.kind == "inference"
            and self.now_s >= run.trace.submit_s + run.trace.duration_s
        )
        if window_over:
            self.metrics.completed(run, self.now_s)
            run.spend()
            return
        las = self._las
        # back in the queue as of now, as the control plane requeues (`Reconciler._requeue`):
        # it waits behind the jobs that arrived while it ran, and LAS's starvation clock
        # counts its wait from here
        requeued = {"attained_gpu_s": run.attained_gpu_s, "submitted_s": self.now_s}
        for unit, spec in run.units.items():
            waiting = spec.replaced(requeued)
            self._enqueue(unit, waiting)
            promoted_s = None if las is None else las_clock.promotion_s(las, waiting)
            if promoted_s is not None and promoted_s > self.now_s:  # a cycle when it may evict
                self._push(promoted_s, LAS, (unit, waiting))
        self._want_cycle()

    # -- failures and spot ---------------------------------------------------------------

    def _schedule_failures(self) -> None:
        f, s = self.config.failures, self.config.spot
        for node in self.cluster.nodes:
            if f.gpu_mtbf_h:
                self._push(self._after(f.gpu_mtbf_h * 3600 / node.gpus), FAILURE, node.name)
            if node.capacity == "spot" and s.reclaim_per_node_per_day > 0:
                self._push(self._after(86_400 / s.reclaim_per_node_per_day), RECLAIM, node.name)

    def _after(self, mean_s: float) -> float:
        return self.now_s + float(self.rng.exponential(mean_s))

    def _take_down(self, node: str, *, notice_saves: bool) -> None:
        jobs = {self.owner[u] for u in self.state.jobs_on(node) if self.running.has(u)}
        for job in sorted(jobs):
            self._interrupt(job, notice_saves=notice_saves)
        free = self.state.free_gpu_ids(node)
        if free:
            self.state.allocate(DOWN + node, Whole(node, free))
        self.down.add(node)
        self.metrics.node_down(self.now_s, self.cluster.node(node).gpus)

    def _failure(self, node: str) -> None:
        if node in self.down:
            return
        self.metrics.failures += 1
        self._take_down(node, notice_saves=False)
        self._push(self._after(self.config.failures.repair_mean_h * 3600), REPAIR, node)

    def _reclaim(self, node: str) -> None:
        if node in self.down:
            return
        self.metrics.spot_reclaims += 1
        self._take_down(node, notice_saves=True)
        self._push(self._after(self.config.spot.return_mean_h * 3600), REPAIR, node)

    def _repair(self, node: str) -> None:
        if node not in self.down:
            return
        self.state.release_all(DOWN + node)
        self.down.discard(node)
        self.metrics.node_up(self.now_s, self.cluster.node(node).gpus)
        f, s = self.config.failures, self.config.spot
        gpus = self.cluster.node(node).gpus
        if f.gpu_mtbf_h:
            self._push(self._after(f.gpu_mtbf_h * 3600 / gpus), FAILURE, node)
        if self.cluster.node(node).capacity == "spot" and s.reclaim_per_node_per_day > 0:
            self._push(self._after(86_400 / s.reclaim_per_node_per_day), RECLAIM, node)
        self._want_cycle()

    # -- sampling ------------------------------------------------------------------------

    def _sample(self, _: str) -> None:
        # pods of one job wait as units of their own (no gang): count the jobs (a 4-pod job
        # with one pod bound read as 3 jobs waiting)
        jobs = None if self.gang else len({self.owner[unit] for unit in self.pending})
        self.metrics.sample(self.now_s, self.state, self._waiting, self._started, jobs)
        self._push(self.now_s + self.config.sample_interval_s, SAMPLE, "")


def _initial_runs(initial: Sequence[InitialRun]) -> dict[str, Run]:
    """The runs of jobs already running at the clock's start; the work each did before it
    is none of this run's (not held in it, so not counted as its useful work either)."""
    out = {}
    for r in initial:
        run = out[r.trace.name] = Run(r.trace, r.remaining_s)
        if r.trace.kind != "inference":
            run.done_before_s = max(0.0, r.trace.duration_s - r.remaining_s)
    return out


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the event loop, back on after.

    The loop makes no reference cycles (tests/sim/test_engine.py checks it), so the
    collector would find nothing: it would only walk the run's long-lived objects
    (jobs, specs, records) again and again, about a tenth of a large run's time.
    Objects are still freed as their last reference goes.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _on_gpu(slice_id: str, key: str) -> bool:
    """Whether a slice id ("node/gpuG/mig:...") is on the GPU of a "node|G" key."""
    node, gpu = key.rsplit("|", 1)
    return slice_id.startswith(f"{node}/gpu{gpu}/")


def simulate(
    cluster: Cluster,
    teams: TeamsSpec,
    workload: Workload,
    config: SimConfig,
    *,
    initial: Sequence[InitialRun] = (),
    start_s: float = 0.0,
    specs: Mapping[str, JobSpec] | None = None,
    history: DecayedUsage | None = None,
) -> SimResult:
    """Run one simulation (see the module docstring; `Simulation` for the live-start options
    and the change log)."""
    sim = Simulation(
        cluster,
        teams,
        workload,
        config,
        initial=initial,
        start_s=start_s,
        specs=specs,
        history=history,
    )
    return sim.run()
