"""One simulation of a multi-team plan: a variant at a size and a seed, reduced to what the
targets, quotas and charts read.

The run is the simulator's own engine (`sim.engine.Simulation`, which calls the same
`decide()` as the scheduler and the control plane's queue ETAs), on the cluster, teams and
workload `plan.fleet_setup` builds, set up per profile as the simulator's experiments do
(`sim.experiments.profile_setup`: a whole-GPU-only profile such as `k8s-default` runs
without MIG and with open quotas). The engine keeps every change of a team's held GPUs
(`Simulation(keep_changes=True)`), so usage over time can be read per team; the
conservation checks (`sim.conservation`, on in the tests and with GPUFLEET_DEBUG_CHECKS)
hold that log to the engine's own integrals and to each job's GPU-seconds.

What is measured, over jobs arriving in [warmup, horizon):

- **wait** of a training or batch job: first start − submission; a job that never started
  by the end of the run (horizon + drain) counts with the time it had waited by then,
  so an overloaded cluster cannot look good by leaving its worst waits out;
- **long runs**: each team's jobs in the top decile of requested GPU-hours (at least
  one), whose waits are pooled over seeds for the starvation check;
- **SLO attainment** of a team's services: time its replicas ran inside their windows ÷
  the time wanted (over the whole horizon);
- **GPUs held** per team and in all, time-weighted over [warmup, horizon]: mean and
  quantiles (quotas, utilisation), and the number of running jobs from the engine's
  samples (concurrent-job capacity).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from gpufleet.plan.fleet_setup import Variant, build_cluster, build_teams, draw_workload
from gpufleet.sim.engine import SimConfig, Simulation
from gpufleet.sim.experiments import profile_setup
from gpufleet.sim.ledger import HeldChange
from gpufleet.sim.workload import TraceJob, Workload

if TYPE_CHECKING:
    from gpufleet.sim.result import SimResult

FloatArray = NDArray[np.float64]
LONG_RUN_QUANTILE = 0.9
INFERENCE = "inference"


@dataclass(frozen=True)
class TeamSeed:
    """One team in one run."""

    jobs: int  # training/batch jobs measured
    unstarted: int  # of those, never started by the end of the run
    wait_p50_s: float | None
    wait_p95_s: float | None
    long_waits_s: tuple[float, ...]
    inference_wanted_s: float
    inference_served_s: float
    held_mean: float  # GPUs, time-weighted over [warmup, horizon]
    held_p99: float
    held_max: float
    inference_held_mean: float
    median_job_gpus: float | None  # size of its median training/batch job

    @property
    def slo_attainment(self) -> float | None:
        if self.inference_wanted_s <= 0:
            return None
        return self.inference_served_s / self.inference_wanted_s


@dataclass(frozen=True)
class SeedResult:
    """One run, reduced. `wall_s`/`cpu_s` are for benchmarks and never reach a report."""

    nodes: int
    gpus: int
    seed: int
    teams: Mapping[str, TeamSeed]
    allocation: float  # mean GPUs held ÷ cluster GPUs over [warmup, horizon]
    running_mean: float
    running_p95: float
    running_max: float
    preemptions: int
    lost_gpu_hours: float
    jobs: int
    wall_s: float = 0.0
    cpu_s: float = 0.0


@dataclass(frozen=True)
class VariantRun:
    """One simulation of a variant, before it is reduced: the jobs it replayed (as the
    profile runs them), the engine's result with its change log, and the time each
    service's replicas served inside their windows."""

    workload: Workload
    result: SimResult
    served_s: Mapping[str, float]  # inference job -> seconds served
    gpus: int


def _usage_key(team: str, kind: str) -> str:
    return f"{team}\x00{INFERENCE}" if kind == INFERENCE else team


def simulate_variant(variant: Variant, nodes: int, seed: int) -> VariantRun:
    """Simulate `variant` on `nodes` nodes with `seed`, keeping the change log."""

    cluster = build_cluster(variant, nodes)
    workload = draw_workload(variant, seed)
    setup = profile_setup(variant.profile, cluster, build_teams(variant, cluster), workload)
    config = SimConfig(profile=variant.profile, seed=seed, horizon_s=variant.end_s)
    sim = Simulation(setup.cluster, setup.teams, setup.workload, config, keep_changes=True)
    result = sim.run()
    served = {
        j.name: sim.runs[j.name].served_s
        for j in setup.workload.jobs
        if j.kind == INFERENCE and j.name in sim.runs
    }
    return VariantRun(setup.workload, result, served, setup.cluster.gpu_count)


