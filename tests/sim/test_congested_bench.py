"""The congested benchmark's trace (issue 29) is congested: a queue that mostly holds 100+
jobs, not the uncongested stream's empty one. The benchmark itself (100,000 jobs per
profile) is in `make bench`; this checks its generator on a tenth of it."""

from __future__ import annotations

from gpufleet.sim.bench import (
    CONGESTED_LOAD,
    CONGESTED_NODES,
    congested,
    queue_depth,
    synthetic_workload,
)


def test_the_congested_stream_offers_the_clusters_full_capacity() -> None:
    jobs = synthetic_workload(CONGESTED_NODES, 20_000, CONGESTED_LOAD).jobs
    offered_gpu_s = sum(j.gpus * j.workers * j.duration_s for j in jobs)
    span_s = jobs[-1].submit_s - jobs[0].submit_s
    load = offered_gpu_s / (CONGESTED_NODES * 8 * span_s)
    assert 0.95 <= load <= 1.1


def test_a_tenth_of_the_congested_trace_already_queues_100_jobs_much_of_the_time() -> None:
    """10,000 jobs: >= 100 waiting in 47 % of samples (the 100,000-job trace: 65 %), up to
    ~270; the uncongested stream's queue stays empty."""
    depth = queue_depth(congested(10_000, "fifo").result)
    assert depth.share_at_least_100 >= 0.4
    assert depth.most >= 200
    idle = queue_depth(congested(2_000, "fifo", nodes=1250, load=0.7).result)
    assert idle.most < 100
