"""Queue ETAs: when each pending job is expected to start, by simulating the live queue forward.

The control plane shows "eta_s: an estimate" next to each waiting job. Rather than a
second, simpler model that would drift from what the scheduler really does, the
estimate replays the current state on the simulator's own engine (`sim.engine`), which
calls the same `decide()` the reconciler calls: the running jobs hold their GPUs until
their expected ends, the pending jobs arrive now, and the first time each job holds all
its GPUs in that replay is its ETA. One code path for the simulator and the live service.

What the replay assumes, and so what an ETA means:
- Runtimes are estimates: a running job ends at its `expected_end_s`, else at its start
  plus `runtime_estimate_s`, else `default_runtime_s` from now; a pending job runs for
  its `runtime_estimate_s`, else `default_runtime_s` (both capped by `max_runtime_s`,
  when the job has one). A running job with time left ends exactly then: only an
  overdue one (past its expected end) is assumed to end `MIN_REMAINING_S` from now.
  Jobs whose runtime was assumed are listed in `EtaResult.assumed_runtime`, so the
  caller can say so ("assuming 1 h").
- Work saved by a job's earlier attempts (`done_s`: up to each one's last checkpoint) is
  not done again: an attempt runs its runtime less that work, as the emulated executor
  runs it and a real job resuming from its checkpoint does. Running jobs' times left and
  pending jobs' runtimes both take it off (else a requeued job that had saved 310 s of a
  1000 s run is replayed for 1000 s and runs 690 s: the ETAs behind it 310 s late).
- A job preempted in the replay restarts at once, with no restart overhead (the
  simulator's default 300 s of reload and warm-up made every ETA behind a predicted
  preemption 300 s late). One that checkpoints saves all its work in the grace period,
  as the live plane asks it to; one that does not reruns its whole runtime (less `done_s`)
  as it would live, including the part it ran before the replay began (the engine kept
  a running job's earlier work through a preemption: a job 400 s into a 1000 s run
  came back for 600 s in the replay and 1000 s live; `sim.engine.InitialRun`).
- A pending job in its restart backoff (`not_before`) arrives in the replay when the
  backoff ends, as the reconciler leaves it out of every cycle until then; it arrived at
  once and started up to the backoff (at most 600 s) early, taking GPUs another job
  would have had.
- Nodes that take no new job (`unavailable`: down or drained in the store) stay so: the
  GPUs free on them are held before every simulated cycle, as the reconciler's own
  state holds them, and jobs already running there keep running to their ends.
- Nothing else arrives, nothing fails, no spot node is reclaimed, and MIG re-layouts
  are not applied (unless `relayout_s` is given): ETAs can move later as work arrives
  and earlier as jobs end early.
- A pending job that does not start in the replay although nothing runs at its end can
  never start as things are (`EtaResult.never`: no node it may use is available, or its
  team's quotas never let it); one still waiting behind running work at the horizon
  just has no ETA within it.
- The scheduler sees each job's own `JobSpec` (its declared estimate, topology
  constraint, submission time, ...) exactly as the live cycle does; only the simulated
  runtimes come from the rules above.
- The same inputs give the same ETAs (a fixed seed; nothing random is on).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from gpufleet.cluster import Cluster, Whole, to_milli
from gpufleet.sched.fairshare import DecayedUsage
from gpufleet.sched.framework import InvalidPlacementError, Placement
from gpufleet.sim.engine import FailureModel, InitialRun, SimConfig, Simulation, SpotModel
from gpufleet.sim.workload import CleaningReport, TraceJob, Workload
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.teams import TeamsSpec

DEFAULT_RUNTIME_S: Final = 3600.0  # a job that declares no runtime is assumed to run 1 h
MIN_REMAINING_S: Final = 60.0  # an overdue running job is assumed to end within a minute
MIN_RUN_S: Final = 1.0  # an attempt whose work was all saved still starts, for a second
HORIZON_S: Final = 30 * 86_400.0  # a job not started within 30 days has no ETA
SEED: Final = 0  # nothing random runs (no failures, no reclaims); fixed all the same
# holder of an unavailable node's free GPUs in the replay: no job name (those are ids)
UNAVAILABLE: Final = "\x00unavailable:"


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A job running now: its spec (state running, with its placement), the flavor its
    GPUs are charged to, when it started, and when it is expected to end if known."""

    spec: JobSpec
    flavor: str
    started_s: float
    expected_end_s: float | None = None


@dataclass(frozen=True)
class EtaResult:
    """Expected start times of the pending jobs (an estimate, see the module docstring).

    `start_s`: pending job -> expected start (seconds, the caller's clock), None when it
    does not start within the horizon (it never fits, or the queue ahead is too long).
    `assumed_runtime`: jobs (running or pending) whose runtime is `default_runtime_s`
    because they declare none. `wall_s`: how long the estimate took to compute.
    `never`: the pending jobs without a start that can never start as things are (the
    replay ran out of work with them still waiting), so a page says "never" and why,
    rather than "no estimate" as for a job merely beyond the horizon.
    """

    start_s: Mapping[str, float | None]
    assumed_runtime: frozenset[str]
    wall_s: float
    never: frozenset[str] = field(default_factory=frozenset)


