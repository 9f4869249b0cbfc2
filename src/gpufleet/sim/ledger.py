"""A run's ledger: the GPU-second integrals behind its ratios, per job and per team, which
`sim.conservation` checks (held = useful + lost + gang wait + idle held, per job; the
recorder's team integrals = the jobs' holdings). Apart from the recorder (`sim.metrics`) so
that the checks read plain records, not the recorder that produced them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpufleet.sim.workload import TraceJob

# one change of the GPUs a job's team holds: (time, team, job kind, GPUs; < 0: released)
HeldChange = tuple[float, str, str, float]


@dataclass(frozen=True)
class JobHeld:
    """One job's holdings over a run, kept by the engine per job (not by the recorder), so
    the recorder's team integrals can be checked against them."""

    trace: TraceJob
    held_gpu_s: float  # GPU-seconds its units held (every attempt, partial gangs too)
    placed_gpus: float  # GPUs its last full start held, as quotas weigh them (0: never)
    flavor: str | None  # the accelerator of that start
    # where `held_gpu_s` went (the engine's per-job account): useful work (a completed
    # job's, or the work in progress of one unfinished at the end), work lost, and what
    # its pods held waiting for the rest of its gang; `completed` says which useful it is
    useful_gpu_s: float = 0.0
    lost_gpu_s: float = 0.0
    gang_wait_gpu_s: float = 0.0
    completed: bool = False
    # what it held beyond its request: the rest of the whole GPU a whole-GPU-only profile
    # ran its slice or fraction on (its useful and lost work are counted on its request)
    idle_gpu_s: float = 0.0


@dataclass(frozen=True)
class Ledger:
    """The integrals behind a run's ratios, in GPU-seconds over [start_s, end_s], for
    `sim.conservation`; `changes` only when the run was asked to keep them."""

    profile: str
    capacity_gpus: float
    start_s: float
    end_s: float
    held_gpu_s: float  # the cluster's GPUs held by jobs, integrated
    team_held_gpu_s: Mapping[str, float]
    jobs: Mapping[str, JobHeld]
    changes: tuple[HeldChange, ...] | None = field(default=None, repr=False)
