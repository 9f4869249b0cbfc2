"""Issue 29's congested benchmarks: a long queue replayed under every profile, and the
control plane's queue ETA for 10,000 waiting jobs.

Both run the same loop: `decide()` cycle after cycle over a queue that mostly waits. The
uncongested `sim-synthetic-*` stream never queues, so it says nothing of that cost.
"""

from __future__ import annotations

import numpy as np

from gpufleet.cluster.bench import ACCELERATOR, bench_cluster
from gpufleet.control.eta import RunningJob, estimate_starts, queue_cycle_s
from gpufleet.sim.bench import SIZES, WEIGHTS, congested, queue_depth
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.teams import TeamsSpec

CONGESTED_JOBS = 100_000  # issue 29: >= 5,000 jobs/s per profile on one core
ETA_PENDING = 10_000  # issue 29: the queue ETA for 10,000 waiting jobs in <= 1 s
ETA_NODES = 1_000  # the reconciler benchmark's cluster (1,000 x 8 H100)
NOW = 1_700_000_000.0


def congested_s(
    profile: str, jobs: int = CONGESTED_JOBS, checkpoint_interval_s: float | None = None
) -> float:
    """Wall seconds of one congested replay; prints its rate and how congested it was."""
    bench = congested(jobs, profile, checkpoint_interval_s=checkpoint_interval_s)
    depth = queue_depth(bench.result)
    saves = (
        "" if checkpoint_interval_s is None else f" (checkpoints every {checkpoint_interval_s:g} s)"
    )
    print(
        f"  congested {profile}{saves}: {bench.jobs_per_s:,.0f} jobs/s, "
        f"{bench.result.cycles:,} cycles, {bench.result.metrics.preemptions:,} preemptions; "
        f">= 100 waiting in {depth.share_at_least_100:.0%} of samples, mean {depth.mean:.0f}, "
        f"most {depth.most}",
        flush=True,
    )
    return bench.wall_s


def eta_inputs(
    pending: int = ETA_PENDING, nodes: int = ETA_NODES, seed: int = 0
) -> tuple[list[RunningJob], list[JobSpec]]:
    """A full cluster (one 8-GPU job per node, ending over the next 8 h) and `pending` jobs of
    the synthetic mix (1-32 GPUs, 4 teams, ~1 h estimates) submitted over the last day."""
    rng = np.random.default_rng(seed)
    cluster = bench_cluster(nodes)
    running = []
    for i, node in enumerate(cluster.nodes):
        started = NOW - float(rng.uniform(0, 8 * 3600))
        spec = JobSpec.model_validate(
            {
                "name": f"r{i}",
                "team": f"t{i % 4}",
                "gpus": 8,
                "state": "running",
                "started_s": started,
                "submitted_s": started,
                "placement": [{"node": node.name, "gpus": list(range(8))}],
            }
        )
        running.append(
            RunningJob(spec, ACCELERATOR, started, NOW + float(rng.uniform(0, 8 * 3600)))
        )
    sizes = rng.choice(SIZES, pending, p=WEIGHTS)
    runtimes = rng.lognormal(np.log(3600.0), 1.0, pending)
    submitted = np.sort(NOW - rng.uniform(0, 86_400, pending))
    waiting = [
        JobSpec.model_validate(
            {
                "name": f"p{i}",
                "team": f"t{i % 4}",
                "gpus": min(int(sizes[i]), 8),
                "workers": max(1, int(sizes[i]) // 8),
                "submitted_s": float(submitted[i]),
                "runtime_estimate_s": float(runtimes[i]),
            }
        )
        for i in range(pending)
    ]
    return running, waiting


def eta_s(profile: str = "default", pending: int = ETA_PENDING) -> float:
    """Seconds of `estimate_starts` over `pending` waiting jobs on a full 1,000-node cluster,
    with the cycle interval the ETA process uses for such a queue."""
    running, waiting = eta_inputs(pending)
    teams = TeamsSpec.model_validate(
        {
            "kind": "teams",
            "teams": [{"name": f"t{i}", "quota": {ACCELERATOR: ETA_NODES * 8}} for i in range(4)],
        }
    )
    result = estimate_starts(
        bench_cluster(ETA_NODES),
        teams,
        running,
        waiting,
        now_s=NOW,
        profile=profile,
        cycle_interval_s=queue_cycle_s(pending),
    )
    started = sum(s is not None for s in result.start_s.values())
    print(f"  eta {profile}: {result.wall_s:.2f} s, {started:,} of {pending:,} start", flush=True)
    return result.wall_s