def queue_cycle_s(pending: int) -> float:
    """Simulated cycle interval for a live queue's forward simulation: coarser for long
    queues, which keeps it cheap at the price of ETAs accurate to about one such cycle."""
    return 10.0 if pending <= 500 else 60.0 if pending <= 5000 else 300.0


def estimate_starts(
    cluster: Cluster,
    teams: TeamsSpec,
    running: Sequence[RunningJob],
    pending: Sequence[JobSpec],
    *,
    now_s: float,
    profile: str = "default",
    default_runtime_s: float = DEFAULT_RUNTIME_S,
    horizon_s: float = HORIZON_S,
    cycle_interval_s: float = 10.0,
    history: DecayedUsage | None = None,
    relayout_s: float | None = None,
    unavailable: Collection[str] = (),
    done_s: Mapping[str, float] = MappingProxyType({}),
    not_before: Mapping[str, float] = MappingProxyType({}),
) -> EtaResult:
    """When each of `pending` is expected to start, simulating forward from `now_s`.

    `running` jobs hold their placements from `now_s`; `pending` jobs all arrive at
    `now_s` and are ordered by the profile from their own specs (submission time,
    priority, fair share), as the live cycle orders them. `history` is the teams' decayed
    past use (fair share), as of `now_s` or earlier; None: no past use. `cycle_interval_s`
    should be the reconciler's. `relayout_s`: apply the MIG re-layouts the scheduler
    proposes after that long (None: the control plane does not re-cut GPUs by itself).
    `unavailable`: nodes that take no new job (down or drained). `done_s`: job -> seconds
    of its work that its earlier attempts saved (a running job's current attempt is not
    one of them). `not_before`: pending job -> when its restart backoff ends.

    Raises `InvalidPlacementError` for a running job whose placement the cluster cannot
    hold, `ValueError` for repeated names, and what `decide()` raises (an unknown
    priority class, say).
    """
    t0 = time.perf_counter()
    assumed: set[str] = set()
    initial = [
        _initial_run(r, now_s, default_runtime_s, assumed, done_s.get(r.spec.name, 0.0))
        for r in running
    ]
    arrivals = [
        _pending_trace(
            j,
            max(now_s, not_before.get(j.name, now_s)),
            default_runtime_s,
            assumed,
            done_s.get(j.name, 0.0),
        )
        for j in pending
    ]
    specs = {r.spec.name: _pending_form(r.spec) for r in running}
    specs.update({j.name: j for j in pending})
    workload = Workload(tuple(arrivals), CleaningReport("live queue", len(pending), len(pending)))
    config = SimConfig(
        profile=profile,
        seed=SEED,
        cycle_interval_s=cycle_interval_s,
        restart_overhead_s=0.0,  # a live restart runs its runtime estimate, no more
        failures=FailureModel(gpu_mtbf_h=None),
        spot=SpotModel(reclaim_per_node_per_day=0.0),
        horizon_s=now_s + horizon_s,
        sample_interval_s=horizon_s,  # the ETA reads no samples: take as few as possible
        relayout_s=relayout_s,
    )
    replay = _Replay(
        cluster,
        teams,
        workload,
        config,
        initial=initial,
        start_s=now_s,
        specs=specs,
        history=history,
        unavailable=unavailable,
    )
    result = replay.run()
    starts = {j.name: result.first_start_s.get(j.name) for j in pending}
    stalled = len(replay.running) == 0  # nothing left to end: the waiting ones stay waiting
    never = {n for n, at in starts.items() if at is None} if stalled else set()
    return EtaResult(
        start_s=MappingProxyType(starts),
        assumed_runtime=frozenset(assumed),
        wall_s=time.perf_counter() - t0,
        never=frozenset(never),
    )


