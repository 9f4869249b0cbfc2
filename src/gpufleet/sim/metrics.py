"""What a simulation measured: the recorder the engine feeds, and the stable result fields.

Definitions (the JSON field names are stable; docs/guide/simulate.md repeats them):

- `gpu_allocation_ratio` — time-weighted GPUs held by jobs (whole GPUs, shares, MIG
  slices weighed by their compute share) ÷ the cluster's GPUs, from the first arrival
  to the end of the run.
- `busy_utilization` — GPU-time the GPUs were busy ÷ the cluster's GPU-time, from each
  job's declared `busy_fraction` (a job that declares none counts as not busy; None when
  no job declares one). `busy_declared_share` says what share of the held GPU-time
  declared one, so a low value is read correctly.
- `goodput_ratio` — useful GPU-hours ÷ GPU-hours held: the work of completed jobs
  (`gpu_hours_completed`) and the work jobs unfinished at the end had done toward their
  completion (`in_progress_gpu_hours`: a horizon cuts them, it does not waste them). The
  rest is `lost_gpu_hours` (preemption, failures, spot reclaims, restart overhead),
  `gang_wait_gpu_hours` (GPUs that pods of a job held while waiting for the rest of its
  pods: profiles without gang scheduling, `k8s-default`) and `idle_held_gpu_hours`;
  held = the five, per job. Work, useful or lost, is counted on the GPUs a job asked
  for: a 0.25-GPU job that a whole-GPU-only profile (`k8s-default`) runs on a whole GPU
  does 0.25 GPU-hours of work an hour, not 1.
- `idle_held_gpu_hours` — GPU-hours held but not requested: the eighths a fraction is
  placed in, rounded up (`sched.requests.FRACTION_STEPS`: a 0.32-GPU job holds 0.375),
  and the rest of the whole GPU a whole-GPU-only profile gives a slice or a fraction. A
  MIG slice placed as a slice holds its share (weighed by where it lies): 0 for it.
- `wait_s`, `jct_s` — mean/p50/p95/p99 of queue wait (first start − arrival) and job
  completion time (end − arrival) over the completed jobs papers measure: training,
  batch and interactive, not inference replicas (`HEADLINE_KINDS`), whose completion
  time is their serving window (a replica ends at its window's end however late it
  starts: mixed in, a 2-day window is the p99 and drags the mean). `jct_jobs` counts the
  jobs they cover; `inference_wait_s` is the replicas' wait (only when some completed).
  Per team and per kind they cover every completed job of the team or kind.
- `slowdown` — mean/p50/p95/p99 of JCT ÷ the job's uninterrupted run time (1 = it ran at
  once and was never stopped), over completed training, batch and interactive jobs (not
  inference replicas, which run for their serving window whenever they start). With speeds per
  accelerator (`sim.speed`), the run time on the accelerator its last attempt ran on. Not
  bounded (a 1-s job that waits an hour: 3,601); `--jobs-out` has what bounded slowdown needs.
- Percentiles are numpy's default (linear between ranks, type 7), the mean arithmetic; only
  completed jobs have them (`jobs_unfinished` says how many a horizon left out).
- `makespan_s` — from the first arrival to the last completion (None when none completed).
- `gpu_allocation_while_arriving` — `gpu_allocation_ratio` over the window jobs arrive in
  (first to last arrival, or to the end of the run when a horizon ends it first): the
  load the workload puts on the cluster, without the drain tail after the last arrival
  that pulls the whole-run figure down (None: one instant).
- `gpu_allocation_in_window` — `gpu_allocation_ratio` over a window the user names
  (`gpufleet simulate --window 2h-10h`: offsets from the first arrival), with the window
  it covers (`window_from_s`, `window_to_s`: clipped to the run; None: no window asked).
- `per_size` — `jobs_completed`, `wait_s`, `jct_s` and `slowdown` by job size, over the
  jobs `wait_s` and `jct_s` cover: the GPUs it asked for (a 0.25-GPU job that a
  whole-GPU profile ran on one GPU is still under one GPU).
- `jain_fairness` — Jain's index over teams of their satisfaction: share of GPU-hours
  held ÷ the share due to them, capped at 1, where the share due is the smaller of the
  entitled share (the team's share of guaranteed GPUs, or equal shares when no team has
  a guarantee) and its demanded share (GPU-hours its jobs asked for). 1: every team got
  its due or all it asked for; 1/n: one team was served and the others starved. (MIG
  jobs count no GPU-hours of demand: their GPU share is known only once placed.)
- `slo_attainment` — inference replicas: served time inside their window ÷ wanted
  time (None without inference jobs).
- `preemptions`, `lost_gpu_hours` — evictions by the scheduler; GPU-hours of work lost
  to evictions, failures and spot reclaims, plus restart overhead.
- `fragmented_gpus_mean` — sampled: free whole GPUs that no pending request could use
  (on nodes with fewer free GPUs than the smallest pending worker of that type); 0
  when nothing is pending.
- `jobs_completed`, `gpu_hours_completed` — and `jobs_unfinished` (never started or
  still running at the end).

Besides the metrics, a run hands back its `Ledger`: the raw GPU-second integrals the
ratios above are made of (cluster and per team), each job's GPU-seconds from the
engine's own per-job bookkeeping and, when asked for, every change of a team's held
GPUs. `sim.conservation` checks that these add up (a metric fed twice, or not at all,
fails the check instead of printing 0 %).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from gpufleet.cluster import Cluster, State
from gpufleet.sim.ledger import HeldChange, JobHeld, Ledger
from gpufleet.sim.run import Run
from gpufleet.sim.workload import TraceJob, Workload
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.teams import TeamsSpec

FloatArray = npt.NDArray[np.float64]


# The metrics that are one number per run, in the order of `SimMetrics.to_json` (and of
# the reports, with the wait and JCT percentiles after the first four).
SCALARS: Final = (
    "gpu_allocation_ratio",
    "busy_utilization",
    "busy_declared_share",
    "goodput_ratio",
    "jain_fairness",
    "slo_attainment",
    "preemptions",
    "lost_gpu_hours",
    "gang_wait_gpu_hours",
    "in_progress_gpu_hours",
    "idle_held_gpu_hours",
    "fragmented_gpus_mean",
    "jobs_completed",
    "jobs_unfinished",
    "jct_jobs",
    "gpu_hours_completed",
    "jobs_per_day",
    "gpu_hours_per_day",
    "failures",
    "spot_reclaims",
    "relayout_proposals",
    "relayouts_applied",
    "duration_s",
    "makespan_s",
    "gpu_allocation_while_arriving",
)
# the mean is what papers report (Tiresias, Pollux: "average JCT"); the percentiles the tail
PERCENTILES: Final = ("mean", "p50", "p95", "p99")
# the kinds of job the headline wait, JCT and slowdown cover: those whose completion time
# the scheduler decides, as papers measure them; not inference replicas, which run for a
# window fixed in advance (per_kind and `inference_wait_s` report them)
HEADLINE_KINDS: Final = ("training", "batch", "interactive")
HEADLINE_JOBS: Final = "training, batch and interactive jobs"


def percentiles(values: Iterable[float] | FloatArray) -> dict[str, float | None]:
    """Mean, p50, p95 and p99 (linear between ranks) of the values (None each for none)."""
    arr = values if isinstance(values, np.ndarray) else np.fromiter(values, dtype=float)
    if arr.size == 0:
        return {"mean": None, "p50": None, "p95": None, "p99": None}
    p50, p95, p99 = np.percentile(arr, [50, 95, 99])
    return {"mean": float(arr.mean()), "p50": float(p50), "p95": float(p95), "p99": float(p99)}


def jain(values: Iterable[float]) -> float | None:
    """Jain's fairness index (Σx)² / (n Σx²); None for no values, 1.0 when all are zero."""
    x = np.fromiter(values, dtype=float)
    if x.size == 0:
        return None
    denom = x.size * float(np.sum(x * x))
    return 1.0 if denom == 0 else float(np.sum(x)) ** 2 / denom


