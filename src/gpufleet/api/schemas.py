"""Response bodies of the API (requests are `gpufleet.control.jobs.JobRequest` and friends)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class QueuePosition(BaseModel):
    team: int = Field(description="1-based position among the team's pending jobs.")
    cluster: int = Field(description="1-based position among all pending jobs.")


class EventOut(BaseModel):
    at_s: float
    kind: str
    attempt: int
    message: str


class JobOut(BaseModel):
    id: int
    name: str
    team: str
    project: str | None
    user: str
    kind: str
    state: str
    priority_class: str
    preemptible: bool
    request: dict[str, Any]
    command: list[str]
    attempt: int
    submitted_s: float
    queued_s: float
    started_s: float | None
    finished_s: float | None
    exit_code: int | None
    flavor: str | None
    placement: list[dict[str, Any]]
    reason: str
    queue_position: QueuePosition | None = None
    eta_s: float | None = Field(
        default=None, description="Estimated start (Unix seconds) from a forward simulation."
    )
    eta_is_estimate: bool = True
    gpu_hours: float = 0.0
    lost_gpu_hours: float = Field(
        default=0.0, description="GPU-hours redone after preemptions and crashes (no checkpoint)."
    )
    last_checkpoint_s: float | None
    checkpoint_interval_s: float | None
    runtime_estimate_s: float | None
    events: list[EventOut] | None = None


class JobList(BaseModel):
    jobs: list[JobOut]
    next_after_id: int | None = Field(default=None, description="Pass as after_id for more.")


class QuotaOut(BaseModel):
    flavor: str
    guaranteed_gpus: int
    limit_gpus: int | None
    borrowing_limit_gpus: int | None
    lending_limit_gpus: int | None
    used_gpus: float
    borrowed_gpus: float
    lent_gpus: float


class TeamOut(BaseModel):
    name: str
    cohort: str | None
    weight: float
    default_priority: str
    projects: list[str]
    quotas: list[QuotaOut]
    pending_jobs: int
    running_jobs: int
    fair_share: float = Field(description="Weighted dominant share of the cluster held now.")
    monthly_budget_gpu_h: float | None
    month_gpu_h: float
    budget_alerts: list[str] = Field(
        default_factory=list, description="Alerts at 80% and 100% of the monthly budget."
    )


class QueueOut(BaseModel):
    team: str
    pending: int
    running: int
    first: list[int]


NodeState = Literal["up", "down", "drain"]


class DeviceOut(BaseModel):
    index: int
    uuid: str = Field(description="From nvidia-smi where the executor found it, else node/gpuN.")
    allocated_milli: int = Field(description="Thousandths of this GPU held (1000: whole).")


class NodeOut(BaseModel):
    name: str
    accelerator: str
    gpus: int
    state: NodeState
    allocated_milli: int
    mig: list[list[Any]]
    devices: list[DeviceOut] = Field(default_factory=list)


class ClusterOut(BaseModel):
    name: str
    gpus: dict[str, int]
    allocated_gpus: dict[str, float]
    allocation_ratio: float
    utilization: float | None = Field(
        default=None, description="Busy share of the GPUs; None until utilisation is collected."
    )
    nodes: list[NodeOut]
