"""Simulator benchmarks: jobs simulated per second, and the openb replay.

`synthetic(nodes, jobs, profile, ...)` replays a synthetic stream on an H100 cluster
(the scheduler benchmark's layout, 8 GPUs per node): whole-GPU jobs of 1–8 GPUs and
2–4-node gangs (the issue's "FIFO and whole GPUs" case), lognormal durations around
1 h, Poisson arrivals at `load` × capacity, 4 teams with open quotas. Rate = jobs in the
workload ÷ wall seconds of `simulate()` (workload generation excluded).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from gpufleet.cluster.bench import ACCELERATOR, bench_cluster
from gpufleet.sim.engine import SimConfig, simulate
from gpufleet.sim.result import SimResult
from gpufleet.sim.setup import cluster_from_nodes, open_teams
from gpufleet.sim.traces import bundled_openb
from gpufleet.sim.workload import CleaningReport, TraceJob, Workload
from gpufleet.specs.teams import TeamsSpec

TEAMS = 4
SIZES = (1, 2, 4, 8, 16, 32)
WEIGHTS = (0.3, 0.2, 0.2, 0.15, 0.1, 0.05)
MEDIAN_S = 3600.0
SIGMA = 1.0


@dataclass(frozen=True)
class SimBench:
    nodes: int
    jobs: int
    profile: str
    wall_s: float
    result: SimResult

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.wall_s


def synthetic_workload(
    nodes: int,
    jobs: int,
    load: float,
    seed: int = 0,
    *,
    checkpoint_interval_s: float | None = None,
) -> Workload:
    """The synthetic mix (sizes up to 32-GPU gangs, lognormal durations, Poisson arrivals)
    offering `load` × the capacity of `nodes` 8-GPU nodes. `checkpoint_interval_s`: every
    job saves its work this often (None: none does, and LAS preemption evicts none)."""
    rng = np.random.default_rng(seed)
    mean_gpus = float(np.dot(SIZES, WEIGHTS))
    mean_s = MEDIAN_S * float(np.exp(SIGMA**2 / 2))
    rate_per_s = load * nodes * 8 / (mean_gpus * mean_s)
    gaps = rng.exponential(1 / rate_per_s, jobs)
    sizes = rng.choice(SIZES, jobs, p=WEIGHTS)
    durations = rng.lognormal(np.log(MEDIAN_S), SIGMA, jobs)
    t = np.cumsum(gaps)
    out = []
    for i in range(jobs):
        g = int(sizes[i])
        out.append(
            TraceJob(
                f"j{i}",
                f"t{i % TEAMS}",
                float(t[i]),
                float(durations[i]),
                gpus=min(g, 8),
                workers=max(1, g // 8),
                runtime_estimate_s=float(durations[i]) * 1.5,
                checkpoint_interval_s=checkpoint_interval_s,
            )
        )
    return Workload(tuple(out), CleaningReport("synthetic", jobs, jobs))


def openb_replay(profile: str = "default", seed: int = 0) -> SimBench:
    """The bundled openb trace replayed on its own 1,213-node cluster (one open-quota team)."""

    workload = bundled_openb()
    cluster = cluster_from_nodes(workload.nodes)
    teams = open_teams(cluster, workload)
    started = time.perf_counter()
    result = simulate(cluster, teams, workload, SimConfig(profile=profile, seed=seed))
    return SimBench(
        len(cluster.nodes), len(workload.jobs), profile, time.perf_counter() - started, result
    )


def synthetic(
    nodes: int,
    jobs: int,
    profile: str = "default",
    load: float = 0.7,
    seed: int = 0,
    *,
    checkpoint_interval_s: float | None = None,
) -> SimBench:
    cluster = bench_cluster(nodes)
    teams = TeamsSpec.model_validate(
        {
            "kind": "teams",
            "teams": [{"name": f"t{i}", "quota": {ACCELERATOR: nodes * 8}} for i in range(TEAMS)],
        }
    )
    workload = synthetic_workload(
        nodes, jobs, load, seed, checkpoint_interval_s=checkpoint_interval_s
    )
    started = time.perf_counter()
    result = simulate(cluster, teams, workload, SimConfig(profile=profile, seed=seed))
    return SimBench(nodes, jobs, profile, time.perf_counter() - started, result)


# -- a congested queue (issue 29) -------------------------------------------------------------
# The uncongested stream above never queues, so it measures nothing of a long queue's cost:
# every cycle of a congested run looks at every waiting job again. This stream is the same
# mix offered at the cluster's full capacity on a modest cluster, where the queue random-walks
# in the hundreds (a real congested month: the Philly week on 384 GPUs in issue 29).

CONGESTED_NODES = 32  # 256 H100s: about 43 jobs run at once, the rest wait
CONGESTED_LOAD = 1.0  # offered GPU-hours / capacity


@dataclass(frozen=True)
class QueueDepth:
    """How congested a run was, from its samples (every `sample_interval_s`)."""

    share_at_least_100: float  # share of samples with >= 100 jobs waiting
    mean: float
    most: int


def queue_depth(result: SimResult) -> QueueDepth:
    waiting = [s.pending for s in result.metrics.samples]
    if not waiting:
        return QueueDepth(0.0, 0.0, 0)
    return QueueDepth(
        sum(w >= 100 for w in waiting) / len(waiting), sum(waiting) / len(waiting), max(waiting)
    )


def congested(
    jobs: int,
    profile: str = "default",
    *,
    nodes: int = CONGESTED_NODES,
    load: float = CONGESTED_LOAD,
    seed: int = 0,
    checkpoint_interval_s: float | None = None,
) -> SimBench:
    """The synthetic mix at `load` on `nodes` 8-GPU nodes (`queue_depth` says how congested).
    Its jobs do not checkpoint unless `checkpoint_interval_s` says so: under `tiresias` the
    stream then gets the LAS order without preemption (`sched.las`)."""
    return synthetic(
        nodes, jobs, profile, load=load, seed=seed, checkpoint_interval_s=checkpoint_interval_s
    )
