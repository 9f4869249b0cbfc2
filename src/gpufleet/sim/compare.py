"""Profiles compared over seeds: the run matrix and its summary (means, confidence intervals).

One simulation is one draw: a generator workload, failures and spot reclaims all depend
on the seed, so a difference between two profiles on one seed may be luck. `compare`
runs every profile on the same seeds (the same workloads and failure draws for each
profile: common random numbers, so differences between profiles are not drowned by
differences between seeds) and `summarize` reports, per profile and metric, the mean over
seeds with a Student-t confidence interval (the seeds are few and their spread unknown,
so not a normal one). One seed has no interval (None), not a zero-width one.

`summarize` is pure: the same runs give the same dict, which is what `compare.json`
holds and what `report.comparison` renders, so the documents can be rebuilt from the JSON alone.
It holds no wall-clock times, so it is byte-identical run to run.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from gpufleet import __version__
from gpufleet.cluster import Cluster
from gpufleet.sim.engine import SimConfig, simulate
from gpufleet.sim.metrics import HEADLINE_JOBS, SimMetrics
from gpufleet.sim.workload import Workload
from gpufleet.specs.teams import TeamsSpec

CONFIDENCE: Final = 0.95
MAX_SERIES_POINTS: Final = 400  # allocation plot: enough for a page-wide line
CDF_POINTS: Final = 101  # quantiles 0, 1, ..., 100 %
# metrics that are {mean, p50, p95, p99}: flattened as wait_s.p50 (`inference_wait_s` only
# where inference replicas completed: the headline wait leaves them out)
GROUPED: Final = ("wait_s", "jct_s", "slowdown", "inference_wait_s")


@dataclass(frozen=True)
class Run:
    """One cell of the matrix: a profile on a seed."""

    profile: str
    seed: int
    metrics: SimMetrics


@dataclass(frozen=True)
class Estimate:
    """The mean over seeds and its confidence interval (None with fewer than two values)."""

    mean: float | None
    low: float | None
    high: float | None
    n: int

    @property
    def half_width(self) -> float | None:
        if self.low is None or self.high is None:
            return None
        return (self.high - self.low) / 2


@functools.lru_cache(maxsize=64)
def _t_quantile(p: float, dof: int) -> float:
    """Student-t quantile. From `scipy.special` (0.6 s to import) rather than `scipy.stats`
    (2 s more, measured on the project VM): the plan calls this from its main process."""
    from scipy.special import stdtrit

    return float(stdtrit(dof, p))


def mean_ci(values: Sequence[float | None], confidence: float = CONFIDENCE) -> Estimate:
    """Mean and two-sided Student-t interval of the values that are not None.

    mean ± t(1 − (1 − confidence)/2, n − 1) · s/√n with s the sample standard deviation
    (ddof 1). A metric can be None on a seed (no inference jobs: no SLO attainment); it is
    left out, and `n` says how many values count.
    """
    xs = [float(v) for v in values if v is not None]
    n = len(xs)
    if n == 0:
        return Estimate(None, None, None, 0)
    mean = math.fsum(xs) / n
    if n == 1:
        return Estimate(mean, None, None, 1)
    sd = float(np.std(xs, ddof=1))
    half = _t_quantile(1 - (1 - confidence) / 2, n - 1) * sd / math.sqrt(n)
    return Estimate(mean, mean - half, mean + half, n)


def scalars(metrics: SimMetrics) -> dict[str, float | None]:
    """The metrics that are one number per run, by stable JSON name.

    Read from `to_json()` so that a field the metrics module adds is compared too: every
    top-level number (or None), and the percentiles of the `GROUPED` fields as
    `wait_s.p50` and so on. Per-team and per-kind breakdowns are left out.
    """
    out: dict[str, float | None] = {}
    for key, value in metrics.to_json().items():
        if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
            out[key] = None if value is None else float(value)
        elif key in GROUPED and isinstance(value, Mapping):
            for sub, v in value.items():
                out[f"{key}.{sub}"] = None if v is None else float(v)
    return out


def team_shares(metrics: SimMetrics) -> dict[str, float]:
    """Each team's share of the GPU-hours held (0 to 1); {} when nothing was held."""
    hours = {t: float(v.get("gpu_hours") or 0.0) for t, v in metrics.per_team.items()}
    total = math.fsum(hours.values())
    return {t: h / total for t, h in sorted(hours.items())} if total > 0 else {}


