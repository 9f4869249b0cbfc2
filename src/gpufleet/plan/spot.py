"""What a training run loses on spot: the goodput model with the reclaims as interruptions.

A flat "spot costs 10 % extra" ignored the two things that decide it: how often a node is
reclaimed and how big the gang is (a reclaim of any of its nodes stops all of them). Here a
run on spot is the same run with a per-job interruption rate of nodes × reclaims per node-hour
added to its GPU failures; the goodput model (Daly's checkpoint interval, rework, restart)
prices both, and the overhead is the extra GPU-hours against the same run on demand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from gpufleet.estimate.goodput import Goodput, ReliabilityDefaults, default_reliability, goodput

SPOT_NODE_GPUS = 8  # GPUs per spot instance: every GPU training instance in the catalog has 8
SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True)
class RunInputs:
    """The goodput inputs a run was sized with besides its size (None: the defaults): the
    checkpoint storage the plan designs for it and the workload's reliability inputs. A
    what-if on the run (spot reclaims, the tornado's failure rate) changes one thing against
    these; against the defaults (2,000 GB/s of storage) it compared with a run the plan
    does not build."""

    storage_bytes_per_s: float | None = None
    gpu_mtbf_s: float | None = None
    restart_s: float | None = None
    checkpoint_interval_s: float | None = None


def spot_overhead_fraction(
    *,
    gpus: int,
    ideal_time_s: float,
    checkpoint_bytes: float,
    reclaims_per_node_day: float,
    node_gpus: int = SPOT_NODE_GPUS,
    run: RunInputs = RunInputs(),
) -> float | None:
    """Extra GPU-hours of the run on spot: goodput on demand ÷ goodput on spot − 1.

    `run`: the run's own goodput inputs, as its on-demand goodput was computed. With no
    interval given, each side checkpoints at its own Daly optimum: more often on spot.

    None when the run makes no progress on spot (reclaims come faster than it can
    checkpoint and restart): it must not be planned there.
    """
    if gpus <= 0 or ideal_time_s <= 0:
        raise ValueError(f"a spot run needs GPUs and time (got {gpus} GPUs, {ideal_time_s} s)")
    nodes = math.ceil(gpus / node_gpus)
    base = default_reliability()

    def run_with(defaults: ReliabilityDefaults) -> Goodput:
        return goodput(
            gpus=gpus,
            ideal_time_s=ideal_time_s,
            checkpoint_bytes=checkpoint_bytes,
            storage_bytes_per_s=run.storage_bytes_per_s,
            gpu_mtbf_s=run.gpu_mtbf_s,
            restart_s=run.restart_s,
            checkpoint_interval_s=run.checkpoint_interval_s,
            defaults=defaults,
        )

    on_demand = run_with(base)
    reclaims = replace(
        base,
        job_interruption_rate_per_hour=base.job_interruption_rate_per_hour
        + nodes * reclaims_per_node_day / 24.0,
    )
    on_spot = run_with(reclaims)
    if on_spot.breakdown or on_demand.breakdown:
        return None
    return float(on_demand.fraction) / float(on_spot.fraction) - 1.0