def run_seed(variant: Variant, nodes: int, seed: int) -> SeedResult:
    """Simulate `variant` on `nodes` nodes with `seed` and reduce the run."""
    t0, c0 = time.perf_counter(), time.process_time()
    run = simulate_variant(variant, nodes, seed)
    result = run.result
    assert result.ledger is not None
    assert result.ledger.changes is not None
    starts = result.first_start_s
    lo, hi, end = variant.warmup_s, variant.horizon_s, variant.end_s
    waits: dict[str, list[float]] = {}
    sizes: dict[str, list[float]] = {}
    unstarted: dict[str, int] = {}
    wanted: dict[str, float] = {}
    served: dict[str, float] = {}
    for job in run.workload.jobs:
        if job.kind == INFERENCE:
            wanted[job.team] = wanted.get(job.team, 0.0) + job.duration_s
            served[job.team] = served.get(job.team, 0.0) + run.served_s.get(job.name, 0.0)
            continue
        if not lo <= job.submit_s < hi:
            continue
        start = starts.get(job.name)
        if start is None:
            unstarted[job.team] = unstarted.get(job.team, 0) + 1
        waits.setdefault(job.team, []).append((end if start is None else start) - job.submit_s)
        sizes.setdefault(job.team, []).append(job.total_gpus * job.duration_s)
    levels = _levels(result.ledger.changes, lo, hi)
    capacity = float(run.gpus)
    total = levels.get("", _Level.zero())
    teams: dict[str, TeamSeed] = {}
    for name, _, _ in variant.teams:
        w = waits.get(name, [])
        held = levels.get(name, _Level.zero())
        inf = levels.get(_usage_key(name, INFERENCE), _Level.zero())
        gpu_s = sizes.get(name, [])
        teams[name] = TeamSeed(
            jobs=len(w),
            unstarted=unstarted.get(name, 0),
            wait_p50_s=float(np.percentile(w, 50)) if w else None,
            wait_p95_s=float(np.percentile(w, 95)) if w else None,
            long_waits_s=_long_waits(w, gpu_s),
            inference_wanted_s=wanted.get(name, 0.0),
            inference_served_s=served.get(name, 0.0),
            held_mean=held.mean + inf.mean,
            held_p99=_combined_quantile(levels, name, 0.99),
            held_max=_combined_quantile(levels, name, 1.0),
            inference_held_mean=inf.mean,
            median_job_gpus=_median_job(run.workload.jobs, name, lo, hi),
        )
    metrics = result.metrics
    running = [float(s.running) for s in metrics.samples if lo <= s.t_s <= hi] or [0.0]
    return SeedResult(
        nodes=nodes,
        gpus=int(capacity),
        seed=seed,
        teams=teams,
        allocation=total.mean / capacity if capacity else 0.0,
        running_mean=float(np.mean(running)),
        running_p95=float(np.percentile(running, 95)),
        running_max=float(np.max(running)),
        preemptions=metrics.preemptions,
        lost_gpu_hours=metrics.lost_gpu_hours,
        jobs=len(run.workload.jobs),
        wall_s=time.perf_counter() - t0,
        cpu_s=time.process_time() - c0,
    )


def _long_waits(waits: Sequence[float], gpu_s: Sequence[float]) -> tuple[float, ...]:
    """Waits of the jobs in the top decile of requested GPU-seconds (at least one job)."""
    if not waits:
        return ()
    threshold = float(np.quantile(np.asarray(gpu_s), LONG_RUN_QUANTILE))
    return tuple(w for w, g in zip(waits, gpu_s, strict=True) if g >= threshold)


def _median_job(jobs: Sequence[object], team: str, lo: float, hi: float) -> float | None:

    sizes = [
        j.total_gpus
        for j in jobs
        if isinstance(j, TraceJob)
        and j.team == team
        and j.kind != INFERENCE
        and lo <= j.submit_s < hi
    ]
    return float(np.median(sizes)) if sizes else None


@dataclass(frozen=True)
class _Level:
    """A piecewise-constant level over a window: change times and the level after each."""

    times: FloatArray
    values: FloatArray
    lo: float
    hi: float

    @staticmethod
    def zero() -> _Level:
        return _Level(np.zeros(1), np.zeros(1), 0.0, 1.0)

    @property
    def weights(self) -> FloatArray:
        ends = np.append(self.times[1:], self.hi)
        w: FloatArray = np.clip(ends, self.lo, self.hi) - np.clip(self.times, self.lo, self.hi)
        return w

    @property
    def mean(self) -> float:
        w = self.weights
        span = float(w.sum())
        return float((self.values * w).sum() / span) if span > 0 else 0.0


def _levels(changes: Sequence[HeldChange], lo: float, hi: float) -> dict[str, _Level]:
    """Each team's level over time (its services apart, under `_usage_key`; "" for the
    total), as step functions. Levels are clipped at 0 only against float rounding: the
    conservation checks hold the log itself to the engine's integrals."""
    by_key: dict[str, list[tuple[float, float]]] = {}
    for t, team, kind, delta in changes:
        by_key.setdefault(_usage_key(team, kind), []).append((t, delta))
        by_key.setdefault("", []).append((t, delta))
    out: dict[str, _Level] = {}
    for key, rows in by_key.items():
        times = np.array([t for t, _ in rows])
        cum = np.cumsum([d for _, d in rows])
        before = times <= lo  # the level at `lo` is what the changes before it left
        start = float(cum[before][-1]) if before.any() else 0.0
        keep = times > lo
        out[key] = _Level(
            np.concatenate([[lo], times[keep]]),
            np.maximum(np.concatenate([[start], cum[keep]]), 0.0),
            lo,
            hi,
        )
    return out


def _combined_quantile(levels: Mapping[str, _Level], team: str, q: float) -> float:
    """Time-weighted quantile of a team's GPUs held (training and inference together)."""
    parts = [levels[k] for k in (team, _usage_key(team, INFERENCE)) if k in levels]
    if not parts:
        return 0.0
    times = np.unique(np.concatenate([p.times for p in parts]))
    lo, hi = parts[0].lo, parts[0].hi
    values = np.zeros_like(times)
    for p in parts:
        idx = np.searchsorted(p.times, times, side="right") - 1
        values += np.where(idx >= 0, p.values[np.clip(idx, 0, None)], 0.0)
    level = _Level(times, values, lo, hi)
    w = level.weights
    if q >= 1.0:
        return float(values[w > 0].max()) if (w > 0).any() else 0.0
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(w[order])
    total = cum[-1]
    if total <= 0:
        return 0.0
    i = int(np.searchsorted(cum, q * total, side="left"))
    return float(values[order][min(i, len(order) - 1)])
