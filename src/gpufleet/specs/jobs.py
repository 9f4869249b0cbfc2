"""Jobs as the scheduler sees them: who asks, for what, in what shape, under which rules.

A request is exactly one of: whole GPUs (`gpus` per worker × `workers`, one or several
acceptable accelerators), a MIG profile, a GPU fraction, or an inference workload (model
and load) from which the scheduler derives the smallest slice that holds it. Running jobs
carry their placement, so one file can describe a cluster's state for `gpufleet schedule`.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import ConfigDict, Field, NonNegativeFloat, PositiveInt, model_validator

from gpufleet.quantities import PositiveSeconds, Seconds
from gpufleet.specs.base import Spec, kind_required
from gpufleet.specs.inference import ServingParams
from gpufleet.specs.model_ref import ModelSpec
from gpufleet.specs.names import AcceleratorName

JobKind = Literal["training", "inference", "interactive", "batch"]
Level = str  # a topology level name from the cluster spec (node, leaf, block, ...)


class TopologyConstraint(Spec):
    required: Level | None = Field(
        default=None, description="All workers within one group of this level, or wait."
    )
    preferred: Level | None = Field(
        default=None, description="Pack into one group of this level when possible."
    )


class InferenceLoad(Spec):
    """A workload-aware request: the scheduler sizes the slice from the model and load."""

    model: ModelSpec
    serving: ServingParams


class Placement(Spec):
    """Where a running job sits: node -> GPU indices, MIG slice ids or a fraction."""

    node: str
    gpus: list[int] = Field(default_factory=list)
    mig_slices: list[str] = Field(default_factory=list)
    fraction: float | None = Field(default=None, gt=0, le=1)


class JobSpec(Spec):
    name: str = Field(min_length=1)
    team: str = Field(min_length=1)
    project: str | None = None
    user: str | None = None
    kind: JobKind = "batch"
    priority_class: str | None = Field(
        default=None, description="Default: the team's default priority class."
    )
    gpus: PositiveInt | None = Field(default=None, description="Whole GPUs per worker.")
    workers: PositiveInt = Field(default=1, description="Gang size: all or nothing.")
    accelerators: list[AcceleratorName] = Field(
        default_factory=list, description="Acceptable accelerator types (default: any)."
    )
    mig_profile: str | None = Field(default=None, description="e.g. 3g.40gb")
    gpu_fraction: float | None = Field(default=None, gt=0, lt=1)
    workload: InferenceLoad | None = None
    topology: TopologyConstraint = TopologyConstraint()
    preemptible: bool = True
    allow_spot: bool | None = Field(
        default=None, description="Default: checkpointed training and batch may use spot."
    )
    checkpoint_interval_s: PositiveSeconds | None = None
    checkpoint_time_s: Seconds | None = None
    runtime_estimate_s: PositiveSeconds | None = None
    max_runtime_s: PositiveSeconds | None = None
    submitted_s: NonNegativeFloat = Field(
        default=0.0, description="When it joined the queue (for a requeued job: when requeued)."
    )
    order_key_s: NonNegativeFloat | None = Field(
        default=None,
        description="Its place in FIFO order when not `submitted_s` (default): the fifo, "
        "priority and fair-share orders break ties by this time, then by name. The control "
        "plane sets it for a lead's within-team move; age, starvation and waits still count "
        "from `submitted_s`.",
    )
    attained_gpu_s: NonNegativeFloat = Field(
        default=0.0,
        description="GPU-seconds of service received in earlier runs (before a preemption); "
        "the Tiresias order uses it.",
    )
    # state of a job already running (for one scheduling cycle over a given state)
    state: Literal["pending", "running"] = "pending"
    started_s: NonNegativeFloat | None = None
    last_checkpoint_s: NonNegativeFloat | None = None
    placement: list[Placement] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_request(self) -> Self:
        forms = [k for k in ("gpus", "mig_profile", "gpu_fraction", "workload") if getattr(self, k)]
        if len(forms) != 1:
            given = " and ".join(forms) if forms else "none"
            raise ValueError(
                f"give exactly one of gpus, mig_profile, gpu_fraction or workload (got {given})"
            )
        if self.workers > 1 and not self.gpus:
            raise ValueError("workers > 1 needs gpus per worker (slices and fractions are single)")
        if self.state == "running" and not self.placement:
            raise ValueError("a running job needs its placement")
        if self.state == "pending" and self.placement:
            raise ValueError("a pending job has no placement; set state: running")
        if self.gpus and self.placement:
            self._check_whole_placement()
        return self

    def _check_whole_placement(self) -> None:
        """A running whole-GPU job's placement holds exactly its GPUs: a file saying
        `gpus: 4` placed on 2 was accepted, and every count read from it (quota use, GPU-
        hours, the free GPUs beside it) then disagreed with the request."""
        held = sum(len(p.gpus) for p in self.placement)
        if held != self.total_gpus or any(p.mig_slices or p.fraction for p in self.placement):
            raise ValueError(
                f"the placement holds {held} whole GPUs"
                + (" and slices or fractions" if held == self.total_gpus else "")
                + f"; the job asks {self.gpus} x {self.workers} = {self.total_gpus}: "
                "list exactly its GPUs"
            )
        gpus = self.gpus or 1
        split = [len(p.gpus) for p in self.placement if len(p.gpus) % gpus]
        if split:  # a worker runs on one node: 4 GPUs of one worker split 2 + 2 is no placement
            raise ValueError(
                f"a node holds {split[0]} of its GPUs: each worker's {gpus} GPUs are on one "
                f"node, so each node's count is a multiple of {gpus}"
            )

    @property
    def total_gpus(self) -> int:
        return (self.gpus or 0) * self.workers

    @property
    def checkpoints(self) -> bool:
        """It saves its work (a checkpoint interval, or a checkpoint it reported), so an
        eviction costs only the work since the last save. Least-attained-service preemption
        evicts only such jobs (`sched.las`)."""
        return self.last_checkpoint_s is not None or self.checkpoint_interval_s is not None

    @property
    def spot_ok(self) -> bool:
        """Latency-sensitive serving never runs on spot; checkpointed work may."""
        if self.allow_spot is not None:
            return self.allow_spot and self.kind != "inference"
        return self.kind in ("training", "batch") and self.checkpoint_interval_s is not None


class JobsSpec(Spec):
    model_config = ConfigDict(**Spec.model_config, json_schema_extra=kind_required)

    kind: Literal["jobs"] = "jobs"
    jobs: list[JobSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique(self) -> Self:
        names = [j.name for j in self.jobs]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"jobs: names must be unique; repeated: {', '.join(dupes)}")
        return self