def waiting_shape(job: JobSpec) -> tuple[tuple[str, ...], int]:
    """What a sample reads of a pending job: its acceptable accelerators and the GPUs of
    one worker (a share or a slice can use any free GPU: 1)."""
    return tuple(job.accelerators), job.gpus or 1


@dataclass(frozen=True)
class Sample:
    t_s: float
    allocated_ratio: float
    pending: int
    running: int
    fragmented_gpus: int


SIZE_ORDER: Final = ("under 1 GPU", "1 GPU", "2-8 GPUs", "9-64 GPUs", "over 64 GPUs")


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def size_bucket(gpus: float) -> str:
    """A job's size class by the GPUs it asked for (a share or a slice is under one GPU)."""
    if gpus < 1:
        return SIZE_ORDER[0]
    if gpus == 1:
        return SIZE_ORDER[1]
    if gpus <= 8:
        return SIZE_ORDER[2]
    if gpus <= 64:
        return SIZE_ORDER[3]
    return SIZE_ORDER[4]


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One completed job, as papers tabulate them (`gpufleet simulate --jobs-out`)."""

    name: str
    team: str
    kind: str
    gpus: float  # GPUs its last attempt held
    submit_s: float
    first_start_s: float
    end_s: float
    # its uninterrupted run time: the trace's, scaled to the accelerator its last attempt
    # ran on when speeds are in use (sim.speed)
    duration_s: float
    attempts: int  # starts: 1 + preemptions, failures and reclaims it came back from
    # GPUs it asked for (`TraceJob.requested_gpus`; else what it held): the size it is
    # grouped by, the same under every profile
    requested_gpus: float = 0.0

    @property
    def wait_s(self) -> float:
        return self.first_start_s - self.submit_s

    @property
    def jct_s(self) -> float:
        return self.end_s - self.submit_s

    @property
    def slowdown(self) -> float:
        return self.jct_s / self.duration_s if self.duration_s > 0 else 1.0


JOB_COLUMNS: Final = (
    "name",
    "team",
    "kind",
    "gpus",
    "requested_gpus",
    "submit_s",
    "first_start_s",
    "end_s",
    "wait_s",
    "jct_s",
    "duration_s",
    "slowdown",
    "attempts",
)


@dataclass(frozen=True)
class SimMetrics:
    """The run's results (the stable JSON fields, plus the time series for plots)."""

    gpu_allocation_ratio: float
    busy_utilization: float | None
    busy_declared_share: float | None
    goodput_ratio: float | None
    wait_s: Mapping[str, float | None]
    jct_s: Mapping[str, float | None]
    jain_fairness: float | None
    slo_attainment: float | None
    preemptions: int
    lost_gpu_hours: float
    fragmented_gpus_mean: float
    jobs_completed: int
    jobs_unfinished: int
    gpu_hours_completed: float
    jobs_per_day: float
    gpu_hours_per_day: float
    failures: int
    spot_reclaims: int
    relayout_proposals: int
    relayouts_applied: int
    duration_s: float
    makespan_s: float | None
    slowdown: Mapping[str, float | None]
    gpu_allocation_while_arriving: float | None
    per_team: Mapping[str, Mapping[str, Any]]
    per_kind: Mapping[str, Mapping[str, Any]]
    per_size: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # completed jobs in `wait_s`, `jct_s`, `slowdown`, `per_size` (`HEADLINE_KINDS`), and the
    # inference replicas' wait apart (in `to_json` only when a replica completed)
    jct_jobs: int = 0
    inference_wait_s: Mapping[str, float | None] = field(default_factory=lambda: percentiles(()))
    gang_wait_gpu_hours: float = 0.0
    in_progress_gpu_hours: float = 0.0
    idle_held_gpu_hours: float = 0.0
    gpu_allocation_in_window: float | None = None
    window_from_s: float | None = None  # offsets from the first arrival, clipped to the run
    window_to_s: float | None = None
    samples: tuple[Sample, ...] = field(default=(), repr=False)
    # the waits and JCTs of the jobs `wait_s` and `jct_s` cover (compare's CDFs)
    waits: tuple[float, ...] = field(default=(), repr=False)
    jcts: tuple[float, ...] = field(default=(), repr=False)
    jobs: tuple[JobRecord, ...] = field(default=(), repr=False)  # completed, in end order

    def window_warning(self) -> str | None:
        """What to tell a user whose `--window` lies past the end of the run (clipped to
        nothing, it holds no allocation to report); None otherwise."""
        if self.window_from_s is None or self.gpu_allocation_in_window is not None:
            return None
        return (
            f"--window starts {self.window_from_s / 3600:,.3g} h after the first arrival, "
            f"when the run ({self.duration_s / 3600:,.3g} h) is over: it holds no allocation"
        )

    def to_json(self, *, series: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {k: getattr(self, k) for k in SCALARS}
        out["wait_s"] = dict(self.wait_s)
        out["jct_s"] = dict(self.jct_s)
        out["slowdown"] = dict(self.slowdown)
        out["per_team"] = {k: dict(v) for k, v in self.per_team.items()}
        out["per_kind"] = {k: dict(v) for k, v in self.per_kind.items()}
        out["per_size"] = {k: dict(v) for k, v in self.per_size.items()}
        if "inference" in self.per_kind:  # replicas completed: their wait, apart
            out["inference_wait_s"] = dict(self.inference_wait_s)
        if self.window_from_s is not None:  # only when a window was asked for
            out["gpu_allocation_in_window"] = self.gpu_allocation_in_window
            out["window_from_s"] = self.window_from_s
            out["window_to_s"] = self.window_to_s
        if series:
            out["samples"] = [s.__dict__ for s in self.samples]
        return out


class _Area:
    """A piecewise-constant level and its integral over time."""

    __slots__ = ("area", "last_s", "level")

    def __init__(self, start_s: float) -> None:
        self.level = 0.0
        self.area = 0.0
        self.last_s = start_s

    def move(self, t_s: float, delta: float) -> None:
        self.area += self.level * (t_s - self.last_s)
        self.last_s = t_s
        self.level += delta


class _WindowArea:
    """The integral of a piecewise-constant level over [from_s, to_s) only."""

    __slots__ = ("area", "from_s", "last_s", "level", "to_s")

    def __init__(self, from_s: float, to_s: float) -> None:
        self.from_s, self.to_s = from_s, to_s
        self.level = self.area = 0.0
        self.last_s = from_s

    def move(self, t_s: float, delta: float) -> None:
        lo, hi = max(self.last_s, self.from_s), min(t_s, self.to_s)
        if hi > lo:
            self.area += self.level * (hi - lo)
        self.last_s = max(self.last_s, t_s)
        self.level += delta


class MetricsRecorder:
    """Fed by the engine as things happen; `result()` once at the end.

    `allocated` is the one place held GPUs are fed (`released` is `allocated` with fewer
    GPUs), so a team's integral, the cluster's and the change log (`keep_changes`: each
    change of a team's held GPUs, which the multi-team plan reads as usage over time)
    all see each change exactly once.
    """

    def __init__(
        self,
        cluster: Cluster,
        teams: TeamsSpec,
        workload: Workload,
        *,
        keep_changes: bool = False,
        window_s: tuple[float, float] | None = None,
    ) -> None:
        self.cluster = cluster
        self.capacity_gpus = float(sum(n.gpus for n in cluster.nodes))
        self.start_s = workload.jobs[0].submit_s if workload.jobs else 0.0
        self.alloc = _Area(self.start_s)
        self.window = (
            None
            if window_s is None
            else _WindowArea(self.start_s + window_s[0], self.start_s + window_s[1])
        )
        self.busy = _Area(self.start_s)
        self.declared = _Area(self.start_s)
        self.team_alloc: dict[str, _Area] = {}
        self.down = _Area(self.start_s)
        self.end_s = self.start_s
        self.useful_gpu_s = 0.0  # of completed jobs
        self.in_progress_gpu_s = 0.0  # of jobs unfinished at the end (set by `close`)
        self.gang_wait_gpu_s = 0.0
        self.idle_gpu_s = 0.0  # held beyond jobs' requests (set by `close`)
        self.lost_gpu_s = 0.0
        self.preemptions = self.failures = self.spot_reclaims = self.relayouts = 0
        self.relayouts_applied = 0
        self.completed_runs: list[tuple[TraceJob, float, float]] = []  # job, wait, jct
        self.job_records: list[JobRecord] = []
        self.samples: list[Sample] = []
        self.entitled = self._entitlements(teams, workload)
        self.inference_wanted_s = 0.0
        self.demand: dict[str, float] = {}  # team -> GPU-seconds its jobs asked for
        self.inference_served_s = 0.0
        self.changes: list[HeldChange] | None = [] if keep_changes else None
        self.last_arrival_s = workload.jobs[-1].submit_s if workload.jobs else self.start_s
        self.area_at_last_arrival: float | None = None  # held GPU-seconds until then

    @staticmethod
    def _entitlements(teams: TeamsSpec, workload: Workload) -> dict[str, float]:
        names = sorted({j.team for j in workload.jobs})
        guaranteed = {
            t.name: sum(q.guaranteed_gpus for q in t.quotas) for t in teams.teams if t.name in names
        }
        total = sum(guaranteed.values())
        if total <= 0:
            return {n: 1.0 / len(names) for n in names} if names else {}
        return {n: guaranteed.get(n, 0) / total for n in names}

    # -- events --------------------------------------------------------------------------

    def arrived(self, job: TraceJob) -> None:
        if self.area_at_last_arrival is None and job.submit_s >= self.last_arrival_s:
            a = self.alloc
            self.area_at_last_arrival = a.area + a.level * (job.submit_s - a.last_s)
        self.demand[job.team] = self.demand.get(job.team, 0.0) + job.total_gpus * job.duration_s
        if job.kind == "inference":
            self.inference_wanted_s += job.duration_s

    def released(self, t_s: float, run: Run, gpus: float) -> None:
        self.allocated(t_s, run, -gpus)

    def allocated(self, t_s: float, run: Run, gpus: float) -> None:
        """`run` holds `gpus` more GPUs from `t_s` (fewer when negative)."""
        self.alloc.move(t_s, gpus)
        if self.window is not None:
            self.window.move(t_s, gpus)
        trace = run.trace
        area = self.team_alloc.get(trace.team)
        if area is None:
            area = self.team_alloc[trace.team] = _Area(self.start_s)
        area.move(t_s, gpus)
        if self.changes is not None:
            self.changes.append((t_s, trace.team, trace.kind, gpus))
        busy = trace.busy_fraction
        if busy is not None:
            self.busy.move(t_s, gpus * busy)
            self.declared.move(t_s, gpus)

    def completed(self, run: Run, t_s: float) -> None:
        job = run.trace
        start = run.first_start_s if run.first_start_s is not None else t_s
        self.completed_runs.append((job, start - job.submit_s, t_s - job.submit_s))
        self.job_records.append(
            JobRecord(
                job.name,
                job.team,
                job.kind,
                run.gpus,
                job.submit_s,
                start,
                t_s,
                job.duration_s * run.time_factor,
                run.attempt + 1,
                _or(job.requested_gpus(run.flavor), run.gpus),
            )
        )
        if job.kind == "inference":
            self.inference_served_s += run.served_s
        self.useful_gpu_s += run.useful_gpu_s()

    def preempted(self) -> None:
        self.preemptions += 1

    def lost(self, gpu_s: float) -> None:
        self.lost_gpu_s += gpu_s

    def node_down(self, t_s: float, gpus: int) -> None:
        self.down.move(t_s, gpus)

    def node_up(self, t_s: float, gpus: int) -> None:
        self.down.move(t_s, -gpus)

    def sample(
        self,
        t_s: float,
        state: State,
        waiting: Mapping[tuple[tuple[str, ...], int], int],
        running: int,
        jobs_waiting: int | None = None,
    ) -> None:
        """`waiting`: how many pending jobs ask for each (acceptable accelerators, GPUs per
        worker) pair (`waiting_shape`), kept by the caller as jobs come and go, so a sample
        costs the distinct pairs, not the queue. `jobs_waiting`: the jobs those units belong
        to where they differ (pods of one job, `k8s-default`: `pending` counts jobs)."""
        smallest: dict[str, int] = {}  # accelerator ("" = any) -> smallest worker pending
        n_pending = 0
        for (accelerators, size), count in waiting.items():
            n_pending += count
            for acc in accelerators or ("",):
                smallest[acc] = min(smallest.get(acc, size), size)
        fragmented = 0
        if n_pending:
            for acc in self.cluster.accelerators:
                k = min(smallest.get(acc, 10**9), smallest.get("", 10**9))
                free = state.free_total(acc)
                usable = 0
                if k < 10**9:
                    usable = state.free_on_nodes_with(acc, k)
                fragmented += free - usable
        self.samples.append(
            Sample(
                t_s,
                self.alloc.level / self.capacity_gpus if self.capacity_gpus else 0.0,
                n_pending if jobs_waiting is None else jobs_waiting,
                running,
                fragmented,
            )
        )

    def close(
        self,
        end_s: float,
        jobs: int,
        *,
        in_progress_gpu_s: float,
        gang_wait_gpu_s: float,
        idle_gpu_s: float,
    ) -> None:
        """The run ended at `end_s` with `jobs` jobs in all (completed or not); the jobs
        unfinished then had done `in_progress_gpu_s` of work toward their completion, pods
        of partial gangs had held `gang_wait_gpu_s` waiting for the rest of theirs, and
        jobs had held `idle_gpu_s` beyond their requests (slices and fractions on whole
        GPUs)."""
        self.in_progress_gpu_s = in_progress_gpu_s
        self.gang_wait_gpu_s = gang_wait_gpu_s
        self.idle_gpu_s = idle_gpu_s
        self.end_s = max(end_s, self.start_s)
        for area in (self.alloc, self.busy, self.declared, self.down, *self.team_alloc.values()):
            area.move(self.end_s, 0.0)
        self.unfinished = jobs - len(self.completed_runs)

    # -- result --------------------------------------------------------------------------

    def ledger(self, profile: str, jobs: Mapping[str, JobHeld]) -> Ledger:
        """The integrals behind `result()`, once `close()` has run."""
        return Ledger(
            profile=profile,
            capacity_gpus=self.capacity_gpus,
            start_s=self.start_s,
            end_s=self.end_s,
            held_gpu_s=self.alloc.area,
            team_held_gpu_s={t: a.area for t, a in sorted(self.team_alloc.items())},
            jobs=jobs,
            changes=None if self.changes is None else tuple(self.changes),
        )

    def result(self) -> SimMetrics:
        span = self.end_s - self.start_s
        cap_area = self.capacity_gpus * span
        runs = self.completed_runs
        wait_arr = np.array([w for _, w, _ in runs], dtype=float)
        jct_arr = np.array([c for _, _, c in runs], dtype=float)
        kinds: list[str] = [j.kind for j, _, _ in runs]
        headline = np.fromiter((k in HEADLINE_KINDS for k in kinds), dtype=bool, count=len(runs))
        replicas = np.fromiter((k == "inference" for k in kinds), dtype=bool, count=len(runs))
        waits, jcts = wait_arr[headline], jct_arr[headline]
        held_gpu_s = self.alloc.area
        team_used = {t: a.area for t, a in self.team_alloc.items()}
        used_total = sum(team_used.values())
        demand_total = sum(self.demand.values())
        shares = []
        for t, e in self.entitled.items():
            # a team is treated fairly when it got its entitled share, or all it asked for
            # if it asked for less: satisfaction = used share ÷ min(entitled, demanded), ≤ 1
            wanted = self.demand.get(t, 0.0) / demand_total if demand_total else 0.0
            due = min(e, wanted)
            if due > 0:
                used = team_used.get(t, 0.0) / used_total if used_total else 0.0
                shares.append(min(1.0, used / due))
        days = span / 86_400 if span > 0 else 0.0
        frag = [s.fragmented_gpus for s in self.samples]
        return SimMetrics(
            gpu_allocation_ratio=held_gpu_s / cap_area if cap_area else 0.0,
            busy_utilization=self.busy.area / cap_area if self.declared.area and cap_area else None,
            busy_declared_share=self.declared.area / held_gpu_s if held_gpu_s else None,
            goodput_ratio=(
                min(1.0, (self.useful_gpu_s + self.in_progress_gpu_s) / held_gpu_s)
                if held_gpu_s
                else None
            ),
            wait_s=percentiles(waits),
            jct_s=percentiles(jcts),
            jain_fairness=jain(shares) if len(shares) > 1 else (1.0 if shares else None),
            slo_attainment=(
                self.inference_served_s / self.inference_wanted_s
                if self.inference_wanted_s
                else None
            ),
            preemptions=self.preemptions,
            lost_gpu_hours=self.lost_gpu_s / 3600,
            gang_wait_gpu_hours=self.gang_wait_gpu_s / 3600,
            in_progress_gpu_hours=self.in_progress_gpu_s / 3600,
            idle_held_gpu_hours=self.idle_gpu_s / 3600,
            fragmented_gpus_mean=float(np.mean(frag)) if frag else 0.0,
            jobs_completed=len(self.completed_runs),
            jobs_unfinished=self.unfinished,
            gpu_hours_completed=self.useful_gpu_s / 3600,
            jobs_per_day=len(self.completed_runs) / days if days else 0.0,
            gpu_hours_per_day=self.useful_gpu_s / 3600 / days if days else 0.0,
            failures=self.failures,
            spot_reclaims=self.spot_reclaims,
            relayout_proposals=self.relayouts,
            relayouts_applied=self.relayouts_applied,
            duration_s=span,
            makespan_s=(
                max(r.end_s for r in self.job_records) - self.start_s if self.job_records else None
            ),
            slowdown=percentiles(
                [r.slowdown for r in self.job_records if r.kind in HEADLINE_KINDS]
            ),
            gpu_allocation_while_arriving=self._while_arriving(),
            per_team=self._grouped([j.team for j, _, _ in runs], wait_arr, jct_arr, team_used),
            per_kind=self._grouped(kinds, wait_arr, jct_arr, None),
            per_size=self._by_size(),
            jct_jobs=int(np.count_nonzero(headline)),
            inference_wait_s=percentiles(wait_arr[replicas]),
            **self._in_window(),
            samples=tuple(self.samples),
            waits=tuple(waits.tolist()),
            jcts=tuple(jcts.tolist()),
            jobs=tuple(self.job_records),
        )

    def _while_arriving(self) -> float | None:
        """The allocation from the first arrival to the last, or to the end of the run when
        that comes first: a horizon that ends the run while jobs still arrive leaves the
        last arrival unseen, and the whole run was then "while arriving" (it read None)."""
        area = self.area_at_last_arrival
        to_s = self.last_arrival_s
        if area is None:  # the run ended before the last arrival
            area, to_s = self.alloc.area, self.end_s
        window = to_s - self.start_s
        if window <= 0 or not self.capacity_gpus:
            return None
        return area / (self.capacity_gpus * window)

    def _in_window(self) -> dict[str, float | None]:
        """The allocation over the user's window, clipped to the run (it ends at `end_s`)."""
        w = self.window
        if w is None:
            return {}
        w.move(self.end_s, 0.0)  # the last level up to the end of the run
        lo, hi = max(w.from_s, self.start_s), min(w.to_s, self.end_s)
        ratio = (
            w.area / (self.capacity_gpus * (hi - lo)) if hi > lo and self.capacity_gpus else None
        )
        return {
            "gpu_allocation_in_window": ratio,
            "window_from_s": lo - self.start_s,
            "window_to_s": max(lo, hi) - self.start_s,
        }

    def _by_size(self) -> dict[str, dict[str, Any]]:
        """Completed jobs by size: papers break results down this way (small jobs wait
        behind large ones under FIFO, large ones starve under packing policies); the jobs
        the headline covers (`HEADLINE_KINDS`), not inference replicas, whose completion
        time is their window."""
        groups: dict[str, list[JobRecord]] = {}
        for r in self.job_records:
            if r.kind in HEADLINE_KINDS:  # the jobs the headline covers, as papers break it
                groups.setdefault(size_bucket(r.requested_gpus), []).append(r)
        return {
            name: {
                "jobs_completed": len(rs),
                "wait_s": percentiles([r.wait_s for r in rs]),
                "jct_s": percentiles([r.jct_s for r in rs]),
                "slowdown": percentiles([r.slowdown for r in rs]),
            }
            for name, rs in sorted(groups.items(), key=lambda kv: SIZE_ORDER.index(kv[0]))
        }

    def _grouped(
        self,
        labels: list[str],
        waits: FloatArray,
        jcts: FloatArray,
        used: Mapping[str, float] | None,
    ) -> dict[str, dict[str, Any]]:
        """Per label (a completed job's team or kind): jobs, wait and JCT percentiles; and,
        with `used`, GPU-hours and the entitled share of every team of the workload (those
        that ran but completed none, and those that never ran, included: a starved team is
        the row a reader looks for, and Jain's index counts it). `labels[i]` belongs to
        `waits[i]` and `jcts[i]`."""
        names = sorted(
            set(labels) | set(used or {}) | (set(self.entitled) if used is not None else set())
        )
        code = {name: i for i, name in enumerate(names)}
        codes = np.fromiter((code[x] for x in labels), dtype=np.intp, count=len(labels))
        out: dict[str, dict[str, Any]] = {}
        for i, name in enumerate(names):
            mine = codes == i
            entry: dict[str, Any] = {
                "jobs_completed": int(np.count_nonzero(mine)),
                "wait_s": percentiles(waits[mine]),
                "jct_s": percentiles(jcts[mine]),
            }
            if used is not None:
                entry["gpu_hours"] = used.get(name, 0.0) / 3600
                entry["entitled_share"] = self.entitled.get(name)
            out[name] = entry
        return out
