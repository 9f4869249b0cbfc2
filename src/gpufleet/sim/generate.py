"""Draw a synthetic `Workload` from a `kind: workload` spec, deterministically.

The model, kept simple so results can be explained:

- **Arrivals** of training, batch and interactive jobs are a Poisson process at
  `arrivals_per_day`: the count over the horizon is Poisson(rate × horizon) and the
  times are uniform in [0, horizon), which is the same process as exponential
  inter-arrival times of mean 1/rate. With `diurnal`, the rate follows the daily load
  curve with the same daily mean (drawn by thinning a process at the peak rate).
- **Sizes** of gangs are a weighted choice of total GPUs, split into workers of
  `gpus_per_worker` (a job smaller than one worker is one worker of its size).
- **Durations** are fixed, lognormal (median, sigma) or exponential (mean), then kept
  within [min, max].
- **Inference** replicas: without `diurnal`, `services` replicas arrive at 0 and run
  for `duration` (default: the horizon). With it, ceil(services × trough_ratio) base
  replicas do, and at the start of each hour h extra replicas arrive for one hour, as
  many as round(services × load(h)) − base (never fewer than 0).

Determinism: everything is drawn from the `numpy.random.Generator` passed in, one
child stream per workload entry (`Generator.spawn`), so the same seed gives the same
jobs, and adding an entry at the end leaves the earlier entries' jobs unchanged. No
global state, no `random` module.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from gpufleet.sim.workload import CleaningReport, TraceJob, Workload
from gpufleet.specs.jobs import JobKind
from gpufleet.specs.workload import (
    Diurnal,
    DurationDist,
    InferenceEntry,
    InteractiveEntry,
    TeamWorkloads,
    TrainingEntry,
    WorkloadEntry,
    WorkloadSpec,
)

DAY_S = 86_400.0
HOUR_S = 3_600.0

FloatArray = NDArray[np.float64]


def generate(spec: WorkloadSpec, rng: np.random.Generator) -> Workload:
    """Every job the spec describes over its horizon, drawn from `rng`."""
    entries = [(team, entry) for team in spec.teams for entry in team.workloads]
    streams = rng.spawn(len(entries))
    names = _Names()
    jobs: list[TraceJob] = []
    for (team, entry), stream in zip(entries, streams, strict=True):
        jobs.extend(_entry_jobs(spec.horizon, team, entry, stream, names))
    return Workload(
        jobs=tuple(jobs),
        report=CleaningReport(source="generator", rows=len(jobs), kept=len(jobs)),
    )


def diurnal_load(diurnal: Diurnal, hours: FloatArray) -> FloatArray:
    """Load at hour-of-day `hours` (any real hours; 24-periodic): 1 at the peak hour,
    `trough_ratio` twelve hours away, a cosine in between."""
    trough = diurnal.trough_ratio
    phase = 2.0 * np.pi * (hours - diurnal.peak_hour) / 24.0
    load: FloatArray = trough + (1.0 - trough) * (0.5 + 0.5 * np.cos(phase))
    return load


def mean_load(diurnal: Diurnal) -> float:
    """The load curve's mean over a day: the cosine averages to 0."""
    return diurnal.trough_ratio + (1.0 - diurnal.trough_ratio) * 0.5


def arrival_times(
    per_day: float, horizon_s: float, diurnal: Diurnal | None, rng: np.random.Generator
) -> FloatArray:
    """Sorted Poisson arrival times in [0, horizon_s) with mean `per_day` a day."""
    if per_day <= 0:
        return np.empty(0)
    peak = per_day if diurnal is None else per_day / mean_load(diurnal)
    count = int(rng.poisson(peak * horizon_s / DAY_S))
    times = np.sort(rng.uniform(0.0, horizon_s, size=count))
    if diurnal is None:
        return times
    # Thinning: keep an arrival at t with probability load(t) ≤ 1, so the rate is
    # peak × load(t), whose daily mean is per_day.
    keep = rng.random(count) < diurnal_load(diurnal, times / HOUR_S)
    kept: FloatArray = times[keep]
    return kept


def durations(dist: DurationDist, count: int, rng: np.random.Generator) -> FloatArray:
    """`count` run times in seconds drawn from `dist`, kept within [min, max]."""
    if dist.fixed is not None:
        drawn = np.full(count, dist.fixed)
    elif dist.lognormal_median is not None:
        drawn = rng.lognormal(math.log(dist.lognormal_median), dist.lognormal_sigma, count)
    else:
        assert dist.exponential_mean is not None  # the spec guarantees one form
        drawn = rng.exponential(dist.exponential_mean, count)
    upper = np.inf if dist.max is None else dist.max
    clipped: FloatArray = np.clip(drawn, dist.min, upper)
    return clipped


def inference_replicas(entry: InferenceEntry, horizon_s: float) -> tuple[int, list[int]]:
    """Base replicas for the whole run and the extra replicas arriving at each hour."""
    if entry.diurnal is None:
        return entry.services, []
    # round(): 10 × 0.3 is 3.0000000000000004 in floating point, not 4 replicas.
    base = math.ceil(round(entry.services * entry.diurnal.trough_ratio, 9))
    hours = np.arange(math.ceil(horizon_s / HOUR_S), dtype=np.float64)
    wanted = np.floor(entry.services * diurnal_load(entry.diurnal, hours % 24.0) + 0.5)
    extra = np.maximum(wanted.astype(np.int64) - base, 0)
    return base, [int(n) for n in extra]


