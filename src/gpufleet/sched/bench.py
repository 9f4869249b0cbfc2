"""`gpufleet bench scheduler`: decisions per second of one `decide()` cycle at scale.

A synthetic H100 cluster (32 nodes per leaf, 16 leaves per block) and pending jobs
drawn from a fixed mix (1, 2, 4 and 8-GPU jobs and 2-8 × 8-GPU gangs, some with a
required leaf; runtime estimates lognormal around 4 h), across 8 teams with open
quotas. Two starting states:

- `empty` — the cycle starts on an idle cluster (admission-heavy);
- `busy` (default) — a first cycle over other jobs of the same mix fills the cluster
  and is applied, then every tenth of those jobs finishes; the timed cycle runs ten
  minutes later with the rest running (with start times and estimates, so
  preemption and the backfill reservation search have real work): the common case
  of a loaded cluster where some GPUs free up each cycle.

Decisions per second = pending jobs decided (admitted or given a reason) / cycle seconds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

import numpy as np

from gpufleet.cluster import State
from gpufleet.cluster.bench import ACCELERATOR, bench_cluster
from gpufleet.sched.apply import apply
from gpufleet.sched.decide import decide
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.teams import TeamsSpec

TEAMS = 8
MEDIAN_RUNTIME_S = 4 * 3600.0
StartState = Literal["empty", "busy"]


@dataclass(frozen=True)
class SchedulerBench:
    nodes: int
    pending: int
    running: int
    admitted: int
    cycle_s: float
    timings_s: dict[str, float]

    @property
    def decisions_per_s(self) -> float:
        return self.pending / self.cycle_s


def synthetic_jobs(count: int, seed: int = 0, prefix: str = "j") -> list[JobSpec]:
    rng = np.random.default_rng(seed)
    jobs: list[JobSpec] = []
    for i in range(count):
        draw = rng.random()
        spec: dict[str, object] = {
            "name": f"{prefix}{i}",
            "team": f"t{i % TEAMS}",
            "submitted_s": i * 1e-3,
            "runtime_estimate_s": float(rng.lognormal(np.log(MEDIAN_RUNTIME_S), 1.0)),
        }
        if draw < 0.85:
            spec["gpus"] = int(rng.choice([1, 2, 4, 8], p=[0.4, 0.2, 0.2, 0.2]))
        else:
            spec["gpus"] = 8
            spec["workers"] = int(rng.choice([2, 4, 8]))
            if rng.random() < 0.5:
                spec["topology"] = {"required": "leaf"}
        jobs.append(JobSpec.model_validate(spec))
    return jobs


def run_bench(
    nodes: int,
    pending: int,
    profile: str = "default",
    seed: int = 0,
    start: StartState = "busy",
) -> SchedulerBench:
    cluster = bench_cluster(nodes)
    total = nodes * 8
    teams = TeamsSpec.model_validate(
        {
            "kind": "teams",
            "teams": [{"name": f"t{i}", "quota": {ACCELERATOR: total}} for i in range(TEAMS)],
        }
    )
    state = State(cluster)
    running: list[JobSpec] = []
    now_s = 0.0
    if start == "busy":
        first = synthetic_jobs(max(1, nodes * 2), seed + 1, prefix="r")
        d = decide(cluster, state, [], first, teams, profile=profile)
        run, _ = apply(state, d, {}, {j.name: j for j in first}, 0.0)
        for name in list(run)[::10]:  # these finished
            state.release_job(name)
            del run[name]
        running = list(run.values())
        now_s = 600.0
    jobs = [j.model_copy(update={"submitted_s": now_s}) for j in synthetic_jobs(pending, seed)]
    started = time.perf_counter()
    result = decide(cluster, state, running, jobs, teams, profile=profile, now_s=now_s)
    cycle = time.perf_counter() - started
    return SchedulerBench(
        nodes, pending, len(running), len(result.admitted), cycle, dict(result.timings_s)
    )
