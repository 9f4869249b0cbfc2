"""`gpufleet bench scheduler`: decisions per second of one `decide()` cycle at scale.

A synthetic H100 cluster (32 nodes per leaf, 16 leaves per block) and a stream of
pending jobs drawn from a fixed mix (1, 2, 4 and 8-GPU jobs and 2-8 × 8-GPU gangs,
some with a required leaf), across 8 teams with open quotas. One cycle is run on
an empty cluster; decisions per second = pending jobs decided (admitted or given a
reason) / cycle seconds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from gpufleet.cluster import State
from gpufleet.cluster.bench import ACCELERATOR, bench_cluster
from gpufleet.sched.decide import decide
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.teams import TeamsSpec

TEAMS = 8


@dataclass(frozen=True)
class SchedulerBench:
    nodes: int
    pending: int
    admitted: int
    cycle_s: float
    timings_s: dict[str, float]

    @property
    def decisions_per_s(self) -> float:
        return self.pending / self.cycle_s


def synthetic_jobs(count: int, seed: int = 0) -> list[JobSpec]:
    rng = np.random.default_rng(seed)
    jobs: list[JobSpec] = []
    for i in range(count):
        draw = rng.random()
        spec: dict[str, object] = {"name": f"j{i}", "team": f"t{i % TEAMS}", "submitted_s": i}
        if draw < 0.85:
            spec["gpus"] = int(rng.choice([1, 2, 4, 8], p=[0.4, 0.2, 0.2, 0.2]))
        else:
            spec["gpus"] = 8
            spec["workers"] = int(rng.choice([2, 4, 8]))
            if rng.random() < 0.5:
                spec["topology"] = {"required": "leaf"}
        jobs.append(JobSpec.model_validate(spec))
    return jobs


def run_bench(nodes: int, pending: int, profile: str = "default", seed: int = 0) -> SchedulerBench:
    cluster = bench_cluster(nodes)
    total = nodes * 8
    teams = TeamsSpec.model_validate(
        {
            "kind": "teams",
            "teams": [{"name": f"t{i}", "quota": {ACCELERATOR: total}} for i in range(TEAMS)],
        }
    )
    jobs = synthetic_jobs(pending, seed)
    state = State(cluster)
    started = time.perf_counter()
    result = decide(cluster, state, [], jobs, teams, profile=profile)
    cycle = time.perf_counter() - started
    return SchedulerBench(nodes, pending, len(result.admitted), cycle, dict(result.timings_s))