def run_matrix(
    cluster: Cluster,
    teams_for: Callable[[Workload], TeamsSpec],
    workload_for: Callable[[int], Workload],
    *,
    profiles: Sequence[str],
    seeds: Sequence[int],
    config: SimConfig,
    on_run: Callable[[str, int], None] | None = None,
    horizon_after_first_s: float | None = None,
) -> tuple[Run, ...]:
    """Every profile on every seed: `config` with its profile and seed replaced.

    Seed-major, so each seed's workload is drawn once and shared by all profiles. `on_run`
    is called after each run (profile, seed), for a progress bar. `horizon_after_first_s`
    (`gpufleet simulate compare --horizon`): each run stops that long after its workload's
    first arrival (`horizon_end_s`), which differs from seed to seed for a generator, in
    place of `config.horizon_s`.
    """
    from dataclasses import replace

    runs: list[Run] = []
    for seed in seeds:
        workload = workload_for(seed)
        teams = teams_for(workload)
        seeded = replace(config, seed=seed)
        if horizon_after_first_s is not None:
            seeded = replace(seeded, horizon_s=horizon_end_s(workload, horizon_after_first_s))
        for profile in profiles:
            result = simulate(cluster, teams, workload, replace(seeded, profile=profile))
            runs.append(Run(profile, seed, result.metrics))
            if on_run is not None:
                on_run(profile, seed)
    order = {p: i for i, p in enumerate(profiles)}
    return tuple(sorted(runs, key=lambda r: (order[r.profile], r.seed)))


def horizon_end_s(workload: Workload, after_first_s: float) -> float:
    """The engine's horizon (a time on the workload's clock) that ends a run `after_first_s`
    after the workload's first arrival, where every time the metrics report counts from
    (`duration_s`, `makespan_s`, `--window`): a native trace need not start at 0, and a
    horizon on its own clock could end before anything arrived."""
    first = workload.jobs[0].submit_s if workload.jobs else 0.0
    return first + after_first_s


def _estimate_json(values: Sequence[float | None], confidence: float) -> dict[str, Any]:
    est = mean_ci(values, confidence)
    return {
        "mean": est.mean,
        "ci_low": est.low,
        "ci_high": est.high,
        "n": est.n,
        "values": list(values),
    }


def _downsample(points: Sequence[tuple[float, float]], limit: int) -> list[list[float]]:
    """At most `limit` points, evenly strided, keeping the last (the plot ends where the run
    did)."""
    if len(points) <= limit:
        return [[t, v] for t, v in points]
    step = math.ceil(len(points) / limit)
    kept = list(points[::step])
    if kept[-1] != points[-1]:
        kept.append(points[-1])
    return [[t, v] for t, v in kept]


def cdf_points(values: Sequence[float], points: int = CDF_POINTS) -> list[list[float]]:
    """The empirical distribution as (value, fraction ≤ value) at evenly spaced quantiles."""
    if not values:
        return []
    qs = np.linspace(0.0, 1.0, points)
    xs = np.quantile(np.asarray(values, dtype=float), qs)
    return [[float(x), float(q)] for x, q in zip(xs, qs, strict=True)]


def summarize(
    runs: Sequence[Run],
    *,
    context: Mapping[str, Any] | None = None,
    confidence: float = CONFIDENCE,
) -> dict[str, Any]:
    """The comparison as plain data (compare.json): per profile and metric the mean, the
    interval and the per-seed values; team shares; and the plot series.

    Plot series: allocation over time from each profile's first seed (seeds differ in
    their workload, so averaging curves would blur what happened); wait and JCT CDFs
    pooled over all seeds (more jobs, steadier tails), over the jobs the headline wait and
    JCT cover (`headline_jobs`, which the reports print). `context` (cluster, workload,
    options) is copied in as given.
    """
    profiles = list(dict.fromkeys(r.profile for r in runs))
    seeds = sorted({r.seed for r in runs})
    by_profile = {p: [r for r in runs if r.profile == p] for p in profiles}
    metrics: dict[str, dict[str, Any]] = {}
    shares: dict[str, dict[str, Any]] = {}
    allocation: dict[str, list[list[float]]] = {}
    wait_cdf: dict[str, list[list[float]]] = {}
    jct_cdf: dict[str, list[list[float]]] = {}
    for p, rs in by_profile.items():
        rows = [scalars(r.metrics) for r in rs]
        names = list(dict.fromkeys(k for row in rows for k in row))
        metrics[p] = {k: _estimate_json([row.get(k) for row in rows], confidence) for k in names}
        per_seed = [team_shares(r.metrics) for r in rs]
        teams = sorted({t for s in per_seed for t in s})
        shares[p] = {
            t: _estimate_json([s.get(t, 0.0) for s in per_seed], confidence) for t in teams
        }
        first = rs[0].metrics
        allocation[p] = _downsample(
            [(s.t_s, s.allocated_ratio) for s in first.samples], MAX_SERIES_POINTS
        )
        wait_cdf[p] = cdf_points([w for r in rs for w in r.metrics.waits])
        jct_cdf[p] = cdf_points([c for r in rs for c in r.metrics.jcts])
    return {
        "generated_by": f"gpufleet {__version__}",
        **dict(context or {}),
        "profiles": profiles,
        "seeds": seeds,
        "confidence": confidence,
        "headline_jobs": HEADLINE_JOBS,
        "metrics": metrics,
        "team_shares": shares,
        "plots": {
            "allocation_first_seed": allocation,
            "wait_cdf_s": wait_cdf,
            "jct_cdf_s": jct_cdf,
        },
    }