@dataclass
class _Names:
    """`<team>-<label>-<n>`, numbered per prefix: unique because n has no hyphen."""

    used: dict[str, int] = field(default_factory=dict)

    def next(self, prefix: str) -> str:
        n = self.used.get(prefix, 0) + 1
        self.used[prefix] = n
        return f"{prefix}-{n}"


@dataclass(frozen=True)
class _Common:
    """Fields every job of one entry shares."""

    team: str
    kind: JobKind
    prefix: str
    priority_class: str | None
    preemptible: bool
    accelerators: tuple[str, ...]
    project: str | None
    estimate_factor: float | None
    busy_fraction: float | None


def _common(team: TeamWorkloads, entry: WorkloadEntry) -> _Common:
    preemptible = entry.preemptible
    if preemptible is None:
        preemptible = entry.kind in ("training", "batch")
    return _Common(
        team=team.name,
        kind=entry.kind,
        prefix=f"{team.name}-{entry.name or entry.kind}",
        priority_class=entry.priority_class or team.priority_class,
        preemptible=preemptible,
        accelerators=tuple(entry.accelerators),
        project=entry.project,
        estimate_factor=entry.runtime_estimate.factor if entry.runtime_estimate else None,
        busy_fraction=entry.busy_fraction,
    )


def _entry_jobs(
    horizon_s: float,
    team: TeamWorkloads,
    entry: WorkloadEntry,
    rng: np.random.Generator,
    names: _Names,
) -> Iterator[TraceJob]:
    common = _common(team, entry)
    if isinstance(entry, TrainingEntry):
        yield from _training(horizon_s, common, entry, rng, names)
    elif isinstance(entry, InferenceEntry):
        yield from _inference(horizon_s, common, entry, rng, names)
    else:
        yield from _interactive(horizon_s, common, entry, rng, names)


def _job(
    common: _Common,
    names: _Names,
    submit_s: float,
    duration_s: float,
    request: _Request,
    *,
    workers: int = 1,
    checkpoint_interval_s: float | None = None,
    slo_ttft_ms: float | None = None,
) -> TraceJob:
    estimate = None if common.estimate_factor is None else common.estimate_factor * duration_s
    return TraceJob(
        name=names.next(common.prefix),
        team=common.team,
        submit_s=submit_s,
        duration_s=duration_s,
        gpus=request.gpus,
        workers=workers,
        gpu_fraction=request.gpu_fraction,
        mig_profile=request.mig_profile,
        accelerators=common.accelerators,
        kind=common.kind,
        priority_class=common.priority_class,
        project=common.project,
        runtime_estimate_s=estimate,
        checkpoint_interval_s=checkpoint_interval_s,
        preemptible=common.preemptible,
        busy_fraction=common.busy_fraction,
        slo_ttft_ms=slo_ttft_ms,
    )


def _training(
    horizon_s: float,
    common: _Common,
    entry: TrainingEntry,
    rng: np.random.Generator,
    names: _Names,
) -> Iterator[TraceJob]:
    times = arrival_times(entry.arrivals_per_day, horizon_s, entry.diurnal, rng)
    sizes = rng.choice(np.asarray(entry.gpus.choices), size=len(times), p=entry.gpus.probabilities)
    runs = durations(entry.duration, len(times), rng)
    per_worker = entry.gpus_per_worker
    for t, size, run in zip(times, sizes, runs, strict=True):
        total = int(size)
        gpus, workers = (per_worker, total // per_worker) if total >= per_worker else (total, 1)
        yield _job(
            common,
            names,
            float(t),
            float(run),
            _Request(gpus=gpus),
            workers=workers,
            checkpoint_interval_s=entry.checkpoint_interval,
        )


@dataclass(frozen=True)
class _Request:
    """What each job asks for: exactly one of whole GPUs per worker, a fraction, a slice."""

    gpus: int | None = None
    gpu_fraction: float | None = None
    mig_profile: str | None = None


def _slice(entry: InferenceEntry | InteractiveEntry) -> _Request:
    """The request every job of a slice entry carries (the spec checked one form is set)."""
    profile = entry.mig_profile.strip().lower() if entry.mig_profile else None
    return _Request(gpus=entry.gpus, gpu_fraction=entry.gpu_fraction, mig_profile=profile)


def _inference(
    horizon_s: float,
    common: _Common,
    entry: InferenceEntry,
    rng: np.random.Generator,
    names: _Names,
) -> Iterator[TraceJob]:
    base, extra = inference_replicas(entry, horizon_s)
    if entry.duration is None:
        runs = np.full(base, horizon_s)
    else:
        runs = durations(entry.duration, base, rng)
    slo = entry.slo.ttft_p99_ms if entry.slo else None
    request = _slice(entry)
    for run in runs:
        yield _job(common, names, 0.0, float(run), request, slo_ttft_ms=slo)
    for hour, count in enumerate(extra):
        for _ in range(count):
            yield _job(common, names, hour * HOUR_S, HOUR_S, request, slo_ttft_ms=slo)


def _interactive(
    horizon_s: float,
    common: _Common,
    entry: InteractiveEntry,
    rng: np.random.Generator,
    names: _Names,
) -> Iterator[TraceJob]:
    times = arrival_times(entry.arrivals_per_day, horizon_s, entry.diurnal, rng)
    runs = durations(entry.duration, len(times), rng)
    request = _slice(entry)
    for t, run in zip(times, runs, strict=True):
        yield _job(common, names, float(t), float(run), request)