class _Replay(Simulation):
    """The simulator's engine with nodes that take no new job: before every scheduling
    cycle the GPUs free on them are held, as the reconciler's `_state` holds a down or
    drained node's free GPUs each cycle. Held per cycle, not once, so GPUs a job running on
    a drained node frees are not handed out in the replay when they are not live."""

    def __init__(self, *args: Any, unavailable: Collection[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._unavailable = sorted(set(unavailable) & {n.name for n in self.cluster.nodes})
        self._holds = 0

    def _cycle(self, payload: str) -> None:
        for node in self._unavailable:
            free = self.state.free_gpu_ids(node)
            if free:
                self._holds += 1
                self.state.allocate(f"{UNAVAILABLE}{node}#{self._holds}", Whole(node, free))
        super()._cycle(payload)


def _runtime_s(
    job: JobSpec, default_runtime_s: float, assumed: set[str], done_s: float = 0.0
) -> float:
    """Its declared runtime, else the default (noted as assumed); never past its limit;
    less the work its earlier attempts saved (`done_s`), which no attempt does again."""
    runtime = job.runtime_estimate_s
    if runtime is None:
        assumed.add(job.name)
        runtime = default_runtime_s
    if job.max_runtime_s is not None:
        runtime = min(runtime, job.max_runtime_s)
    return max(MIN_RUN_S, runtime - done_s) if done_s > 0 else runtime


def _initial_run(
    r: RunningJob, now_s: float, default_runtime_s: float, assumed: set[str], done_s: float
) -> InitialRun:
    """A running job for the engine: its placement, the time it has left and, as its
    trace's duration, what an attempt started afresh would run (its runtime less `done_s`,
    at least the time it has left), which the engine restarts it with when it keeps no
    checkpoints (`sim.engine.InitialRun`)."""
    job = r.spec
    elapsed_s = max(0.0, now_s - r.started_s)
    if r.expected_end_s is not None:
        remaining_s = _left(r.expected_end_s - now_s)
        rerun_s = _runtime_s(job, default_runtime_s, set(), done_s)
    elif job.runtime_estimate_s is not None:
        rerun_s = _runtime_s(job, default_runtime_s, assumed, done_s)
        remaining_s = _left(rerun_s - elapsed_s)
    else:  # nothing known: assume it runs the default from now (within its limit)
        assumed.add(job.name)
        rerun_s = _runtime_s(job, default_runtime_s, assumed, done_s)
        remaining_s = default_runtime_s
        if job.max_runtime_s is not None:
            remaining_s = _left(min(remaining_s, job.max_runtime_s - elapsed_s))
    submit_s = min(job.submitted_s, r.started_s)
    if job.kind == "inference":  # a replica ends at its window's end: make that now + remaining
        duration_s = now_s + remaining_s - submit_s
    else:
        duration_s = max(rerun_s, remaining_s)
    return InitialRun(
        trace=_trace(job, submit_s, duration_s),
        placements=_placements(job),
        flavor=r.flavor,
        started_s=r.started_s,
        remaining_s=remaining_s,
    )


def _left(remaining_s: float) -> float:
    """A running job's time left: exactly what its estimate leaves, else (overdue) a
    minute. Floored only when overdue: a floor on every job put each ETA that waited on a
    job in its last minute up to a minute late."""
    return remaining_s if remaining_s > 0 else MIN_REMAINING_S


def _pending_trace(
    job: JobSpec, arrive_s: float, default_runtime_s: float, assumed: set[str], done_s: float
) -> TraceJob:
    """A pending job arrives now, all at once, so the first cycle sees the whole queue (one
    in its restart backoff when that ends: `arrive_s`); its spec keeps its submission
    time, which orders the queue. It runs its runtime less the work saved (`done_s`)."""
    if job.state != "pending" or job.placement:
        raise ValueError(f"pending job {job.name} is running or has a placement")
    return _trace(job, arrive_s, _runtime_s(job, default_runtime_s, assumed, done_s))


def _trace(job: JobSpec, submit_s: float, duration_s: float) -> TraceJob:
    """The simulator's record of a job: its request and what it declares, with the
    simulated runtime. The scheduler sees the job's own spec (`specs`), so what a trace
    cannot hold (topology, spot preference, limits, an inference load) still counts."""
    return TraceJob(
        name=job.name,
        team=job.team,
        submit_s=submit_s,
        duration_s=duration_s,
        gpus=job.gpus,
        workers=job.workers,
        gpu_fraction=job.gpu_fraction,
        mig_profile=job.mig_profile,
        accelerators=tuple(job.accelerators),
        kind=job.kind,
        priority_class=job.priority_class,
        user=job.user,
        project=job.project,
        runtime_estimate_s=job.runtime_estimate_s,
        checkpoint_interval_s=job.checkpoint_interval_s,
        preemptible=job.preemptible,
    )


def _pending_form(job: JobSpec) -> JobSpec:
    """A running job's spec as the engine keeps it for requeueing: no placement, no start."""
    return job.model_copy(update={"state": "pending", "placement": [], "started_s": None})


def _placements(job: JobSpec) -> tuple[Placement, ...]:
    """A running job's placement in the scheduler's form (as `decide()` reads it)."""
    if not job.placement:
        raise InvalidPlacementError(f"running job {job.name} has no placement")
    out: list[Placement] = []
    for p in job.placement:
        if not (p.gpus or p.mig_slices):
            raise InvalidPlacementError(
                f"running job {job.name}: placement on {p.node} names no GPUs or MIG slices"
            )
        if p.fraction is not None:
            if len(p.gpus) != 1:
                raise InvalidPlacementError(
                    f"running job {job.name}: a fraction on {p.node} needs exactly one GPU "
                    f"index in gpus, got {p.gpus}"
                )
            milli = to_milli(p.fraction)
            out.append(
                Placement(p.node, mig_slices=tuple(p.mig_slices), gpu=p.gpus[0], milli=milli)
            )
        else:
            out.append(Placement(p.node, gpus=tuple(p.gpus), mig_slices=tuple(p.mig_slices)))
    return tuple(out)
